/**
 * The native sidecar under a real kubelet: start order (the app's first request, made at start,
 * succeeds), restarts by the kubelet after `crictl stop` without restarting the app, and a client
 * that keeps curling the Service through three graceful sidecar stops.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { dump } from 'js-yaml';
import type { RealNode } from '../harness/node.js';
import { blogFile, createNamespace, SERVICE } from './cluster.js';
import { SIDECAR_CONTAINER_NAME } from '../../src/keys.js';

export const NS = 'sidecar-check';
const CLIENT = 'starter';

interface ContainerStatus {
  name: string;
  restartCount: number;
  started?: boolean;
  ready?: boolean;
  containerID?: string;
}
interface PodStatus {
  status?: { initContainerStatuses?: ContainerStatus[]; containerStatuses?: ContainerStatus[] };
}

export interface SidecarObservations {
  firstTry: string;
  /** Per stop: the sidecar's restartCount after it, and the app's. */
  restarts: { sidecar: number; app: number; restartedAfterMs: number }[];
  loop: { ok: number; failed: number; failures: string[] };
  deleteMs: number;
}

function clientPod(url: string): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: CLIENT,
      annotations: { 'k8s.v1.cni.cncf.io/networks': 'macvlan1', 'k8s.v1.cni.cncf.io/service-network': 'macvlan1' },
    },
    spec: {
      containers: [
        {
          name: 'app',
          image: 'ghcr.io/redhat-nfvpe/multus-service-demo:fedora-tools',
          // The app's very first action is a request to the Service: it only works if the
          // sidecar's rules were in place before the app started.
          command: ['sh', '-c', `if curl -s -m 3 -o /dev/null ${url}; then echo FIRST-TRY-OK; else echo FIRST-TRY-FAILED $?; fi; exec /sbin/init`],
        },
      ],
    },
  };
}

async function statuses(node: RealNode): Promise<{ sidecar?: ContainerStatus; app?: ContainerStatus }> {
  const p = JSON.parse(await node.kubectl(['get', 'pod', '-n', NS, CLIENT, '-o', 'json'])) as PodStatus;
  return {
    sidecar: p.status?.initContainerStatuses?.find((c) => c.name === SIDECAR_CONTAINER_NAME),
    app: p.status?.containerStatuses?.find((c) => c.name === 'app'),
  };
}

export async function runSidecar(node: RealNode, log: (m: string) => void): Promise<SidecarObservations> {
  await createNamespace(node, NS, true);
  await node.apply(blogFile('net-attach.yml'), NS);
  await node.apply(blogFile('service.yml'), NS);
  await node.apply(blogFile('deployment.yml'), NS);
  await node.wait(`deployment/${SERVICE}`, 'condition=Available', { namespace: NS, timeoutMs: 180_000 });
  const url = `${SERVICE}.${NS}.svc.cluster.local`;
  await node.apply(dump(clientPod(url)), NS);
  await node.wait(`pod/${CLIENT}`, 'condition=Ready', { namespace: NS, timeoutMs: 180_000 });
  const firstTry = (await node.kubectl(['logs', '-n', NS, CLIENT, '-c', 'app'])).trim();
  log(`client's first request at start: ${firstTry}`);

  // A loop of curls, 5 a second, until told to stop; it prints one line per request.
  const loopScript = `rm -f /tmp/stop; while [ ! -e /tmp/stop ]; do if curl -s -m 1 -o /dev/null ${url}; then echo ok; else echo "fail:$? $(date +%s.%N)"; fi; sleep 0.2; done`;
  const loop = node.exec(NS, CLIENT, ['sh', '-c', loopScript], { container: 'app', timeoutMs: 600_000 });
  await delay(2_000);
  const restarts: SidecarObservations['restarts'] = [];
  for (let i = 0; i < 3; i++) {
    const before = await statuses(node);
    const id = (before.sidecar?.containerID ?? '').replace(/^containerd:\/\//, '');
    if (!id) throw new Error(`no running sidecar container in ${NS}/${CLIENT}: ${JSON.stringify(before)}`);
    const t0 = Date.now();
    await node.crictl(['stop', '--timeout', '10', id], { timeoutMs: 30_000 });
    // The kubelet restarts a native sidecar after its crash-loop back-off (capped at 2 s on the test node).
    for (;;) {
      const s = await statuses(node);
      if ((s.sidecar?.restartCount ?? 0) > (before.sidecar?.restartCount ?? 0) && s.sidecar?.started) {
        restarts.push({ sidecar: s.sidecar.restartCount, app: s.app?.restartCount ?? -1, restartedAfterMs: Date.now() - t0 });
        log(`sidecar stop ${i + 1}: restarted after ${Date.now() - t0} ms (sidecar restarts ${s.sidecar.restartCount}, app ${s.app?.restartCount})`);
        break;
      }
      if (Date.now() - t0 > 180_000) throw new Error(`the kubelet did not restart the sidecar within 180 s: ${JSON.stringify(s)}`);
      await delay(500);
    }
    await delay(3_000);
  }
  await node.exec(NS, CLIENT, ['touch', '/tmp/stop'], { container: 'app' });
  const out = (await loop).stdout.trim().split('\n').filter(Boolean);
  const failures = out.filter((l) => l.startsWith('fail'));

  const t0 = Date.now();
  await node.kubectl(['delete', 'pod', '-n', NS, CLIENT, '--wait=true', '--timeout=120s'], { timeoutMs: 130_000 });
  const deleteMs = Date.now() - t0;
  await node.kubectl(['delete', 'namespace', NS, '--wait=true', '--timeout=180s'], { timeoutMs: 190_000 });
  return { firstTry, restarts, loop: { ok: out.length - failures.length, failed: failures.length, failures: failures.slice(0, 10) }, deleteMs };
}
