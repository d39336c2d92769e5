/**
 * The controller keeps working across a kube-apiserver restart (a private control plane, since
 * the shared one cannot be restarted): changes made after the restart reach the slices, and the
 * relist after reconnecting causes no write by itself.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { createKubeClient } from '../../src/kube/client.js';
import { createLogger } from '../../src/log.js';
import { parseOptions } from '../../cmd/controller/options.js';
import { startController, type RunningController } from '../../cmd/controller/run.js';
import { startControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { networkStatus } from '../unit/controller/fixtures.js';
import { createPod, createService, ourSlices, podPath, sliceAddresses, writeCount } from './helpers.js';

void describe('controller across an apiserver restart', () => {
  let cp: ControlPlane;
  let ctl: RunningController;
  let ns: string;

  before(async () => {
    cp = await startControlPlane();
    ns = uniqueName('rst');
    await cp.createNamespace(ns);
    const r = parseOptions(['--health-port', '0', '--health-host', '127.0.0.1', '--leader-elect', 'false', '--manage-sidecar-rbac', 'false', '--namespace', ns], {});
    if (!r.ok || r.value === 'help') throw new Error('bad options');
    ctl = await startController(createKubeClient(cp.connection), r.value, createLogger('controller', process.env['LOG_LEVEL'] ?? 'warn'));
    await waitFor('controller ready', () => ctl.isReady());
  });

  after(async () => {
    await ctl?.stop();
    await cp?.stop();
  });

  void test('slices follow changes made after the restart; no duplicate slices, no spurious writes', async () => {
    const status = (ip: string): string => networkStatus([{ name: `${ns}/net`, ips: [ip] }]);
    await createPod(cp.client, ns, 'a', { labels: { app: 'r' }, status: status('10.8.0.1') });
    await createService(cp.client, ns, 'svc', { network: 'net', selector: { app: 'r' } });
    await waitFor('published', async () => sliceAddresses(await ourSlices(cp.client, ns, 'svc')).join() === '10.8.0.1');
    await waitFor('idle', () => ctl.idle());

    await cp.restartApiserver();
    await createPod(cp.client, ns, 'b', { labels: { app: 'r' }, status: status('10.8.0.2') });
    await cp.client.delete(podPath(ns, 'a'));
    await waitFor('after restart', async () => sliceAddresses(await ourSlices(cp.client, ns, 'svc')).join() === '10.8.0.2', 60_000);
    assert.equal((await ourSlices(cp.client, ns, 'svc')).length, 1);

    await waitFor('idle', () => ctl.idle(), 30_000);
    const writes = writeCount(ctl.client);
    await sleep(3000);
    assert.equal(writeCount(ctl.client), writes);
  });
});
