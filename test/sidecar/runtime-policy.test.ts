/**
 * MultiNetworkPolicy enforced by the real sidecar program (nftables) in a client "pod" network
 * namespace, against a private real kube-apiserver (the CRD is installed midway, so the sidecar
 * first runs without it), with real traffic from two peer pods on net1. The test writes the
 * policies and their address groups as the controller would (the slices built from the contract's
 * helpers, src/policy/address-group.ts):
 * - without the CRD there is no policy and no crash; once installed, a policy is enforced: the
 *   allowed peer connects, the denied one does not, and its drops are counted per policy;
 * - a policy change takes effect (the new peer's group written after the change, as the
 *   controller does), and so does a change of the pod's labels (its downwardAPI file);
 * - a port range written as v1beta2 (`endPort`) admits its last port: the sidecar reads the
 *   version that has the field (the apiserver prunes it from a v1beta1 read);
 * - a restart keeps the rules: while no sidecar runs and while the new one starts, the denied
 *   peer never gets through, and the allowed one still does;
 * - a fresh first sync is held (not ready, nothing written) until a selecting policy's groups are
 *   written for its generation;
 * - a group never written: after the hold the first sync goes ahead fail-closed, with a warning
 *   Event naming the policy;
 * - the iptables back end refuses: not ready, an Event naming DATAPLANE_BACKEND (--backend), and
 *   the last run's policy rules stay in place (its first sync writes nothing).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import type { ControlPlane } from '../harness/controlplane.js';
import type { Pod, Topology } from '../harness/netns.js';
import { waitFor } from '../harness/wait.js';
import { getIfExists } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import type { CoreV1Event, V1EndpointSlice } from '../../src/kube/types.js';
import { MULTI_NETWORK_POLICY_GROUP, MULTI_NETWORK_POLICY_RESOURCE, POLICY_FOR_ANNOTATION } from '../../src/keys.js';
import type { MultiNetworkPolicy, MultiNetworkPolicySpec } from '../../src/policy/api.js';
import { checkPolicy } from '../../src/policy/validate.js';
import { addressGroupKey, policyPeerQueries } from '../../src/policy/address-group.js';
import { REASON_POLICY_BACKEND_REFUSED, REASON_POLICY_GROUPS_MISSING } from '../../src/sidecar-contract.js';
import { groupSlice } from '../harness/address-groups.js';
import { metricsText, startHttpLoop, waitForLog, type SidecarEnv, type SidecarProcess } from './runtime-harness.js';
import { policiesServed, startPolicedPod, type PolicedPod } from './policy-runtime.js';

const HEALTH_PORT = 19183;
const CRD_FILE = join(import.meta.dirname, '..', '..', 'deploy', 'components', 'multi-networkpolicy', 'crd.yaml');

void describe('sidecar enforces MultiNetworkPolicy: real apiserver, real netns, real nft, real traffic', () => {
  let rt: PolicedPod;
  let env: SidecarEnv;
  let cp: ControlPlane;
  let topo: Topology;
  let p: Pod;
  let ns = '';
  /** Holds the downwardAPI labels file. */
  let dir = '';
  const peer = (name: 'a' | 'b'): Pod => rt.peer(name);
  const policies = (name?: string): string => apiPath(MULTI_NETWORK_POLICY_GROUP, 'v1beta1', MULTI_NETWORK_POLICY_RESOURCE, ns, name);
  const slices = (name?: string): string => apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns, name);
  const expectReach = (what: string, want: { a: boolean; b: boolean }): Promise<void> => rt.expectReach(what, want);

  const spec = (from: string): MultiNetworkPolicySpec => ({ podSelector: { matchLabels: { app: 'p' } }, ingress: [{ from: [{ podSelector: { matchLabels: { app: from } } }] }] });
  const policy = (name: string, from: string): MultiNetworkPolicy => ({
    apiVersion: `${MULTI_NETWORK_POLICY_GROUP}/v1beta1`,
    kind: 'MultiNetworkPolicy',
    metadata: { name, namespace: ns, annotations: { [POLICY_FOR_ANNOTATION]: 'net-a' } },
    spec: spec(from),
  });

  /** The address groups of a policy as the controller writes them: one slice per query, each with `addresses`, for the policy's current generation. */
  async function writeGroups(name: string, addresses: readonly string[]): Promise<void> {
    const obj = await cp.client.get<MultiNetworkPolicy>(policies(name));
    const checked = checkPolicy(obj, ns);
    assert.ok(checked.ok);
    for (const q of policyPeerQueries(checked.value)) {
      const slice = groupSlice({ namespace: ns, name, generation: obj.metadata?.generation ?? 0 }, q, `${name}-${addressGroupKey(q).slice(0, 10)}`, 4, addresses);
      const existing = await getIfExists<V1EndpointSlice>(cp.client, slices(slice.metadata?.name));
      if (existing === undefined) await cp.client.create(slices(), slice);
      else await cp.client.replace(slices(slice.metadata?.name), { ...slice, metadata: { ...slice.metadata, resourceVersion: existing.metadata?.resourceVersion } });
    }
  }

  const start = (extra: Record<string, string> = {}): SidecarProcess => rt.start(extra);
  const ready = (): Promise<number> => rt.ready();
  const waitReady = (s: SidecarProcess): Promise<void> => rt.waitReady(s);
  async function events(reason: string): Promise<CoreV1Event[]> {
    const list = await cp.client.list<CoreV1Event>(apiPath('', 'v1', 'events', ns));
    return list.items.filter((e) => e.reason === reason);
  }
  const hasPolicyChains = async (): Promise<boolean> => /chain MPX-PIN-/.test((await topo.run(p, ['nft', 'list', 'table', 'inet', 'multus_proxy'], { allowFail: true })).stdout);

  before(async () => {
    rt = await startPolicedPod({ nsPrefix: 'scp', healthPort: HEALTH_PORT });
    ({ env, dir, pod: p } = rt);
    ({ cp, topo, ns } = env);
  });
  after(async () => {
    await rt?.close();
  });

  void test('without the CRD: no policy, ready; once installed, the policy is enforced and its drops counted', async () => {
    const s = start();
    await waitReady(s);
    await waitForLog(s, 'the absent API to be told', /MultiNetworkPolicy API is not served/);
    await expectReach('both peers while there is no policy', { a: true, b: true });

    await cp.client.create(apiPath('apiextensions.k8s.io', 'v1', 'customresourcedefinitions'), loadAll(readFileSync(CRD_FILE, 'utf8'))[0] as object);
    await waitFor('the CRD served', async () => (await policiesServed(cp.client, policies())) !== undefined, 30_000);
    await cp.client.create(policies(), policy('allow', 'a'));
    await writeGroups('allow', [peer('a').net1.ipv4]);
    await waitForLog(s, 'the API to be found', /MultiNetworkPolicy API is served now/);
    await expectReach('a allowed, b denied', { a: true, b: false });
    assert.equal(s.logs().filter((l) => l['msg'] === 'the MultiNetworkPolicy API is not served (its CRD is not installed): no policy applies; asking again periodically').length, 1, 'told once');
    const metrics = await metricsText(topo, p, HEALTH_PORT);
    assert.match(metrics, /^multus_proxy_sidecar_policies_enforced 1$/m);
    const drops = new RegExp(`^multus_proxy_sidecar_policy_drops_total\\{policy="${ns}/allow",direction="ingress"\\} (\\d+)$`, 'm').exec(metrics);
    assert.ok(
      drops !== null && Number(drops[1]) > 0,
      `drops counted for ${ns}/allow: ${metrics
        .split('\n')
        .filter((l) => l.includes('policy'))
        .join('\n')}`,
    );
  });

  void test('a policy change takes effect, and a change of the pod labels', async () => {
    const obj = await cp.client.get<MultiNetworkPolicy>(policies('allow'));
    await cp.client.replace(policies('allow'), { ...obj, spec: spec('b') });
    // The new query's group is written after the change, as the controller does.
    await writeGroups('allow', [peer('b').net1.ipv4]);
    await expectReach('b allowed, a denied', { a: false, b: true });
    // The labels file, as the kubelet rewrites it: a pod the policy no longer selects is not isolated.
    writeFileSync(join(dir, 'labels'), 'app="q"\n');
    await expectReach('no longer selected: both peers', { a: true, b: true });
    writeFileSync(join(dir, 'labels'), 'app="p"\n');
    await expectReach('selected again: b allowed, a denied', { a: false, b: true });
  });

  void test('a port range (v1beta2 endPort) admits its last port, and only the range', async () => {
    const v2 = (name?: string): string => apiPath(MULTI_NETWORK_POLICY_GROUP, 'v1beta2', MULTI_NETWORK_POLICY_RESOURCE, ns, name);
    const obj = await cp.client.get<MultiNetworkPolicy>(v2('allow'));
    const ranged = (from: number, to: number): MultiNetworkPolicySpec => ({ ...spec('b'), ingress: [{ ...spec('b').ingress?.[0], ports: [{ protocol: 'TCP', port: from, endPort: to }] }] });
    // The server listens on 80: the last port of 79-80, outside 81-82.
    await cp.client.replace(v2('allow'), { ...obj, spec: ranged(79, 80) });
    await writeGroups('allow', [peer('b').net1.ipv4]);
    await expectReach('80 is the last port of 79-80: b allowed, a denied', { a: false, b: true });
    const listing = (await topo.run(p, ['nft', 'list', 'table', 'inet', 'multus_proxy'])).stdout;
    assert.match(listing, /elements = \{ tcp \. 79-80 \}/, 'the range whole in the port set');
    await cp.client.replace(v2('allow'), { ...(await cp.client.get<MultiNetworkPolicy>(v2('allow'))), spec: ranged(81, 82) });
    await writeGroups('allow', [peer('b').net1.ipv4]);
    await expectReach('80 is outside 81-82: both denied', { a: false, b: false });
    await cp.client.replace(v2('allow'), { ...(await cp.client.get<MultiNetworkPolicy>(v2('allow'))), spec: spec('b') });
    await writeGroups('allow', [peer('b').net1.ipv4]);
    await expectReach('the range gone: b allowed, a denied', { a: false, b: true });
  });

  void test('a restart keeps the rules: the denied peer never gets through while no sidecar runs or the next one starts', async () => {
    const loop = startHttpLoop(topo, peer('a'), `http://${p.net1.ipv4}:80/`, 50);
    assert.equal(await env.sidecar!.terminate(), 0);
    assert.ok(await hasPolicyChains(), 'the policy chains stay after the sidecar exits');
    await expectReach('with no sidecar: b allowed, a denied', { a: false, b: true });
    const s = start();
    await waitReady(s);
    await expectReach('after the restart: b allowed, a denied', { a: false, b: true });
    const replies = await loop.stop();
    assert.ok(replies.length > 0 && replies.every((r) => r.error !== undefined), `a never got through: ${JSON.stringify(replies.filter((r) => r.error === undefined).slice(0, 3))}`);
  });

  void test('the first sync is held until the groups of a selecting policy are written for its generation', async () => {
    assert.equal(await env.sidecar!.terminate(), 0);
    await cp.client.create(policies(), policy('also-a', 'a'));
    const s = start({ POLICY_HOLD_MS: '60000' });
    await waitForLog(s, 'the hold', new RegExp(`first sync waits for address groups of ${ns}/also-a`));
    // Long enough for an unheld sidecar to sync (it does within a second or two).
    await new Promise((r) => setTimeout(r, 2000));
    assert.equal(await ready(), 503, 'not ready while held');
    assert.equal(s.logs().filter((l) => l['msg'] === 'rules applied').length, 0, 'nothing written while held');
    await expectReach('the last rules while held: a denied', { a: false, b: true });
    await writeGroups('also-a', [peer('a').net1.ipv4]);
    await waitReady(s);
    assert.ok(s.logs().some((l) => l['msg'] === 'rules applied'));
    await expectReach('both policies enforced: a and b allowed', { a: true, b: true });
  });

  void test('a group never written: the first sync goes ahead after the hold, fail-closed, with a warning Event naming the policy', async () => {
    assert.equal(await env.sidecar!.terminate(), 0);
    await cp.client.delete(policies('also-a'));
    await cp.client.create(policies(), policy('never', 'a'));
    const s = start({ POLICY_HOLD_MS: '2000' });
    await waitForLog(s, 'the hold to end', new RegExp(`MultiNetworkPolicy ${ns}/never: the controller has not written`));
    await waitReady(s);
    await expectReach('the missing group allows nothing: a denied, b allowed', { a: false, b: true });
    await waitFor('the warning Event', async () => (await events(REASON_POLICY_GROUPS_MISSING)).some((e) => e.type === 'Warning' && (e.message ?? '').includes(`${ns}/never`)));
  });

  void test('the iptables back end refuses: not ready, an Event naming the setting, and the last rules stay', async () => {
    assert.equal(await env.sidecar!.terminate(), 0);
    const s = start({ DATAPLANE_BACKEND: 'iptables' });
    await waitForLog(s, 'the refusal', /MultiNetworkPolicy is not supported on the iptables back end/);
    await waitFor('the refusal Event', async () => (await events(REASON_POLICY_BACKEND_REFUSED)).some((e) => (e.message ?? '').includes('DATAPLANE_BACKEND (--backend)')));
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(await ready(), 503, 'not ready while refused');
    assert.ok(await hasPolicyChains(), "the last run's policy chains stay");
    await expectReach('still enforced by the last rules: a denied, b allowed', { a: false, b: true });
  });
});
