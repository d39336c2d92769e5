/**
 * A MultiNetworkPolicy across two real nodes, for test/node/twonode.test.ts: two servers and two
 * clients, one of each on each node, injected, on the blog's network (macvlan1 in `default`, one
 * segment spanning both nodes), each serving and probing TCP and UDP on 80 and 81 from the
 * project's image (the matrix's server and probe, test/node/netpol.ts).
 *
 * Two policies for that network: the servers accept ingress only from pods labelled
 * `mnp-2n-access: granted` (the client on node 1 at first), and the clients may send only to the
 * servers (egress). The whole table (every pod to every other, every probe) is probed with no
 * policy, with the policies, after the access label moved from the node-1 client to the node-2
 * client, and after the policies were deleted. Before each probe round the test waits until every
 * pod's sidecar table holds what the project's resolver and render compute for it (its drop
 * counters and the addresses of its peer sets), and after the relabel also until the controller's
 * address group holds the newly granted client; the expected tables are written out below, apart
 * from the resolver.
 *
 * The MultiNetworkPolicy CRD is installed when the cluster lacks it, and left: the teardown takes
 * the cluster whole.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { RealNode } from '../harness/node.js';
import { NODE, NODE2 } from '../harness/node-config.js';
import { blogFile, net1Addresses, pod as getPod, ROOT } from './cluster.js';
import { SIDECAR_NFT_LIST } from './rules.js';
import { MNP_CRD, NETPOL_IMAGE, probeFrom, SERVER_JS } from './netpol.js';
import { CONTAINER_PORTS, probeName, PROBES } from './netpol-cases.js';
import { INJECTION_ENABLED, INJECTION_LABEL, SIDECAR_CONTAINER_NAME } from '../../src/keys.js';
import { matchesSelector } from '../../src/annotations/label-selector.js';
import { resolvePodPolicy, type PeerLookup, type SelectedPod } from '../../src/policy/resolve.js';
import { renderPolicy } from '../../src/dataplane/nftables/policy.js';
import type { MultiNetworkPolicy } from '../../src/policy/api.js';

const NS = 'default';
const NAD = 'macvlan1';
const NETWORK_KEY = `${NS}/${NAD}`;
const ROLE = 'mnp-2n';
export const ACCESS = 'mnp-2n-access';
const GRANTED = 'granted';
const MNP = 'multi-networkpolicies.k8s.cni.cncf.io';
const SYNC_TIMEOUT_MS = 90_000;

export const SERVERS = ['mnp2n-s1', 'mnp2n-s2'] as const;
export const CLIENTS = ['mnp2n-c1', 'mnp2n-c2'] as const;
export const PODS = [...SERVERS, ...CLIENTS] as const;
export type PodName = (typeof PODS)[number];
/** Where each pod runs: the first of each pair on node 1, the second on node 2. */
export const NODE_OF: Readonly<Record<PodName, string>> = { 'mnp2n-s1': NODE.name, 'mnp2n-s2': NODE2.name, 'mnp2n-c1': NODE.name, 'mnp2n-c2': NODE2.name };
const isServer = (p: PodName): boolean => (SERVERS as readonly string[]).includes(p);
const roleOf = (p: PodName): string => (isServer(p) ? 'server' : 'client');

const INGRESS_POLICY = 'mnp2n-servers-from-granted';
const EGRESS_POLICY = 'mnp2n-clients-to-servers';

/** The two policies, as users write them for the reference (policy-for names the network). */
export function policies(): MultiNetworkPolicy[] {
  const meta = (name: string) => ({ name, namespace: NS, annotations: { 'k8s.v1.cni.cncf.io/policy-for': NETWORK_KEY } });
  return [
    {
      apiVersion: 'k8s.cni.cncf.io/v1beta2',
      kind: 'MultiNetworkPolicy',
      metadata: meta(INGRESS_POLICY),
      spec: { podSelector: { matchLabels: { [ROLE]: 'server' } }, policyTypes: ['Ingress'], ingress: [{ from: [{ podSelector: { matchLabels: { [ACCESS]: GRANTED } } }] }] },
    },
    {
      apiVersion: 'k8s.cni.cncf.io/v1beta2',
      kind: 'MultiNetworkPolicy',
      metadata: meta(EGRESS_POLICY),
      spec: { podSelector: { matchLabels: { [ROLE]: 'client' } }, policyTypes: ['Egress'], egress: [{ to: [{ podSelector: { matchLabels: { [ROLE]: 'server' } } }] }] },
    },
  ];
}

/** The state a table is expected for: whether the policies exist, and which clients are granted. */
export interface PolicyState {
  readonly enforced: boolean;
  readonly granted: readonly PodName[];
}

/** "<probe> <from>><to>" -> reachable. */
export type Table = Record<string, boolean>;
const cell = (probe: string, from: PodName, to: PodName): string => `${probe} ${from}>${to}`;
/** The pods of a cell's key. */
const pairOf = (key: string): [PodName, PodName] => (key.split(' ')[1] ?? '').split('>') as [PodName, PodName];
const PAIRS = PODS.flatMap((f) => PODS.filter((t) => t !== f).map((t) => [f, t] as const));

/**
 * The expected table, written from NetworkPolicy's semantics (not from the resolver): a server
 * accepts only granted pods; a client sends only to servers; everything else passes, and replies
 * of allowed connections pass both isolations.
 */
export function expectedTable(s: PolicyState): Table {
  const out: Table = {};
  for (const p of PROBES)
    for (const [f, t] of PAIRS) {
      const intoServer = !isServer(t) || s.granted.includes(f);
      const outOfClient = isServer(f) || isServer(t);
      out[cell(probeName(p), f, t)] = !s.enforced || (intoServer && outOfClient);
    }
  return out;
}

/** The cells where `observed` differs from `expected`, as "TCP/80 mnp2n-c1 (node) -> mnp2n-s2 (node): expected allow, observed deny". */
export function differingCells(expected: Table, observed: Table): string[] {
  const word = (b: boolean | undefined): string => (b === undefined ? 'no probe' : b ? 'allow' : 'deny');
  return Object.keys(expected)
    .filter((k) => expected[k] !== observed[k])
    .map((k) => {
      const [f, t] = pairOf(k);
      return `${k.split(' ')[0]} ${f} (${NODE_OF[f]}) -> ${t} (${NODE_OF[t]}): expected ${word(expected[k])}, observed ${word(observed[k])}`;
    });
}

/** The allowed cells that cross nodes, as "from>to" pairs (deduplicated over probes). */
export function crossNodeAllowed(t: Table): string[] {
  const out = new Set<string>();
  for (const [k, v] of Object.entries(t)) {
    const [f, to] = pairOf(k);
    if (v && NODE_OF[f] !== NODE_OF[to]) out.add(`${f}>${to}`);
  }
  return [...out].sort();
}

function podObject(name: PodName, labels: Record<string, string>): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NS, labels: { [ROLE]: roleOf(name), ...labels }, annotations: { 'k8s.v1.cni.cncf.io/networks': NAD } },
    spec: {
      nodeName: NODE_OF[name],
      terminationGracePeriodSeconds: 2,
      // The image's user is not root: ports 80 and 81 are opened by this safe, namespaced sysctl.
      securityContext: { sysctls: [{ name: 'net.ipv4.ip_unprivileged_port_start', value: '0' }] },
      containers: [{ name: 'serve', image: NETPOL_IMAGE, command: ['node', '-e', SERVER_JS], env: [{ name: 'POD_ID', value: name }], ports: CONTAINER_PORTS }],
    },
  };
}

/** The model of the four pods, as the sidecars and the controller see them. */
function model(addresses: Readonly<Record<PodName, string>>, granted: readonly PodName[]): { pods: Record<PodName, SelectedPod>; lookup: PeerLookup } {
  const pods = {} as Record<PodName, SelectedPod>;
  for (const p of PODS)
    pods[p] = {
      namespace: NS,
      labels: { [ROLE]: roleOf(p), ...(granted.includes(p) ? { [ACCESS]: GRANTED } : {}) },
      networks: [{ network: NETWORK_KEY, interface: 'net1', addresses: [addresses[p]] }],
      containerPorts: CONTAINER_PORTS,
    };
  const lookup: PeerLookup = (q) =>
    Object.values(pods)
      .filter((w) => (q.namespaces.kind === 'namespace' ? w.namespace === q.namespaces.name : matchesSelector(q.namespaces.selector, { 'kubernetes.io/metadata.name': w.namespace })))
      .filter((w) => matchesSelector(q.pods, { ...w.labels }))
      .map((w) => ({ addresses: w.networks[0]?.addresses ?? [], containerPorts: w.containerPorts }));
  return { pods, lookup };
}

/** A sidecar table's policy part as compared: its drop counters, and the address list of each peer set (names and MACs aside), sorted. */
interface PolicyView {
  readonly counters: string[];
  readonly peerSets: string[];
}

/** Peer sets: pod addresses (MPX-PA-) and, for ingress from pods whose MAC is known, (address, MAC) pairs (MPX-PM-). */
const PEER_SET = /^MPX-P[AM]-/;
/** The address of a set element: a pair's first field ("10.1.1.6 . 0a:58:…"), or the element itself. */
const addressOf = (e: string): string => (e.split(' . ')[0] ?? '').trim();
const ip4 = (a: string): number => a.split('.').reduce((n, o) => n * 256 + Number(o), 0);
/** nft elements (a, a-b, a/len; one interval set) as "lo-hi" integer ranges, adjacent ones joined. */
function addressRanges(elements: readonly string[]): string {
  const r = elements
    .map((e): [number, number] => {
      const [a = '', b] = e.split('-');
      if (b !== undefined) return [ip4(a), ip4(b)];
      const [base = '', len] = a.split('/');
      const lo = ip4(base);
      return [lo, len === undefined ? lo : lo + 2 ** (32 - Number(len)) - 1];
    })
    .sort((x, y) => x[0] - y[0]);
  const merged: [number, number][] = [];
  for (const [lo, hi] of r) {
    const last = merged[merged.length - 1];
    if (last && lo <= last[1] + 1) last[1] = Math.max(last[1], hi);
    else merged.push([lo, hi]);
  }
  return merged.map(([lo, hi]) => `${lo}-${hi}`).join(',');
}

/** What the project's resolver and render put in each pod's sidecar table. */
function expectedViews(addresses: Readonly<Record<PodName, string>>, s: PolicyState): Record<PodName, PolicyView> {
  const { pods, lookup } = model(addresses, s.granted);
  const ps = s.enforced ? policies() : [];
  return Object.fromEntries(
    PODS.map((p) => {
      const r = renderPolicy(resolvePodPolicy(pods[p], ps, lookup));
      const sets = [...(r?.sets ?? [])].filter(([n]) => PEER_SET.test(n)).map(([, set]) => addressRanges(set.elements.map(addressOf)));
      return [p, { counters: [...(r?.counters ?? [])].sort(), peerSets: sets.sort() }];
    }),
  ) as Record<PodName, PolicyView>;
}

/** The same, read from the pod's sidecar (`nft list table`); nothing when the table is absent. */
async function sidecarView(node: RealNode, p: PodName): Promise<PolicyView> {
  const r = await node.exec(NS, p, SIDECAR_NFT_LIST, { container: SIDECAR_CONTAINER_NAME, timeoutMs: 30_000 });
  if (r.code !== 0) return { counters: [], peerSets: [] };
  const counters = [...new Set([...r.stdout.matchAll(/^\s*counter (MPX-PC-[A-Z0-9]+) \{/gm)].map((m) => m[1] ?? ''))].sort();
  const peerSets = [...r.stdout.matchAll(/^\s*set MPX-P[AM]-[A-Z0-9]+ \{([\s\S]*?)\n\s*\}/gm)].map((m) => {
    const elements = /elements = \{([^}]*)\}/.exec(m[1] ?? '')?.[1] ?? '';
    return addressRanges(
      elements
        .split(',')
        .map((e) => addressOf(e.trim()))
        .filter(Boolean),
    );
  });
  return { counters, peerSets: peerSets.sort() };
}

/** The addresses the controller's address groups of a policy hold (endpoints of its slices). */
async function groupAddresses(node: RealNode, policy: string): Promise<string[]> {
  const out = await node.kubectl(['get', 'endpointslices', '-n', NS, '-l', `multus-proxy/policy=${policy}`, '-o', 'jsonpath={.items[*].endpoints[*].addresses[*]}']);
  return out.split(/\s+/).filter(Boolean).sort();
}

export interface SyncResult {
  /** ms until every sidecar held the expected table (-1: not within SYNC_TIMEOUT_MS). */
  readonly sidecarsMs: number;
  /** ms until the servers' ingress group held exactly the granted clients (-1: never; not watched: undefined). */
  readonly groupMs?: number;
  /** The sidecars still differing when it gave up. */
  readonly behind: string[];
}

/** Waits until every sidecar's table (and, when asked, the ingress group) is what `s` computes to. */
async function waitSync(node: RealNode, addresses: Readonly<Record<PodName, string>>, s: PolicyState, watchGroup: boolean): Promise<SyncResult> {
  const t0 = Date.now();
  const want = expectedViews(addresses, s);
  const wantGroup = s.granted.map((p) => addresses[p]).sort();
  let groupMs = watchGroup ? -1 : undefined;
  for (;;) {
    // The group first: when both hold in one round, the order is still group, then sidecars.
    if (groupMs === -1 && JSON.stringify(await groupAddresses(node, INGRESS_POLICY)) === JSON.stringify(wantGroup)) groupMs = Date.now() - t0;
    const have = await Promise.all(PODS.map(async (p) => [p, await sidecarView(node, p)] as const));
    const behind = have.filter(([p, v]) => JSON.stringify(v) !== JSON.stringify(want[p])).map(([p, v]) => `${p} has ${JSON.stringify(v)}, wants ${JSON.stringify(want[p])}`);
    if (behind.length === 0) {
      const sidecarsMs = Date.now() - t0;
      // The group was written between this round's two reads: seen together.
      if (groupMs === -1 && JSON.stringify(await groupAddresses(node, INGRESS_POLICY)) === JSON.stringify(wantGroup)) groupMs = sidecarsMs;
      return { sidecarsMs, groupMs, behind };
    }
    if (Date.now() - t0 > SYNC_TIMEOUT_MS) return { sidecarsMs: -1, groupMs, behind };
    await delay(300);
  }
}

/** Every pod probes every other pod's net1 address on every probe, all at once. */
async function observe(node: RealNode, addresses: Readonly<Record<PodName, string>>): Promise<{ table: Table; odd: string[] }> {
  const table: Table = {};
  const odd: string[] = [];
  await Promise.all(
    PODS.map(async (f) => {
      const targets = PODS.filter((t) => t !== f).map((t) => [t, addresses[t]] as const);
      const answers = await probeFrom(node, NS, f, targets, PROBES);
      for (const p of PROBES)
        for (const [t] of targets) {
          const got = answers[`${probeName(p)} ${t}`] ?? '';
          if (got !== '' && got !== t) odd.push(`${probeName(p)} ${f} -> ${t} answered by ${got}`);
          table[cell(probeName(p), f, t)] = got === t;
        }
    }),
  );
  return { table, odd };
}

export interface Phase {
  readonly name: string;
  readonly state: PolicyState;
  readonly sync?: SyncResult;
  /** Cells that differ from the expected table. */
  readonly cells: string[];
  readonly odd: string[];
  /** Allowed "from>to" pairs across nodes, as observed. */
  readonly crossAllowed: string[];
}

export interface TwoNodePolicy {
  readonly nodes: Record<PodName, string>;
  readonly addresses: Record<PodName, string>;
  readonly crdAdded: boolean;
  /** ms from the first apply until the webhook admitted the policies (the CRD just added: it looks for it every 30 s). */
  readonly admittedMs: number;
  readonly phases: Phase[];
  readonly ms: number;
}

/** Applies `input`, again every second while it is refused, up to 120 s; how long that took. */
async function applyWhenAdmitted(node: RealNode, input: string): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    const r = await node.kubectlResult(['apply', '-f', '-'], { input, allowFail: true });
    if (r.code === 0) return Date.now() - t0;
    if (Date.now() - t0 > 120_000) throw new Error(`the policies were refused for 120 s: ${r.stderr}`);
    await delay(1000);
  }
}

/** Installs the MultiNetworkPolicy CRD (the optional component's) when the cluster lacks it, Established; whether it did. */
export async function ensurePolicyCrd(node: RealNode): Promise<boolean> {
  if ((await node.kubectlResult(['get', 'crd', MNP_CRD], { allowFail: true })).code === 0) return false;
  await node.apply(readFileSync(join(ROOT, 'deploy', 'components', 'multi-networkpolicy', 'crd.yaml'), 'utf8'));
  await node.wait(`crd/${MNP_CRD}`, 'condition=Established', { timeoutMs: 60_000 });
  return true;
}

export async function runTwoNodePolicy(node: RealNode, log: (m: string) => void): Promise<TwoNodePolicy> {
  const t0 = Date.now();
  const crdAdded = await ensurePolicyCrd(node);
  // What the blog test made already; made again here so the case stands alone.
  await node.kubectl(['label', 'namespace', NS, `${INJECTION_LABEL}=${INJECTION_ENABLED}`, '--overwrite']);
  await node.apply(blogFile('net-attach.yml'), NS);
  const first: PodName = 'mnp2n-c1';
  const items = PODS.map((p) => podObject(p, p === first ? { [ACCESS]: GRANTED } : {}));
  await node.kubectl(['apply', '-f', '-'], { input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items }) });
  try {
    await Promise.all(PODS.map((p) => node.wait(`pod/${p}`, 'condition=Ready', { namespace: NS, timeoutMs: 180_000 })));
    const nodes = {} as Record<PodName, string>;
    const addresses = {} as Record<PodName, string>;
    for (const p of PODS) {
      const o = await getPod(node, NS, p);
      nodes[p] = o.spec?.nodeName ?? '';
      addresses[p] = net1Addresses(o).find((a) => !a.includes(':')) ?? '';
    }
    log(`policy pods Ready in ${Date.now() - t0} ms: ${PODS.map((p) => `${p} on ${nodes[p]} ${addresses[p]}`).join(', ')}`);

    const phases: Phase[] = [];
    const probe = async (name: string, state: PolicyState, sync?: SyncResult): Promise<void> => {
      const o = await observe(node, addresses);
      const cells = differingCells(expectedTable(state), o.table);
      const crossAllowed = crossNodeAllowed(o.table);
      phases.push({ name, state, ...(sync ? { sync } : {}), cells, odd: o.odd, crossAllowed });
      const allowed = Object.values(o.table).filter(Boolean).length;
      const synced = sync ? `; sidecars synced in ${sync.sidecarsMs} ms${sync.groupMs !== undefined ? `, the ingress group in ${sync.groupMs} ms` : ''}` : '';
      log(`${name}: ${allowed}/${Object.keys(o.table).length} cells allowed, ${cells.length} differ; across nodes allowed ${crossAllowed.join(' ') || 'none'}${synced}`);
    };

    await probe('no policy', { enforced: false, granted: [] });

    const ps = JSON.stringify({ apiVersion: 'v1', kind: 'List', items: policies() });
    const admittedMs = await applyWhenAdmitted(node, ps);
    const withPolicy: PolicyState = { enforced: true, granted: [first] };
    await probe(`policies (granted ${first})`, withPolicy, await waitSync(node, addresses, withPolicy, true));

    // The access label moves to the client on the other node: one loses access, the other gains it.
    const moved: PolicyState = { enforced: true, granted: ['mnp2n-c2'] };
    await node.kubectl(['label', 'pod', '-n', NS, first, `${ACCESS}-`]);
    await node.kubectl(['label', 'pod', '-n', NS, 'mnp2n-c2', `${ACCESS}=${GRANTED}`]);
    await probe('relabelled (granted mnp2n-c2)', moved, await waitSync(node, addresses, moved, true));

    await node.kubectl(['delete', MNP, '-n', NS, INGRESS_POLICY, EGRESS_POLICY, '--wait=true']);
    const none: PolicyState = { enforced: false, granted: ['mnp2n-c2'] };
    await probe('policies deleted', none, await waitSync(node, addresses, none, false));
    return { nodes, addresses, crdAdded, admittedMs, phases, ms: Date.now() - t0 };
  } finally {
    await node.kubectl(['delete', MNP, '-n', NS, INGRESS_POLICY, EGRESS_POLICY, '--ignore-not-found']).catch((e: Error) => log(`deleting the policies: ${e.message}`));
    // Not waited for: the grace periods would be the case's longest step.
    await node.kubectl(['delete', 'pod', '-n', NS, ...PODS, '--wait=false']).catch((e: Error) => log(`deleting the pods: ${e.message}`));
  }
}
