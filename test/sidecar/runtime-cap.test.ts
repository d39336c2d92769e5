/**
 * The per-network cap in the running sidecar runtime (in this process, against the real
 * kube-apiserver): past the cap (in Service ports), the namespace over its share (here the only
 * one) keeps its first Services by name, the others are named in a Warning Event with the
 * namespace and counted in the metric; once under the cap again all are served and the metric is 0.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { apiPath } from '../../src/kube/paths.js';
import type { DesiredState } from '../../src/dataplane/core/model.js';
import { formatDownwardMap } from '../../src/annotations/downward-api.js';
import { NETWORK_STATUS_ANNOTATION, SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import { createLogger } from '../../src/log.js';
import { prom } from '../../src/metrics.js';
import { createSidecarMetrics } from '../../cmd/sidecar/metrics.js';
import { createSidecarRuntime, type SidecarRuntime } from '../../cmd/sidecar/runtime.js';
import type { Say } from '../../cmd/sidecar/problems.js';
import { serviceObject, sliceObject } from './state-fixtures.js';
import { recordingDataplane } from './recording-dataplane.js';

void describe('sidecar runtime: Services per network are capped', () => {
  let cp: ControlPlane;
  let ns = '';
  let rt: SidecarRuntime | undefined;
  let dir = '';

  before(async () => {
    cp = await useControlPlane();
    ns = uniqueName('rt-cap');
    await cp.createNamespace(ns);
    dir = mkdtempSync(join(tmpdir(), 'podinfo-cap-'));
  });

  after(async () => {
    await rt?.stop();
    rmSync(dir, { recursive: true, force: true });
    await cp?.client.delete(apiPath('', 'v1', 'namespaces', undefined, ns));
    await cp?.stop();
  });

  void test('cap 2 of 3: s-a and s-b served, s-c named in an Event and counted; deleting s-a brings s-c in and the metric to 0', async () => {
    for (const [i, name] of ['s-c', 's-a', 's-b'].entries()) {
      await cp.client.create(apiPath('', 'v1', 'services', ns), serviceObject(ns, name, { networks: 'net-a', ports: [{ port: 80 }] }));
      await cp.client.create(
        apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns),
        sliceObject(ns, `${name}-1`, { service: name, network: `${ns}/net-a`, family: 4, ports: [{ port: 80 }], endpoints: [{ ip: `192.0.2.${20 + i}`, ready: true }] }),
      );
    }
    writeFileSync(
      join(dir, 'annotations'),
      formatDownwardMap({ [SERVICE_NETWORK_ANNOTATION]: 'net-a', [NETWORK_STATUS_ANNOTATION]: JSON.stringify([{ name: `${ns}/net-a`, interface: 'net1', ips: ['192.0.2.10'] }]) }),
    );
    const states: DesiredState[] = [];
    const said: Say[] = [];
    const metrics = createSidecarMetrics(new prom.Registry());
    rt = createSidecarRuntime(
      {
        podName: 'client',
        podNamespace: ns,
        annotationsFile: join(dir, 'annotations'),
        maxServicesPerNetwork: 2,
        minSyncIntervalMs: 20,
        retryMinMs: 50,
        retryMaxMs: 500,
        stuckAfterMs: 60_000,
        informer: { minBackoffMs: 50, maxBackoffMs: 500 },
      },
      { client: cp.client, dataplane: recordingDataplane(states), log: createLogger('sidecar', 'silent'), metrics, event: (s) => said.push(s) },
    );
    rt.start();
    const served = (): string[] => [...new Set((states.at(-1)?.targets ?? []).map((t) => t.service))].sort();
    const dropped = async (): Promise<string> => (await metrics.registry.metrics()).split('\n').find((l) => l.startsWith('multus_proxy_sidecar_services_dropped{')) ?? '';
    await waitFor(
      'ready, two served',
      () => rt!.ready().ready && served().length === 2,
      15_000,
      () => JSON.stringify(served()),
    );
    assert.deepEqual(served(), [`${ns}/s-a`, `${ns}/s-b`]);
    const ev = said.find((s) => s.reason === 'ServiceCapReached');
    assert.ok(ev, JSON.stringify(said));
    assert.equal(ev.type, 'Warning');
    assert.match(
      ev.message,
      new RegExp(
        `network ${ns}/net-a has 3 Service ports \\(targets\\), more than this sidecar serves \\(2, MAX_SERVICES_PER_NETWORK\\); namespace ${ns} asks for 3, over its fair share of 2, so 1 of its Services are not served: ${ns}/s-c;`,
      ),
    );
    assert.equal(await dropped(), `multus_proxy_sidecar_services_dropped{network="${ns}/net-a"} 1`);

    await cp.client.delete(apiPath('', 'v1', 'services', ns, 's-a'));
    await waitFor(
      's-b and s-c served',
      () => JSON.stringify(served()) === JSON.stringify([`${ns}/s-b`, `${ns}/s-c`]),
      15_000,
      () => JSON.stringify(served()),
    );
    await waitFor(
      'metric 0',
      async () => (await dropped()).endsWith(' 0'),
      5_000,
      () => 'metric not 0',
    );
    assert.equal(said.filter((s) => s.reason === 'ServiceCapReached').length, 1, 'one Event while the same Services are left out');
  });
});
