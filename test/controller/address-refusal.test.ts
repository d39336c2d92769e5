/**
 * Addresses a pod claims in network-status are tenant input: the controller refuses the
 * ones that are never a pod's own (loopback and the other special classes, a Node's own address),
 * each with an Event naming the pod and the address, and keeps publishing everyone else. Before
 * this, one `127.0.0.1` made the apiserver answer 422 for the whole slice and the Service's slices
 * froze: a new replica never reached them. Addresses outside the range the network's NAD hands out
 * (whereabouts, host-local, static) are refused the same way, naming the NAD and its range.
 * And what the apiserver still refuses (422) holds back only what it names: a pod whose
 * network-status lists 101 good addresses on one network passes the project's checks, and the
 * apiserver refuses that endpoint ("must have at most 100 items"). Real apiserver; the controller
 * watches this namespace.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { apiPath } from '../../src/kube/paths.js';
import type { V1EndpointSlice } from '../../src/kube/types.js';
import { NETWORK_STATUS_ANNOTATION, SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import type { RunningController } from '../../cmd/controller/run.js';
import { useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { networkStatus } from '../unit/controller/fixtures.js';
import { createPod, createService, podPath, startNamespacedController, ourSlices, serviceEvents, sliceAddresses } from './helpers.js';

void describe('controller refuses addresses a pod may not claim', () => {
  let cp: ControlPlane;
  let ns: string;
  let node: string;
  let ctl: RunningController;
  const status = (ips: string[]): string => networkStatus([{ name: `${ns}/macvlan1`, ips }]);
  const waitSlices = async (svc: string, what: string, check: (s: V1EndpointSlice[]) => boolean): Promise<V1EndpointSlice[]> => {
    let last: V1EndpointSlice[] = [];
    await waitFor(
      `${svc}: ${what}`,
      async () => check((last = await ourSlices(cp.client, ns, svc))),
      15_000,
      () => JSON.stringify(sliceAddresses(last)),
    );
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
    await cp.client.replace(apiPath('', 'v1', 'nodes', undefined, node) + '/status', {
      ...n,
      status: {
        addresses: [
          { type: 'InternalIP', address: '10.2.200.1' },
          { type: 'Hostname', address: node },
        ],
      },
    });
    ctl = await startNamespacedController(cp.connection, ns);
  });

  after(async () => {
    await ctl?.stop();
    await cp?.client.delete(apiPath('', 'v1', 'namespaces', undefined, ns));
    await cp?.client.delete(apiPath('', 'v1', 'nodes', undefined, node));
    await cp?.stop();
  });

  const nadPath = (name?: string): string => apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', ns, name);
  const putNad = async (name: string, ipam: unknown): Promise<void> => {
    const config = JSON.stringify({ cniVersion: '0.3.1', type: 'macvlan', master: 'eth1', ipam });
    const existing = await cp.client.get<{ metadata: object }>(nadPath(name)).catch(() => undefined);
    const body = { apiVersion: 'k8s.cni.cncf.io/v1', kind: 'NetworkAttachmentDefinition', metadata: { name, namespace: ns }, spec: { config } };
    if (existing === undefined) await cp.client.create(nadPath(), body);
    else await cp.client.replace(nadPath(name), { ...body, metadata: existing.metadata });
  };
  const refusedText = async (svc: string, needles: string[]): Promise<string> => {
    let text = '';
    await waitFor(
      `AddressRefused Events on ${svc} naming ${needles.join(', ')}`,
      async () => {
        const events = (await serviceEvents(cp.client, ns, svc)).filter((e) => e.reason === 'AddressRefused');
        text = events.map((e) => e.message ?? '').join('\n');
        return needles.every((m) => text.includes(m));
      },
      15_000,
      () => text,
    );
    return text;
  };

  void test("addresses outside the NAD's whereabouts range are left out with an Event naming pod, address, NAD and range; a range change is followed", async () => {
    const svc = 'ranged';
    const wstatus = (ips: string[]): string => networkStatus([{ name: `${ns}/wb`, ips }]);
    await putNad('wb', { type: 'whereabouts', range: '10.2.128.0/24', range_end: '10.2.128.99', exclude: ['10.2.128.50/31'], ipRanges: [{ range: 'fd00:2::/64' }] });
    await createPod(cp.client, ns, 'in-range', { labels: { app: 'ranged' }, status: wstatus(['10.2.128.10', 'fd00:2::10']) });
    await createPod(cp.client, ns, 'outside', { labels: { app: 'ranged' }, status: wstatus(['10.9.9.9', '10.2.128.11', '10.2.128.150', '10.2.128.50', 'fd00:3::1', 'fd00:2::11']) });
    await createService(cp.client, ns, svc, { network: 'wb', selector: { app: 'ranged' } });
    await waitSlices(svc, 'only the in-range addresses', (s) => sliceAddresses(s, 'IPv4').join() === '10.2.128.10,10.2.128.11' && sliceAddresses(s, 'IPv6').join() === 'fd00:2::10,fd00:2::11');
    const text = await refusedText(svc, ['10.9.9.9 is outside the IPAM range', '10.2.128.150 is outside', '10.2.128.50 is outside', 'fd00:3::1 is outside']);
    assert.match(text, new RegExp(`Pod ${ns}/outside: `));
    assert.ok(text.includes(`NetworkAttachmentDefinition ${ns}/wb (whereabouts 10.2.128.0/24 to 10.2.128.99 except 10.2.128.50/31, fd00:2::/64)`), text);
    assert.ok(!text.includes('in-range'), text);

    // The NAD's owner widens the range: the controller follows the NAD, no pod change needed.
    await putNad('wb', { type: 'whereabouts', ipRanges: [{ range: '10.2.128.0/24' }, { range: '10.9.9.0/24' }, { range: 'fd00:2::/64' }] });
    await waitSlices(
      svc,
      'the widened range',
      (s) => sliceAddresses(s, 'IPv4').join() === '10.2.128.10,10.2.128.11,10.2.128.150,10.2.128.50,10.9.9.9' && sliceAddresses(s, 'IPv6').join() === 'fd00:2::10,fd00:2::11',
    );
  });

  void test('host-local and static ranges are read; a malformed or unreadable IPAM config publishes as before, the malformed one with a Warning naming NAD, key and fix', async () => {
    const cases: [nad: string, ipam: unknown, published: string][] = [
      ['hl', { type: 'host-local', ranges: [[{ subnet: '10.3.0.0/16', rangeStart: '10.3.1.0', rangeEnd: '10.3.1.255' }]] }, '10.3.1.7'],
      ['st', { type: 'static', addresses: [{ address: '10.4.0.5/24' }] }, '10.4.0.7'],
      ['dh', { type: 'dhcp' }, '10.5.0.7,10.99.0.7'],
      ['bad', { type: 'whereabouts', range: '10.6.0.0' }, '10.6.0.7,10.99.0.7'],
    ];
    for (const [nad, ipam, published] of cases) {
      await putNad(nad, ipam);
      const first = published.split(',')[0] ?? '';
      await createPod(cp.client, ns, `p-${nad}`, { labels: { app: `r-${nad}` }, status: networkStatus([{ name: `${ns}/${nad}`, ips: [first, '10.99.0.7'] }]) });
      await createService(cp.client, ns, `r-${nad}`, { network: nad, selector: { app: `r-${nad}` } });
    }
    for (const [nad, , published] of cases) await waitSlices(`r-${nad}`, published, (s) => sliceAddresses(s, 'IPv4').join() === published);
    assert.match(await refusedText('r-hl', ['10.99.0.7 is outside']), /host-local 10\.3\.0\.0\/16 from 10\.3\.1\.0 to 10\.3\.1\.255/);
    assert.match(await refusedText('r-st', ['10.99.0.7 is outside']), /static 10\.4\.0\.5\/24/);
    let text = '';
    await waitFor(
      'NadIpamInvalid on r-bad',
      async () => {
        text = (await serviceEvents(cp.client, ns, 'r-bad'))
          .filter((e) => e.reason === 'NadIpamInvalid')
          .map((e) => e.message ?? '')
          .join('\n');
        return text !== '';
      },
      15_000,
      () => text,
    );
    assert.match(text, new RegExp(`NetworkAttachmentDefinition ${ns}/bad: spec.config "ipam" "range" "10.6.0.0": has no prefix length; write "range" as a CIDR`));
    assert.match(text, /published without the IPAM range check/);
    assert.equal((await serviceEvents(cp.client, ns, 'r-dh')).filter((e) => e.reason === 'AddressRefused' || e.reason === 'NadIpamInvalid').length, 0);
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
    await waitFor(
      'AddressRefused Events name the pod and each address',
      async () => {
        const events = (await serviceEvents(cp.client, ns, svc)).filter((e) => e.reason === 'AddressRefused');
        text = events.map((e) => e.message ?? '').join('\n');
        return ['127.0.0.1 is a loopback', '10.2.200.1 is a Node'].every((m) => text.includes(m));
      },
      15_000,
      () => text,
    );
    assert.match(text, new RegExp(`Pod ${ns}/bad: `));
    const metrics = await (await fetch(`http://127.0.0.1:${ctl.health.port}/metrics`)).text();
    assert.match(metrics, /pods_skipped_total\{reason="AddressRefused"\} [1-9]/);
  });
  // A slice the apiserver refuses (422) does not hold back the other endpoints (before: the
  // reconcile threw at the first refused slice, so nothing of the Service was written again).
  const tooMany = Array.from({ length: 101 }, (_, i) => `10.3.1.${i + 1}`);
  const twoNets = (one: string[], two: string[]): string =>
    networkStatus([
      { name: `${ns}/macvlan1`, ips: one },
      { name: `${ns}/macvlan2`, ips: two },
    ]);
  const onNetwork = (slices: V1EndpointSlice[], nad: string): string[] => sliceAddresses(slices.filter((s) => s.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION] === `${ns}/${nad}`));

  void test('101 addresses on one pod: its endpoint is left out with a SliceRefused Event naming slice, message and pod; the other pods and networks are written, a late replica arrives, the fixed pod returns', async () => {
    const svc = 'big';
    await createPod(cp.client, ns, 'big-a', { labels: { app: 'big' }, status: twoNets(['10.3.0.1'], ['10.4.0.1']) });
    await createPod(cp.client, ns, 'big', { labels: { app: 'big' }, status: twoNets(tooMany, ['10.4.0.2']) });
    await createPod(cp.client, ns, 'big-c', { labels: { app: 'big' }, status: twoNets(['10.3.0.3'], ['10.4.0.3']) });
    await createService(cp.client, ns, svc, { network: 'macvlan1,macvlan2', selector: { app: 'big' } });

    await waitSlices(
      svc,
      'both networks, every endpoint but the refused one',
      (s) => onNetwork(s, 'macvlan1').join() === '10.3.0.1,10.3.0.3' && onNetwork(s, 'macvlan2').join() === '10.4.0.1,10.4.0.2,10.4.0.3',
    );

    let text = '';
    await waitFor(
      'a SliceRefused Event',
      async () => {
        text = (await serviceEvents(cp.client, ns, svc))
          .filter((e) => e.reason === 'SliceRefused')
          .map((e) => e.message ?? '')
          .join('\n');
        return text !== '';
      },
      15_000,
      () => text,
    );
    assert.match(text, new RegExp(`the apiserver refused the create of a new EndpointSlice ${ns}/big-… \\(network ${ns}/macvlan1, IPv4\\) as invalid: `));
    assert.match(text, /must have at most 100 items/);
    assert.match(text, new RegExp(`Left out: Pod ${ns}/big \\(10\\.3\\.1\\.1, 10\\.3\\.1\\.2, 10\\.3\\.1\\.3 … 101 addresses\\)`));
    const metrics = await (await fetch(`http://127.0.0.1:${ctl.health.port}/metrics`)).text();
    assert.match(metrics, /slice_writes_refused_total\{verb="create"\} [1-9]/);

    // The slice is not frozen: a replica added while the bad pod stays reaches it (an update,
    // refused again and written without the bad endpoint).
    await createPod(cp.client, ns, 'big-late', { labels: { app: 'big' }, status: twoNets(['10.3.0.4'], ['10.4.0.4']) });
    await waitSlices(svc, 'the late replica', (s) => onNetwork(s, 'macvlan1').join() === '10.3.0.1,10.3.0.3,10.3.0.4' && onNetwork(s, 'macvlan2').join() === '10.4.0.1,10.4.0.2,10.4.0.3,10.4.0.4');
    await waitFor('an update refused too', async () => /slice_writes_refused_total\{verb="update"\} [1-9]/.test(await (await fetch(`http://127.0.0.1:${ctl.health.port}/metrics`)).text()));

    // Level-based: once the pod's status is fixed, the next (backed-off) reconcile publishes it.
    await cp.client.patch(podPath(ns, 'big'), { metadata: { annotations: { [NETWORK_STATUS_ANNOTATION]: twoNets(['10.3.0.2'], ['10.4.0.2']) } } }, 'merge');
    await waitSlices(svc, 'the fixed pod', (s) => onNetwork(s, 'macvlan1').join() === '10.3.0.1,10.3.0.2,10.3.0.3,10.3.0.4');
  });
});
