/**
 * The watch path of the bundled sidecar (dist/sidecar.js as the image runs it) against a private
 * kube-apiserver that the test restarts:
 * - EndpointSlices created, updated and deleted in the apiserver show up as rules;
 * - slices of networks the pod does not have never reach it (server-side selector), and the
 *   Services watch is label-selected;
 * - a restart of the apiserver keeps the rules in place, and changes made right after it
 *   converge to the right rules;
 * - idle memory of the bundle against a bare node process (reported; bounded well below what
 *   @kubernetes/client-node alone would add).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startControlPlane, type ControlPlane } from '../harness/controlplane.js';
import { httpRequests, type Pod, type Topology } from '../harness/netns.js';
import { waitFor } from '../harness/wait.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1EndpointSlice, V1Service } from '../../src/kube/types.js';
import { podObject, serviceObject, sliceObject } from './state-fixtures.js';
import { endpointsOf, metricsText, ownedLines, probe, rssMiB, rulesOf, spawnSidecar, startSidecarEnv, type SidecarEnv } from './runtime-harness.js';

const HEALTH_PORT = 19181;
/** A bare node process is ~40 MB; @kubernetes/client-node alone adds ~78 MB. The sidecar must stay far below that. */
const MAX_EXTRA_RSS_MIB = 40;

void describe('sidecar watch path: bundled program, apiserver restart', () => {
  let env: SidecarEnv;
  let cp: ControlPlane;
  let topo: Topology;
  let client: Pod;
  let ns = '';
  let distDir = '';
  /** net1 IPv4 address of a backend pod. */
  const addr = (name: string): string => topo.pod(name).net1.ipv4;
  const ips: Record<string, string> = {};
  const slicesPath = (): string => apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns);

  const slice = (service: string, name: string, eps: { ip: string; ready?: boolean }[], network = `${ns}/net-a`): V1EndpointSlice =>
    sliceObject(ns, name, { service, network, family: 4, ports: [{ port: 80 }], endpoints: eps });
  const replaceSlice = async (s: V1EndpointSlice): Promise<void> => {
    const cur = await cp.client.get<V1EndpointSlice>(`${slicesPath()}/${s.metadata!.name!}`);
    await cp.client.replace(`${slicesPath()}/${s.metadata!.name!}`, { ...s, metadata: { ...s.metadata, resourceVersion: cur.metadata?.resourceVersion } });
  };

  /** Waits until every listed Service's cluster IP has exactly these DNAT destinations (undefined: no rules). */
  async function expectRules(what: string, want: Record<string, string[] | undefined>): Promise<void> {
    let have: Record<string, string[] | undefined> = {};
    await waitFor(
      what,
      async () => {
        const save = await rulesOf(topo, client);
        have = Object.fromEntries(Object.keys(want).map((svc) => [svc, endpointsOf(save, ips[svc] ?? '')]));
        return JSON.stringify(have) === JSON.stringify(want);
      },
      20_000,
      () => `have ${JSON.stringify(have)}, want ${JSON.stringify(want)}`,
    );
  }

  before(async () => {
    distDir = mkdtempSync(join(tmpdir(), 'mpx-dist-'));
    execFileSync(process.execPath, ['scripts/build.mjs', '--only', 'sidecar', '--outdir', distDir], { stdio: 'pipe' });
    env = await startSidecarEnv({ controlPlane: () => startControlPlane(), nsPrefix: 'scw', backends: [{ name: 'b1' }, { name: 'b2' }] });
    ({ cp, topo, client, ns } = env);
    await env.relay.attach(client);
    const status = [{ name: `${ns}/net-a`, interface: 'net1', ips: [client.net1.ipv4] }];
    await cp.client.create(apiPath('', 'v1', 'pods', ns), podObject(ns, 'client', { serviceNetwork: 'net-a', status }));
    for (const name of ['alpha', 'beta', 'gamma']) {
      const svc = await cp.client.create<V1Service>(apiPath('', 'v1', 'services', ns), serviceObject(ns, name, { networks: 'net-a', ports: [{ port: 80 }] }));
      ips[name] = svc.spec?.clusterIP ?? '';
    }
    // A Service without the multus-proxy label: never watched, never served.
    const plain = serviceObject(ns, 'plain', { networks: 'net-a', ports: [{ port: 80 }] });
    delete plain.metadata!.labels;
    ips['plain'] = (await cp.client.create<V1Service>(apiPath('', 'v1', 'services', ns), plain)).spec?.clusterIP ?? '';
    await cp.client.create(slicesPath(), slice('alpha', 'alpha-1', [{ ip: addr('b1') }, { ip: addr('b2') }]));
    await cp.client.create(slicesPath(), slice('plain', 'plain-1', [{ ip: addr('b1') }]));
  });

  after(async () => {
    await env?.close();
    if (distDir !== '') rmSync(distDir, { recursive: true, force: true });
  });

  void test('the bundled sidecar syncs, and its idle memory stays far below a client-node process', async (t) => {
    env.sidecar = spawnSidecar(topo, client, { podName: 'client', podNamespace: ns, kubeconfig: cp.kubeconfigPath, healthPort: HEALTH_PORT, bundle: join(distDir, 'sidecar.js') });
    const s = env.sidecar;
    await waitFor(
      '/readyz 200',
      async () => (await probe(topo, client, HEALTH_PORT, '/readyz')) === 200,
      30_000,
      () => s.stderr(),
    );
    await expectRules('alpha served, beta without endpoints, plain not served', { alpha: [`${addr('b1')}:80`, `${addr('b2')}:80`], beta: [], plain: undefined });

    // Idle: let start-up garbage settle, then compare with a bare node process measured the same way.
    await sleep(3000);
    const sidecar = rssMiB(s.process.pid!);
    const bare = spawn(process.execPath, ['-e', 'setInterval(()=>{},1000)'], { stdio: 'ignore' });
    try {
      await sleep(1500);
      const base = rssMiB(bare.pid!);
      t.diagnostic(`idle RSS: sidecar bundle ${sidecar.toFixed(1)} MiB, bare node ${base.toFixed(1)} MiB, extra ${(sidecar - base).toFixed(1)} MiB`);
      assert.ok(sidecar - base < MAX_EXTRA_RSS_MIB, `sidecar ${sidecar.toFixed(1)} MiB vs bare node ${base.toFixed(1)} MiB`);
    } finally {
      bare.kill('SIGKILL');
    }
  });

  void test('slices created, updated and deleted in the apiserver show up as rules', async () => {
    await cp.client.create(slicesPath(), slice('beta', 'beta-1', [{ ip: addr('b2') }]));
    await expectRules('beta gets its endpoint', { alpha: [`${addr('b1')}:80`, `${addr('b2')}:80`], beta: [`${addr('b2')}:80`] });
    // A second slice of the same Service adds to it.
    await cp.client.create(slicesPath(), slice('beta', 'beta-2', [{ ip: addr('b1') }]));
    await expectRules('beta has both', { beta: [`${addr('b1')}:80`, `${addr('b2')}:80`] });
    await replaceSlice(slice('alpha', 'alpha-1', [{ ip: addr('b1'), ready: false }, { ip: addr('b2') }]));
    await expectRules('alpha loses the unready endpoint', { alpha: [`${addr('b2')}:80`] });
    await cp.client.delete(`${slicesPath()}/beta-2`);
    await expectRules('beta back to one endpoint', { beta: [`${addr('b2')}:80`] });
    // A slice on a network the pod lacks: filtered by the server, no change at all.
    await cp.client.create(slicesPath(), slice('gamma', 'gamma-other', [{ ip: addr('b1') }], `${ns}/net-z`));
    await sleep(300);
    await expectRules('gamma still without endpoints', { gamma: [] });
    const replies = await httpRequests(topo, client, `http://${ips['beta']}:80/`, 5);
    assert.deepEqual([...new Set(replies.map((r) => r.name ?? r.error))], ['b2']);
  });

  void test('an apiserver restart keeps the rules, and changes right after it converge', async () => {
    const before = ownedLines(await rulesOf(topo, client));
    await cp.restartApiserver();
    assert.deepEqual(ownedLines(await rulesOf(topo, client)), before, 'nothing removed while the apiserver was away');
    // Changes while the sidecar's watches are still reconnecting.
    await cp.client.delete(`${slicesPath()}/alpha-1`);
    await replaceSlice(slice('beta', 'beta-1', [{ ip: addr('b1') }, { ip: addr('b2') }]));
    await cp.client.create(slicesPath(), slice('gamma', 'gamma-1', [{ ip: addr('b1') }]));
    await expectRules('the state after the restart', {
      alpha: [],
      beta: [`${addr('b1')}:80`, `${addr('b2')}:80`],
      gamma: [`${addr('b1')}:80`],
      plain: undefined,
    });
    const gamma = await httpRequests(topo, client, `http://${ips['gamma']}:80/`, 3);
    assert.deepEqual([...new Set(gamma.map((r) => r.name ?? r.error))], ['b1']);
    assert.equal(await probe(topo, client, HEALTH_PORT, '/readyz'), 200);
    assert.equal(await probe(topo, client, HEALTH_PORT, '/healthz'), 200);
    const metrics = await metricsText(topo, client, HEALTH_PORT);
    assert.match(metrics, /^multus_proxy_sidecar_restore_failures_total 0$/m);
    assert.equal(env.sidecar!.exited(), false);
    const programmed = ownedLines(await rulesOf(topo, client));
    assert.equal(await env.sidecar!.terminate(), 0, env.sidecar!.stderr());
    assert.deepEqual(ownedLines(await rulesOf(topo, client)), programmed, 'the bundle leaves its rules in place when it stops');
  });
});
