/**
 * The sidecar reads its own pod's annotations from the downwardAPI file (cmd/sidecar/pod-file.ts), as
 * the webhook mounts it, and never asks the apiserver for pods: the client here refuses every pod
 * request, as the sidecar's RBAC now does. The file is written the way the kubelet's atomic writer
 * does it (a timestamped directory, the `..data` symlink swapped by rename), so a change is seen by
 * the directory watch; the periodic re-read catches a file that appears later.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { interpose } from '../harness/interpose.js';
import { apiPath } from '../../src/kube/paths.js';
import { KubeApiError } from '../../src/kube/client.js';
import type { DesiredState } from '../../src/dataplane/core/model.js';
import { formatDownwardMap } from '../../src/annotations/downward-api.js';
import { NETWORK_STATUS_ANNOTATION, SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import { createLogger } from '../../src/log.js';
import { prom } from '../../src/metrics.js';
import { createSidecarMetrics } from '../../cmd/sidecar/metrics.js';
import { createSidecarRuntime, type SidecarRuntime } from '../../cmd/sidecar/runtime.js';
import { watchAnnotationsFile } from '../../cmd/sidecar/pod-file.js';
import { serviceObject, sliceObject } from './state-fixtures.js';
import { recordingDataplane } from './recording-dataplane.js';

/** The kubelet's atomic writer: new `..<stamp>` directory, `..data_tmp` -> it, renamed over `..data`. */
function kubeletWrite(dir: string, annotations: Record<string, string>, n: number): void {
  const stamp = `..2026_11_24_00_00_00.${n}`;
  mkdirSync(join(dir, stamp));
  writeFileSync(join(dir, stamp, 'annotations'), formatDownwardMap(annotations));
  symlinkSync(stamp, join(dir, '..data_tmp'));
  renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
  if (n === 0) symlinkSync(join('..data', 'annotations'), join(dir, 'annotations'));
  else rmSync(join(dir, `..2026_11_24_00_00_00.${n - 1}`), { recursive: true });
}

const status = (ns: string): string =>
  JSON.stringify([
    { name: 'cbr0', interface: 'eth0', ips: ['10.244.0.9'], default: true },
    { name: `${ns}/net-a`, interface: 'net1', ips: ['192.0.2.10'] },
    { name: `${ns}/net-b`, interface: 'net2', ips: ['198.51.100.10'] },
  ]);

void describe('sidecar runtime: own pod from the downwardAPI file, no pods requests', () => {
  let cp: ControlPlane;
  let ns = '';
  let rt: SidecarRuntime | undefined;
  const dirs: string[] = [];

  before(async () => {
    cp = await useControlPlane();
    ns = uniqueName('rt-podfile');
    await cp.createNamespace(ns);
  });

  after(async () => {
    await rt?.stop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    await cp?.client.delete(apiPath('', 'v1', 'namespaces', undefined, ns));
    await cp?.stop();
  });

  void test('serves the networks the file names, follows a symlink swap within seconds, never lists pods', async () => {
    for (const [name, net, ip] of [
      ['web-a', 'net-a', '192.0.2.20'],
      ['web-b', 'net-b', '198.51.100.20'],
    ] as const) {
      await cp.client.create(apiPath('', 'v1', 'services', ns), serviceObject(ns, name, { networks: net, ports: [{ port: 80 }] }));
      await cp.client.create(
        apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns),
        sliceObject(ns, `${name}-1`, { service: name, network: `${ns}/${net}`, family: 4, ports: [{ port: 80 }], endpoints: [{ ip, ready: true }] }),
      );
    }
    const podRequests: string[] = [];
    const client = interpose(cp.client, {
      list: (p, o) => {
        if (p.includes('/pods')) {
          podRequests.push(p);
          return Promise.reject(new KubeApiError(403, 'pods is forbidden', 'Forbidden'));
        }
        return cp.client.list(p, o);
      },
    });
    const dir = mkdtempSync(join(tmpdir(), 'podinfo-'));
    dirs.push(dir);
    kubeletWrite(dir, { [SERVICE_NETWORK_ANNOTATION]: 'net-a', [NETWORK_STATUS_ANNOTATION]: status(ns), unrelated: 'line one\nline "two"' }, 0);

    const states: DesiredState[] = [];
    // The re-read is an hour away: only the watch can see the change below in time.
    rt = createSidecarRuntime(
      {
        podName: 'client',
        podNamespace: ns,
        annotationsFile: join(dir, 'annotations'),
        annotationsPollMs: 3_600_000,
        minSyncIntervalMs: 20,
        retryMinMs: 50,
        retryMaxMs: 500,
        stuckAfterMs: 60_000,
        informer: { minBackoffMs: 50, maxBackoffMs: 500 },
      },
      { client, dataplane: recordingDataplane(states), log: createLogger('sidecar', 'silent'), metrics: createSidecarMetrics(new prom.Registry()) },
    );
    rt.start();
    const served = (): string[] => (states.at(-1)?.targets ?? []).map((t) => `${t.service}:${t.endpoints.map((e) => e.ip).join(',')}`);
    await waitFor(
      'ready, serving web-a',
      () => rt!.ready().ready && served().includes(`${ns}/web-a:192.0.2.20`),
      15_000,
      () => JSON.stringify(served()),
    );
    assert.ok(!served().some((s) => s.startsWith(`${ns}/web-b`)), 'web-b is not on the networks the file names');

    const t0 = Date.now();
    kubeletWrite(dir, { [SERVICE_NETWORK_ANNOTATION]: 'net-b', [NETWORK_STATUS_ANNOTATION]: status(ns) }, 1);
    await waitFor(
      'web-b served after the swap',
      () => served().includes(`${ns}/web-b:198.51.100.20`),
      5_000,
      () => JSON.stringify(served()),
    );
    assert.ok(Date.now() - t0 < 5_000);
    assert.ok(!served().some((s) => s.startsWith(`${ns}/web-a`)), 'web-a is gone with net-a');
    assert.deepEqual(podRequests, [], 'the sidecar asked the apiserver for pods');
  });

  void test('a file that appears only later is read by the periodic re-read; a garbled file keeps the last good annotations', async () => {
    const parent = mkdtempSync(join(tmpdir(), 'podinfo-late-'));
    dirs.push(parent);
    const dir = join(parent, 'podinfo');
    const seen: Record<string, string>[] = [];
    const w = watchAnnotationsFile({ file: join(dir, 'annotations'), log: createLogger('sidecar', 'silent'), onChange: (a) => seen.push(a), pollMs: 100 });
    w.start();
    await w.synced;
    assert.equal(w.found(), false);
    mkdirSync(dir);
    kubeletWrite(dir, { a: '1' }, 0);
    await waitFor('the late file read', () => seen.length === 1, 5_000);
    assert.deepEqual(seen[0], { a: '1' });
    assert.equal(w.found(), true);
    writeFileSync(join(dir, '..2026_11_24_00_00_00.0', 'annotations'), 'a="unterminated\n');
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(seen.length, 1, 'a garbled file is not passed on');
    kubeletWrite(dir, { a: '2' }, 1);
    await waitFor('the next good file read', () => seen.length === 2, 5_000);
    assert.deepEqual(seen[1], { a: '2' });
    w.stop();
  });
});
