/**
 * A policed "pod" for the MultiNetworkPolicy sidecar tests: the client pod (HTTP on its net1
 * address, its labels in a downwardAPI file, its pod object on net-a as Multus writes it) and two
 * peers a and b, on a real kube-apiserver; the real sidecar started in it on nftables; and the
 * probes those tests assert with (whether a peer reaches the pod, /readyz).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startControlPlane, type ControlPlane } from '../harness/controlplane.js';
import { httpRequests, startBackend, type Pod } from '../harness/netns.js';
import { waitFor } from '../harness/wait.js';
import { getIfExists, KubeApiError } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import { podObject } from './state-fixtures.js';
import { probe, spawnSidecar, startSidecarEnv, type SidecarEnv, type SidecarProcess } from './runtime-harness.js';

/** The list at `path`, or undefined while the API is not served yet: right after a CRD is created the apiserver answers 429 ("storage is (re)initializing") for a moment. */
export async function policiesServed(client: ControlPlane['client'], path: string): Promise<unknown> {
  try {
    return await getIfExists(client, path);
  } catch (e) {
    if (e instanceof KubeApiError && e.status === 429) return undefined;
    throw e;
  }
}

export interface PolicedPod {
  readonly env: SidecarEnv;
  /** The folder of the downwardAPI labels file (`labels`). */
  readonly dir: string;
  /** The policed pod. */
  readonly pod: Pod;
  peer(name: 'a' | 'b'): Pod;
  /** Whether `from` gets an HTTP reply from the policed pod's net1 address (a drop times out). */
  reaches(from: Pod): Promise<boolean>;
  /** Waits until peers a and b reach the pod as `want` says. */
  expectReach(what: string, want: { a: boolean; b: boolean }): Promise<void>;
  /** Starts the sidecar (nftables, the labels file, a short policy API retry) as env.sidecar. */
  start(extra?: Record<string, string>): SidecarProcess;
  ready(): Promise<number>;
  waitReady(s: SidecarProcess): Promise<void>;
  close(): Promise<void>;
}

const tail = (s: SidecarProcess | undefined, n: number): string =>
  (s?.logs() ?? [])
    .slice(-n)
    .map((l) => JSON.stringify(l))
    .join('\n');

/** The client pod labelled app=p (its labels file), serving HTTP on net1, its pod object on `${ns}/net-a`; peers a and b. */
export async function startPolicedPod(o: { nsPrefix: string; healthPort: number; controlPlane?: () => Promise<ControlPlane> }): Promise<PolicedPod> {
  const env = await startSidecarEnv({ controlPlane: o.controlPlane ?? (() => startControlPlane()), nsPrefix: o.nsPrefix, backends: [{ name: 'a' }, { name: 'b' }] });
  const { cp, topo, ns } = env;
  const p = env.client;
  const dir = mkdtempSync(join(tmpdir(), 'mpx-policy-'));
  await startBackend(topo, p, { addresses: [p.net1.ipv4] });
  // The downwardAPI labels file, as the kubelet writes it.
  writeFileSync(join(dir, 'labels'), 'app="p"\n');
  const status = [
    { name: 'kindnet', interface: 'eth0', ips: [p.eth0.ipv4], default: true },
    { name: `${ns}/net-a`, interface: 'net1', ips: [`${p.net1.ipv4}/24`] },
  ];
  await cp.client.create(apiPath('', 'v1', 'pods', ns), podObject(ns, 'client', { serviceNetwork: 'net-a', status }));
  await env.relay.attach(p);

  const peer = (name: 'a' | 'b'): Pod => topo.pod(name);
  const reaches = async (from: Pod): Promise<boolean> => (await httpRequests(topo, from, `http://${p.net1.ipv4}:80/`, 1, 800))[0]?.error === undefined;
  const ready = (): Promise<number> => probe(topo, p, o.healthPort, '/readyz');
  return {
    env,
    dir,
    pod: p,
    peer,
    reaches,
    ready,
    async expectReach(what, want) {
      let have = { a: false, b: false };
      await waitFor(
        what,
        async () => {
          have = { a: await reaches(peer('a')), b: await reaches(peer('b')) };
          return have.a === want.a && have.b === want.b;
        },
        20_000,
        () => `have ${JSON.stringify(have)}, want ${JSON.stringify(want)}; log: ${tail(env.sidecar, 8)}`,
      );
    },
    start(extra = {}) {
      env.sidecar = spawnSidecar(topo, p, {
        podName: 'client',
        podNamespace: ns,
        kubeconfig: cp.kubeconfigPath,
        healthPort: o.healthPort,
        env: { DATAPLANE_BACKEND: 'nftables', POD_LABELS_FILE: join(dir, 'labels'), POLICY_API_RETRY_MS: '1000', ...extra },
      });
      return env.sidecar;
    },
    async waitReady(s) {
      await waitFor(
        '/readyz 200',
        async () => (await ready()) === 200,
        30_000,
        () => `${tail(s, 10)}\n${s.stderr()}`,
      );
    },
    async close() {
      await env.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
