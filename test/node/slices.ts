/**
 * Slice metadata on the real node, beside the blog scenario (its Service, pods and client): the
 * client's sidecar has trigger_to_rules_seconds values after the blog's scale-up; kube-proxy's own
 * slice selector lists none of our slices; and the upgrade, simulated: the blog's slice rewritten
 * as an older controller wrote it is relabelled in place by the running controller
 * (same name and uid, no endpoint dropped while it happens).
 */
import type { RealNode } from '../harness/node.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1EndpointSlice } from '../../src/kube/types.js';
import { LAST_CHANGE_TRIGGER_TIME_ANNOTATION, MANAGED_BY, MANAGED_BY_LABEL, NETWORK_LABEL, PROXY_NAME_LABEL, SERVICE_NAME_LABEL, SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import { CLIENT, SERVICE } from './cluster.js';
import { metricValues, sidecarHealthPort } from './tenant.js';

/** kube-proxy's selector for its EndpointSlice list and watch. */
export const KUBE_PROXY_SELECTOR = '!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless';

export interface SliceMetadataObservations {
  /** The client's sidecar: trigger_to_rules_seconds count and sum. */
  readonly triggerCount: number;
  readonly triggerSum: number;
  /** The blog slice's trigger annotation and labels as found. */
  readonly trigger: string | undefined;
  readonly labels: Record<string, string>;
  /** Names of our slices kube-proxy's selector lists in the namespace, and how many others it lists. */
  readonly kubeProxyOurs: string[];
  readonly kubeProxyOthers: number;
  readonly upgrade: { ms: number; before: string; after: string; addressesBefore: string; fewestAddresses: string; addressesAfter: string; proxyLabel: string | undefined };
}

const NS = 'default';
const slicesPath = apiPath('discovery.k8s.io', 'v1', 'endpointslices', NS);
const ids = (l: readonly V1EndpointSlice[]): string =>
  l
    .map((x) => `${x.metadata?.name ?? ''}/${x.metadata?.uid ?? ''}`)
    .sort()
    .join(' ');
const addrs = (l: readonly V1EndpointSlice[]): string[] => l.flatMap((x) => (x.endpoints ?? []).flatMap((e) => e.addresses)).sort();

export async function runSliceMetadata(node: RealNode, log: (m: string) => void): Promise<SliceMetadataObservations> {
  const port = await sidecarHealthPort(node, NS, CLIENT);
  const m = await node.exec(NS, CLIENT, ['curl', '-s', '-m', '3', `http://127.0.0.1:${port}/metrics`], { container: CLIENT });
  const lines = m.stdout.split('\n').filter((l) => l.startsWith('multus_proxy_sidecar_trigger_to_rules_seconds'));
  log(`sidecar: ${lines.filter((l) => !l.includes('_bucket')).join('; ')}`);
  const one = (name: string): number => Object.values(metricValues(lines, name))[0] ?? NaN;

  const ours = async (): Promise<V1EndpointSlice[]> =>
    (await node.client.list<V1EndpointSlice>(slicesPath, { labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY},${SERVICE_NAME_LABEL}=${SERVICE}` })).items;
  const before = await ours();
  const kp = (await node.client.list<V1EndpointSlice>(slicesPath, { labelSelector: KUBE_PROXY_SELECTOR })).items;

  // The upgrade: each slice as the old controller wrote it (its three labels, the network annotation).
  const t0 = Date.now();
  for (const s of before) {
    const { managedFields: _m, ...meta } = s.metadata ?? {};
    await node.client.replace(apiPath('discovery.k8s.io', 'v1', 'endpointslices', NS, s.metadata?.name ?? ''), {
      ...s,
      metadata: {
        ...meta,
        labels: { [SERVICE_NAME_LABEL]: SERVICE, [MANAGED_BY_LABEL]: MANAGED_BY, [NETWORK_LABEL]: s.metadata?.labels?.[NETWORK_LABEL] ?? '' },
        annotations: { [SERVICE_NETWORK_ANNOTATION]: s.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION] ?? '' },
      },
    });
  }
  let fewest = addrs(before);
  let after: V1EndpointSlice[];
  for (;;) {
    after = await ours();
    if (addrs(after).length < fewest.length) fewest = addrs(after);
    if (after.length > 0 && after.every((s) => s.metadata?.labels?.[PROXY_NAME_LABEL] !== undefined)) break;
    if (Date.now() - t0 > 30_000) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const ms = Date.now() - t0;
  const upgrade = {
    ms,
    before: ids(before),
    after: ids(after),
    addressesBefore: addrs(before).join(','),
    fewestAddresses: fewest.join(','),
    addressesAfter: addrs(after).join(','),
    proxyLabel: after[0]?.metadata?.labels?.[PROXY_NAME_LABEL],
  };
  log(`upgrade: ${JSON.stringify(upgrade)}`);
  return {
    triggerCount: one('multus_proxy_sidecar_trigger_to_rules_seconds_count'),
    triggerSum: one('multus_proxy_sidecar_trigger_to_rules_seconds_sum'),
    trigger: before[0]?.metadata?.annotations?.[LAST_CHANGE_TRIGGER_TIME_ANNOTATION],
    labels: before[0]?.metadata?.labels ?? {},
    kubeProxyOurs: kp.filter((s) => s.metadata?.labels?.[MANAGED_BY_LABEL] === MANAGED_BY).map((s) => s.metadata?.name ?? ''),
    kubeProxyOthers: kp.filter((s) => s.metadata?.labels?.[MANAGED_BY_LABEL] !== MANAGED_BY).length,
    upgrade,
  };
}
