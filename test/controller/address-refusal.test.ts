/**
 * Addresses a pod claims in network-status are tenant input (issue 19): the controller refuses the
 * ones that are never a pod's own (loopback and the other special classes, a Node's own address),
 * each with an Event naming the pod and the address, and keeps publishing everyone else. Before
 * this, one `127.0.0.1` made the apiserver answer 422 for the whole slice and the Service's slices
 * froze: a new replica never reached them. Real apiserver; the controller watches this namespace.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { apiPath } from '../../src/kube/paths.js';
import type { V1EndpointSlice } from '../../src/kube/types.js';
import type { RunningController } from '../../src/controller/run.js';
import { useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { networkStatus } from '../unit/controller/fixtures.js';
import { createPod, createService, startNamespacedController, ourSlices, serviceEvents, sliceAddresses } from './helpers.js';

void describe('controller refuses addresses a pod may not claim', () => {
  let cp: ControlPlane;
  let ns: string;
  let node: string;
  let ctl: RunningController;
  const status = (ips: string[]): string => networkStatus([{ name: `${ns}/macvlan1`, ips }]);
  const waitSlices = async (svc: string, what: string, check: (s: V1EndpointSlice[]) => boolean): Promise<V1EndpointSlice[]> => {
    let last: V1EndpointSlice[] = [];
    await waitFor(`${svc}: ${what}`, async () => check((last = await ourSlices(cp.client, ns, svc))), 15_000, () => JSON.stringify(sliceAddresses(last)));
    return last;
  };

  before(async () => {
    cp = await useControlPlane();
    ns = uniqueName('addr');
    node = uniqueName('node');
    await cp.createNamespace(ns);
    // A Node whose own address a tenant's pod will claim.
    await cp.client.create(apiPath('', 'v1', 'nodes'), { apiVersion: 'v1', kind: 'Node', metadata: { name: node } });
    const n = await cp.client.get<{ status?: unknown }>(apiPath('', 'v1', 'nodes', undefined, node));
    await cp.client.replace(apiPath('', 'v1', 'nodes', undefined, node) + '/status', { ...n, status: { addresses: [{ type: 'InternalIP', address: '10.2.200.1' }, { type: 'Hostname', address: node }] } });
    ctl = await startNamespacedController(cp.connection, ns);
  });

  after(async () => {
    await ctl?.stop();
    await cp?.client.delete(apiPath('', 'v1', 'namespaces', undefined, ns));
    await cp?.client.delete(apiPath('', 'v1', 'nodes', undefined, node));
    await cp?.stop();
  });

  void test('loopback, link-local, multicast and a Node address are left out with Events; the rest is published and new replicas still arrive', async () => {
    const svc = 'web';
    await createPod(cp.client, ns, 'good', { labels: { app: 'web' }, status: status(['10.2.128.10']) });
    await createPod(cp.client, ns, 'bad', { labels: { app: 'web' }, status: status(['127.0.0.1', '10.2.128.11', '169.254.1.1', 'fe80::1', '224.0.0.5', '10.2.200.1', 'fd00:2::11']) });
    await createService(cp.client, ns, svc, { network: 'macvlan1', selector: { app: 'web' } });
    await waitSlices(svc, 'the good addresses of both pods', (s) => sliceAddresses(s, 'IPv4').join() === '10.2.128.10,10.2.128.11' && sliceAddresses(s, 'IPv6').join() === 'fd00:2::11');

    // The freeze: a replica added after the bad pod still reaches the slice.
    await createPod(cp.client, ns, 'late', { labels: { app: 'web' }, status: status(['10.2.128.12']) });
    const slices = await waitSlices(svc, 'the late replica', (s) => sliceAddresses(s, 'IPv4').join() === '10.2.128.10,10.2.128.11,10.2.128.12');
    const all = sliceAddresses(slices).join(' ');
    for (const a of ['127.0.0.1', '169.254.1.1', 'fe80::1', '224.0.0.5', '10.2.200.1']) assert.ok(!all.includes(a), `${a} published: ${all}`);

    let text = '';
    await waitFor('AddressRefused Events name the pod and each address', async () => {
      const events = (await serviceEvents(cp.client, ns, svc)).filter((e) => e.reason === 'AddressRefused');
      text = events.map((e) => e.message ?? '').join('\n');
      return ['127.0.0.1 is a loopback', '10.2.200.1 is a Node'].every((m) => text.includes(m));
    }, 15_000, () => text);
    assert.match(text, new RegExp(`Pod ${ns}/bad: `));
    const metrics = await (await fetch(`http://127.0.0.1:${ctl.health.port}/metrics`)).text();
    assert.match(metrics, /pods_skipped_total\{reason="AddressRefused"\} [1-9]/);
  });
});
