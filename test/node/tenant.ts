/**
 * The tenant suite (docs/security.md "Attacks and what stops them"): a user with the
 * built-in `admin` ClusterRole in one namespace only, plus a Role for NetworkAttachmentDefinitions
 * there, tries each attack through kubectl with a client certificate signed by the cluster CA.
 *
 * Every attack runs inside guard(), which asserts what docs/security.md promises for all of them:
 * - the attack itself asserts its refusal or neutralisation, with the denial message or Event;
 * - the host's links, addresses and routes are unchanged (`ip -j`, pod veths aside);
 * - the blog scenario's client, curling its Service all along, loses no request;
 * - the blog namespace's slice keeps following its pods while the bad input is in place (a
 *   replica added, then removed, reaches the slice);
 * - after the attack's undo (the bad input gone), its own recovery check passes.
 *
 * It runs in realnode.test.ts after the blog scenario (whose pods and client it uses) and before
 * the uninstall.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { dump } from 'js-yaml';
import type { ExecResult, RealNode } from '../harness/node.js';
import type { V1Pod } from '../../src/kube/types.js';
import { NODE } from '../harness/node-config.js';
import { arrivals, BLOG_FILES, blogFile, CLIENT, createNamespace, curlBurst, net1Addresses, pod, pods, ROOT, SERVICE, sliceAddresses } from './cluster.js';
import { URL, waitFor } from './blog.js';
import {
  INJECTION_ENABLED,
  INJECTION_LABEL,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  NETWORK_STATUS_ANNOTATION,
  NODE_ADDRESS_RANGE_ANNOTATION,
  NODE_ADDRESSES_ANNOTATION,
  NODE_PARENTS_ANNOTATION,
  PROXY_NAME,
  PROXY_NAME_LABEL,
  SERVICE_NAME_LABEL,
  SERVICE_NETWORK_ANNOTATION,
  SIDECAR_CONTAINER_NAME,
} from '../../src/keys.js';
import { AGENT_NAMESPACE, AGENT_SELECTOR, agentOverlay } from './nodeport.js';
import { buildOverlay } from './netservice.js';
import { sidecarRules } from './rules.js';
import { REASON_INVALID_ANNOTATION } from '../../cmd/sidecar/problems.js';
import { DEFAULT_MAX_SERVICES_PER_NETWORK } from '../../src/sidecar-contract.js';
import { DEFAULT_NODE_HEALTH_PORT } from '../../cmd/node-agent/options.js';
import { RBAC_MANAGED_BY_LABEL, SIDECAR_POD_ROLE } from '../../cmd/controller/sidecar-rbac.js';
import { componentState, costs, type Costs } from './tenant-costs.js';

const run = promisify(execFile);

export const TENANT_USER = 'tenant';
export const TENANT_NS = 'tenant-a';
/** Another namespace, named after the tenant's, owned by the admin (the RBAC sync goes in name order). */
export const OTHER_NS = 'tenant-z';
/** A second namespace of the tenant's, sorting before every other (the per-network share once went by name order). */
export const AAA_NS = 'aaa-tenant';

export interface Tenant {
  readonly user: string;
  readonly namespace: string;
  readonly kubeconfig: string;
  /** kubectl as the tenant; never throws (denials are what the attacks look for). */
  kubectl(args: string[], opts?: { input?: string; timeoutMs?: number }): Promise<ExecResult>;
}

/** Creates the tenant's namespace (not yet enabled for injection) and the user confined to it. */
export async function setupTenant(node: RealNode): Promise<Tenant> {
  return tenantNamespace(node, TENANT_NS);
}

/** Creates `namespace` (not enabled for injection), where the tenant user gets `admin` plus NADs; the tenant as seen from there. */
export async function tenantNamespace(node: RealNode, namespace: string): Promise<Tenant> {
  await createNamespace(node, namespace, false);
  await node.apply(
    [
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: 'tenant-admin', namespace },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admin' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: TENANT_USER }],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'Role',
        metadata: { name: 'nad-editor', namespace },
        rules: [{ apiGroups: ['k8s.cni.cncf.io'], resources: ['network-attachment-definitions'], verbs: ['*'] }],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: 'tenant-nads', namespace },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'nad-editor' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: TENANT_USER }],
      },
    ]
      .map((o) => dump(o))
      .join('---\n'),
  );
  const kubeconfig = node.userKubeconfig(TENANT_USER);
  return {
    user: TENANT_USER,
    namespace,
    kubeconfig,
    kubectl: (args, o = {}) => node.kubectlResult(args, { ...o, kubeconfig, allowFail: true }),
  };
}

export async function cleanupTenant(node: RealNode): Promise<void> {
  // One call: the three namespaces terminate side by side; it returns once all are gone.
  await node.kubectl(['delete', 'namespace', TENANT_NS, OTHER_NS, AAA_NS, '--ignore-not-found', '--wait=true', '--timeout=180s'], { timeoutMs: 190_000 });
}

// --- the host ----------------------------------------------------------------------------------

interface IpLink {
  ifname: string;
  master?: string;
  flags?: string[];
  mtu?: number;
  address?: string;
  linkinfo?: { info_kind?: string };
  addr_info?: { family: string; local: string; prefixlen: number }[];
}
interface IpRoute {
  dst: string;
  dev?: string;
  table?: string;
  type?: string;
  protocol?: string;
  prefsrc?: string;
  gateway?: string;
}

async function ipJson<T>(args: string[]): Promise<T[]> {
  return JSON.parse((await run('ip', ['-j', ...args], { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 })).stdout || '[]') as T[];
}

/**
 * The host's links, addresses and routes as sorted lines. The pods' veths on the pod bridge (and
 * whatever is on them) come and go with every pod, so they are left out; everything else counts.
 */
export async function hostNetwork(): Promise<string[]> {
  const links = await ipJson<IpLink>(['-d', 'addr', 'show']);
  const podVeth = (l: IpLink): boolean => l.linkinfo?.info_kind === 'veth' && l.master === NODE.bridge;
  const skipped = new Set(links.filter(podVeth).map((l) => l.ifname));
  const out: string[] = [];
  for (const l of links) {
    if (skipped.has(l.ifname)) continue;
    // A bridge without a fixed address takes its lowest port's: pods coming and going change it.
    const mac = l.linkinfo?.info_kind === 'bridge' ? 'port-derived' : (l.address ?? '-');
    out.push(`link ${l.ifname} kind=${l.linkinfo?.info_kind ?? '-'} master=${l.master ?? '-'} mtu=${l.mtu ?? '-'} up=${l.flags?.includes('UP') ? 1 : 0} mac=${mac}`);
    for (const a of l.addr_info ?? []) out.push(`addr ${l.ifname} ${a.local}/${a.prefixlen}`);
  }
  for (const fam of ['-4', '-6']) {
    for (const r of await ipJson<IpRoute>([fam, 'route', 'show', 'table', 'all'])) {
      if (r.dev && skipped.has(r.dev)) continue;
      out.push(`route ${fam} table=${r.table ?? 'main'} ${r.type ?? 'unicast'} ${r.dst} dev=${r.dev ?? '-'} via=${r.gateway ?? '-'} proto=${r.protocol ?? '-'} src=${r.prefsrc ?? '-'}`);
    }
  }
  return out.sort();
}

/**
 * hostNetwork() once it holds still (two reads 2 s apart agree, at most 20 s): a link just created
 * (the node agent's) gets its IPv6 link-local route only after duplicate address detection.
 */
export async function settledHostNetwork(): Promise<string[]> {
  let last = await hostNetwork();
  for (let i = 0; i < 10; i++) {
    await delay(2_000);
    const now = await hostNetwork();
    if (JSON.stringify(now) === JSON.stringify(last)) return now;
    last = now;
  }
  throw new Error(`the host's links, addresses and routes kept changing for 20 s before the attack:\n${last.join('\n')}`);
}

// --- the blog's traffic beside the attacks ------------------------------------------------------

export interface Traffic {
  /** Stops the loop; per request "ok" or "fail:<curl code>". */
  stop(): Promise<string[]>;
}

let trafficRuns = 0;

/** The blog client curls its Service by name every `pauseS` s (plus the curl) until stopped (one exec, in the background). */
export function startTraffic(node: RealNode, pauseS = 0.2): Traffic {
  const stopFile = `/tmp/tenant-traffic-${++trafficRuns}`;
  const script =
    `rm -f ${stopFile}; while [ ! -e ${stopFile} ]; do ` +
    `if curl -s -m 2 -o /tmp/tenant-body ${URL} && grep -q '${SERVICE}' /tmp/tenant-body; then echo ok; else echo "fail:$?"; fi; sleep ${pauseS}; done`;
  const loop = node.exec('default', CLIENT, ['sh', '-c', script], { container: CLIENT, timeoutMs: 900_000 });
  return {
    async stop() {
      await node.exec('default', CLIENT, ['touch', stopFile], { container: CLIENT });
      const r = await loop;
      if (r.code !== 0) throw new Error(`the blog client's curl loop failed: ${r.stderr}`);
      return r.stdout.trim().split('\n').filter(Boolean);
    },
  };
}

// --- other namespaces' slices keep following their pods --------------------------------------

/** Polls until f returns a value (blog.ts's waitFor, under the name these tests use). */
export const until = waitFor;

const isReady = (p: { status?: { conditions?: { type: string; status: string }[] } }): boolean => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;

/** The blog Service's slice lists exactly its live Ready pods' net1 addresses, `count` of them. */
async function blogSliceFollows(node: RealNode, count: number, timeoutMs: number): Promise<number> {
  const t0 = Date.now();
  await until(`the slice of default/${SERVICE} to list its ${count} Ready pods`, timeoutMs, async () => {
    const live = (await pods(node, 'default', `app=${SERVICE}`)).filter((p) => !p.metadata?.deletionTimestamp);
    const want = live
      .filter(isReady)
      .map((p) => net1Addresses(p)[0] ?? '')
      .sort();
    if (live.length !== count || want.length !== count || want.includes('')) return undefined;
    return JSON.stringify(await sliceAddresses(node, 'default', SERVICE)) === JSON.stringify(want) ? true : undefined;
  });
  return Date.now() - t0;
}

/**
 * A replica added to the blog Deployment reaches its slice, and leaves it again when removed. The
 * removal runs after the traffic stopped: a terminating nginx drops what is in flight, which is
 * the Service's own business, not the attack's.
 */
export async function otherSlicesFollow(node: RealNode, phase: 'up' | 'down'): Promise<number> {
  const replicas = Number(await node.kubectl(['get', 'deployment', '-n', 'default', SERVICE, '-o', 'jsonpath={.spec.replicas}']));
  const want = phase === 'up' ? replicas + 1 : replicas - 1;
  await node.kubectl(['scale', '-n', 'default', `deployment/${SERVICE}`, `--replicas=${want}`]);
  return blogSliceFollows(node, want, 120_000);
}

// --- the guard ---------------------------------------------------------------------------------

export interface Attack {
  /** Sets up what the attack needs as the admin (a lowered cap, a shared NAD), before the checks start. */
  prepare?(): Promise<void>;
  /** Does the attack with the bad input left in place, and asserts it was refused or neutralised. */
  attack(): Promise<void>;
  /** Removes the bad input (as its owner would) and asserts that everything recovered. */
  undo(): Promise<void>;
}

export interface GuardReport {
  requests: number;
  failures: string[];
  hostBefore: string[];
  hostAfter: string[];
  followUpMs: number;
  followDownMs: number;
  /** What the attack cost other namespaces and the components (tenant-costs.ts). */
  costs: Costs;
}

/** The namespaces the tenant attacks from: their own pods are the tenant's business. */
export const ATTACKER_NAMESPACES: readonly string[] = [TENANT_NS, AAA_NS];

/** Runs one attack inside the checks every attack shares (module comment). Throws on the attack's own assertions. */
export async function guard(node: RealNode, log: (m: string) => void, a: Attack): Promise<GuardReport> {
  const t0 = Date.now();
  await a.prepare?.();
  const hostBefore = await settledHostNetwork();
  const stateBefore = await componentState(node, ATTACKER_NAMESPACES, true);
  const tAttack = Date.now();
  const traffic = startTraffic(node);
  let curls: string[];
  let followUpMs: number;
  try {
    await delay(1_000); // a few requests before the attack
    await a.attack();
    followUpMs = await otherSlicesFollow(node, 'up');
    await delay(1_000);
  } finally {
    curls = await traffic.stop();
  }
  const followDownMs = await otherSlicesFollow(node, 'down');
  const hostAfter = await hostNetwork();
  const c = costs(stateBefore, await componentState(node, ATTACKER_NAMESPACES, false));
  const tUndo = Date.now();
  await a.undo();
  const failures = curls.filter((x) => x !== 'ok');
  log(
    `  blog traffic: ${curls.length - failures.length}/${curls.length} ok; blog slice followed a new replica in ${followUpMs} ms, a removed one in ${followDownMs} ms; host: ${hostAfter.length} lines`,
  );
  log(
    `  took ${tUndo - tAttack} ms under the checks (${Date.now() - t0} ms with setup and undo); peak memory: ${Object.entries(c.peaks)
      .map(([k, v]) => `${k} ${v}`)
      .join('; ')}`,
  );
  return { requests: curls.length, failures, hostBefore, hostAfter, followUpMs, followDownMs, costs: c };
}

// --- helpers for the attacks --------------------------------------------------------------------

/** Warning Events in `namespace` with `reason`, as "<kind>/<name>: <message>" lines (read as the tenant: they are its to see). */
export async function events(t: Tenant, namespace: string, reason: string): Promise<string[]> {
  const r = await t.kubectl(['get', 'events', '-n', namespace, '--field-selector', `reason=${reason}`, '-o', 'json']);
  if (r.code !== 0) throw new Error(`kubectl get events as ${t.user}: ${r.stderr}`);
  const list = JSON.parse(r.stdout) as { items: { involvedObject: { kind: string; name: string }; message: string }[] };
  return list.items.map((e) => `${e.involvedObject.kind}/${e.involvedObject.name}: ${e.message}`);
}

/** The apiserver's denial of `verb resource` for the tenant (stderr of a refused kubectl). */
export function denial(r: ExecResult, verb: string, resource: string, group = ''): RegExp | undefined {
  const re = new RegExp(`forbidden: User "${TENANT_USER}" cannot ${verb} resource "${resource}" in API group "${group.replace(/\./g, '\\.')}"`);
  return r.code !== 0 && re.test(r.stderr) ? re : undefined;
}

// --- the attacks -------------------------------------------------------------------------------

export interface OutOfReach {
  /** Per attempt: the kubectl command and the denial it got (stderr), or "ALLOWED". */
  attempts: { what: string; code: number; stderr: string; denied: boolean }[];
}

/**
 * Attack 7: what would widen the tenant's reach without any bug of ours: enabling injection on (or
 * lowering the Pod Security level of) its namespace, enabling another namespace, and forging an
 * EndpointSlice managed by the controller (which clients would program). RBAC refuses each.
 */
export function outOfReach(t: Tenant, out: OutOfReach): Attack {
  return {
    async attack() {
      const slice = {
        apiVersion: 'discovery.k8s.io/v1',
        kind: 'EndpointSlice',
        metadata: { name: 'forged', namespace: t.namespace, labels: { [SERVICE_NAME_LABEL]: 'forged', [MANAGED_BY_LABEL]: MANAGED_BY } },
        addressType: 'IPv4',
        endpoints: [{ addresses: [NODE.ip] }],
        ports: [{ port: 80, protocol: 'TCP' }],
      };
      const tries: { what: string; args: string[]; input?: string; verb: string; resource: string; group?: string }[] = [
        {
          what: `label its namespace ${INJECTION_LABEL}=${INJECTION_ENABLED}`,
          args: ['label', 'namespace', t.namespace, `${INJECTION_LABEL}=${INJECTION_ENABLED}`, '--overwrite'],
          verb: 'patch',
          resource: 'namespaces',
        },
        {
          what: 'label its namespace pod-security.kubernetes.io/enforce=privileged',
          args: ['label', 'namespace', t.namespace, 'pod-security.kubernetes.io/enforce=privileged', '--overwrite'],
          verb: 'patch',
          resource: 'namespaces',
        },
        // kubectl label or patch would GET it first (denied as "get"): PUT it outright.
        {
          what: 'enable injection on namespace default (another one)',
          args: ['replace', '--raw', '/api/v1/namespaces/default', '-f', '-'],
          input: JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'default', labels: { [INJECTION_LABEL]: INJECTION_ENABLED } } }),
          verb: 'update',
          resource: 'namespaces',
        },
        { what: 'create an EndpointSlice managed by the controller', args: ['create', '-f', '-'], input: JSON.stringify(slice), verb: 'create', resource: 'endpointslices', group: 'discovery.k8s.io' },
        { what: "read the blog's slices in namespace default", args: ['get', 'endpointslices', '-n', 'default'], verb: 'list', resource: 'endpointslices', group: 'discovery.k8s.io' },
        // The node agent's addresses come from the Node (admin-owned): out of the tenant's reach.
        {
          what: 'give the node an address on its network (Node annotation)',
          args: ['annotate', 'node', NODE.name, `${NODE_ADDRESSES_ANNOTATION}=${t.namespace}/macvlan1=10.1.1.1/24`],
          verb: 'get',
          resource: 'nodes',
        },
        {
          what: "choose the node's parent for its network (Node annotation)",
          args: ['annotate', 'node', NODE.name, `${NODE_PARENTS_ANNOTATION}=${t.namespace}/macvlan1=${NODE.bridge}`],
          verb: 'get',
          resource: 'nodes',
        },
        {
          what: 'rewrite the network-status of a pod in namespace default',
          args: ['annotate', 'pod', '-n', 'default', CLIENT, `${NETWORK_STATUS_ANNOTATION}=[]`, '--overwrite'],
          verb: 'get',
          resource: 'pods',
        },
      ];
      for (const x of tries) {
        const r = await t.kubectl(x.args, { input: x.input });
        out.attempts.push({ what: x.what, code: r.code, stderr: r.stderr.trim(), denied: denial(r, x.verb, x.resource, x.group) !== undefined });
      }
    },
    async undo() {
      // Nothing was created.
    },
  };
}

export interface StrayBinding {
  /** SidecarRbacFailed Events in the tenant's namespace while its binding is in the way. */
  events: string[];
  /** The controller's RoleBinding in the other (later) namespace appeared. */
  otherBound: boolean;
  /** After the tenant removed its binding, the controller's own took its place. */
  recoveredMs: number;
}

const ownPodBinding = async (node: RealNode, ns: string): Promise<boolean> => {
  const r = await node.kubectlResult(['get', 'rolebinding', '-n', ns, SIDECAR_POD_ROLE, '-o', `jsonpath={.metadata.labels.${RBAC_MANAGED_BY_LABEL.replace(/\./g, '\\.')}}`], { allowFail: true });
  return r.code === 0 && r.stdout.trim() !== '';
};

/**
 * Attack 6: before the admin enables injection on its namespace, the tenant creates a RoleBinding
 * named like the controller's (it may: it holds `view`). The admin then enables the tenant's
 * namespace and another one named after it: the other one is bound regardless, the tenant gets an
 * Event naming the object in the way, and once it is deleted the controller binds the tenant's too.
 */
export function strayRoleBinding(node: RealNode, t: Tenant, out: StrayBinding): Attack {
  return {
    async attack() {
      const rb = {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: SIDECAR_POD_ROLE, namespace: t.namespace },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
        subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: t.namespace }],
      };
      const r = await t.kubectl(['create', '-f', '-'], { input: JSON.stringify(rb) });
      if (r.code !== 0) throw new Error(`the tenant could not create its RoleBinding: ${r.stderr}`);
      await node.kubectl(['label', 'namespace', t.namespace, `${INJECTION_LABEL}=${INJECTION_ENABLED}`, '--overwrite']);
      await createNamespace(node, OTHER_NS, true);
      out.otherBound = await until(`the controller's RoleBinding in ${OTHER_NS}`, 60_000, async () => ((await ownPodBinding(node, OTHER_NS)) ? true : undefined)).catch(() => false);
      out.events = await until(`a SidecarRbacFailed Event in ${t.namespace}`, 60_000, async () => {
        const e = await events(t, t.namespace, 'SidecarRbacFailed');
        return e.length > 0 ? e : undefined;
      }).catch(() => []);
    },
    async undo() {
      const r = await t.kubectl(['delete', 'rolebinding', '-n', t.namespace, SIDECAR_POD_ROLE]);
      if (r.code !== 0) throw new Error(`the tenant could not delete its RoleBinding: ${r.stderr}`);
      const t0 = Date.now();
      // The controller retries with backoff, and re-checks every 5 min anyway.
      out.recoveredMs = await until(`the controller's RoleBinding in ${t.namespace} after the stray one went`, 120_000, async () =>
        (await ownPodBinding(node, t.namespace)) ? Date.now() - t0 : undefined,
      ).catch(() => -1);
    },
  };
}

// --- the tenant's own workload: the blog's four files, applied by the tenant in its namespace ----

/** The tenant applies the blog's files unchanged in its own (enabled) namespace, as the tenant. */
export async function tenantBlog(node: RealNode, t: Tenant): Promise<void> {
  for (const f of BLOG_FILES) {
    const r = await t.kubectl(['apply', '-n', t.namespace, '-f', '-'], { input: blogFile(f) });
    if (r.code !== 0) throw new Error(`the tenant could not apply ${f}: ${r.stderr}`);
  }
  await node.wait(`deployment/${SERVICE}`, 'condition=Available', { namespace: t.namespace, timeoutMs: 180_000 });
  await node.wait(`pod/${CLIENT}`, 'condition=Ready', { namespace: t.namespace, timeoutMs: 180_000 });
  await tenantSliceFollows(node, t, 2, 30_000);
}

/** The tenant's slice lists exactly its live Ready backends' net1 addresses, `count` of them. */
export async function tenantSliceFollows(node: RealNode, t: Tenant, count: number, timeoutMs: number): Promise<number> {
  const t0 = Date.now();
  await until(`the slice of ${t.namespace}/${SERVICE} to list its ${count} Ready pods`, timeoutMs, async () => {
    const live = (await pods(node, t.namespace, `app=${SERVICE}`)).filter((p) => !p.metadata?.deletionTimestamp);
    const want = live
      .filter(isReady)
      .map((p) => net1Addresses(p)[0] ?? '')
      .sort();
    if (live.length !== count || want.length !== count || want.includes('')) return undefined;
    return JSON.stringify(await sliceAddresses(node, t.namespace, SERVICE)) === JSON.stringify(want) ? true : undefined;
  });
  return Date.now() - t0;
}

/** Warning Events about one object, as "<reason>: <message>" (read as the tenant); only those last seen at or after `sinceMs` when given (Events outlive an attack). */
export async function warningsAbout(t: Tenant, kind: string, name: string, sinceMs = 0): Promise<string[]> {
  const r = await t.kubectl(['get', 'events', '-n', t.namespace, '--field-selector', `involvedObject.kind=${kind},involvedObject.name=${name},type=Warning`, '-o', 'json']);
  if (r.code !== 0) throw new Error(`kubectl get events as ${t.user}: ${r.stderr}`);
  type Ev = { reason: string; message: string; lastTimestamp?: string; eventTime?: string; firstTimestamp?: string };
  // Event times have whole seconds: allow for the truncation.
  const seen = (e: Ev): number => Date.parse(e.lastTimestamp ?? e.eventTime ?? e.firstTimestamp ?? '') + 1_000;
  return (JSON.parse(r.stdout) as { items: Ev[] }).items.filter((e) => sinceMs === 0 || seen(e) >= sinceMs).map((e) => `${e.reason}: ${e.message}`);
}

interface StatusEntry {
  name: string;
  interface?: string;
  ips?: string[];
  [k: string]: unknown;
}

/** The tenant rewrites the net1 entry of its own pod's network-status (what RBAC lets a pod owner do). */
async function rewriteNet1(t: Tenant, podName: string, original: string, f: (e: StatusEntry) => StatusEntry): Promise<ExecResult> {
  const list = (JSON.parse(original) as StatusEntry[]).map((e) => (e.interface === 'net1' ? f(e) : e));
  return t.kubectl(['annotate', 'pod', '-n', t.namespace, podName, '--overwrite', `${NETWORK_STATUS_ANNOTATION}=${JSON.stringify(list)}`]);
}

async function restoreStatus(t: Tenant, podName: string, original: string): Promise<void> {
  const r = await t.kubectl(['annotate', 'pod', '-n', t.namespace, podName, '--overwrite', `${NETWORK_STATUS_ANNOTATION}=${original}`]);
  if (r.code !== 0) throw new Error(`the tenant could not restore the network-status of ${podName}: ${r.stderr}`);
}

/** Outside the tenant NAD's whereabouts range 10.1.1.0/24 (src/annotations/nad-ipam.ts). */
export const OUTSIDE_RANGE = '10.9.9.9';
/** Addresses a pod must not claim (docs/security.md, attack 3): loopback, link-local, unspecified, multicast, the node's, outside the NAD's range. */
export const BAD_ADDRESSES = ['127.0.0.1', '169.254.10.10', '0.0.0.0', '224.0.0.5', NODE.ip, OUTSIDE_RANGE] as const;
/** The controller's Warning for refused addresses (on the Service, naming the pod and each address). */
export const REASON_ADDRESS_REFUSED = 'AddressRefused';

export interface BadAddresses {
  pod: string;
  /** The tenant's annotate: allowed without the optional policy. */
  annotated: ExecResult | undefined;
  /** AddressRefused Events in the namespace ("<kind>/<name>: <message>"). */
  events: string[];
  /** The tenant's slice while the addresses are claimed. */
  slice: string[];
  /** A replica added while the bad pod is in place reached the slice after this long (-1: never). */
  newReplicaMs: number;
  /** After the annotation was restored, the slice listed the live pods again (-1: never). */
  recoveredMs: number;
}

/**
 * Attack 3: the tenant adds loopback, link-local, unspecified, multicast, the node's address and
 * an address outside the NAD's range to one backend's net1 `ips`. The controller drops each with
 * an Event naming pod and address, and the Service keeps following its pods (a new replica reaches
 * the slice: on the code before the fix the apiserver refused every write with 422 and it froze).
 */
export function badAddresses(node: RealNode, t: Tenant, out: BadAddresses): Attack {
  let original = '';
  return {
    async attack() {
      const victim = (await pods(node, t.namespace, `app=${SERVICE}`)).find((p) => isReady(p) && !p.metadata?.deletionTimestamp);
      out.pod = victim?.metadata?.name ?? '';
      original = victim?.metadata?.annotations?.[NETWORK_STATUS_ANNOTATION] ?? '';
      if (!out.pod || !original) throw new Error(`no Ready backend with a network-status in ${t.namespace}`);
      out.annotated = await rewriteNet1(t, out.pod, original, (e) => ({ ...e, ips: [...(e.ips ?? []), ...BAD_ADDRESSES] }));
      out.events = await until(`${REASON_ADDRESS_REFUSED} Events naming ${out.pod} and each bad address`, 30_000, async () => {
        const e = await events(t, t.namespace, REASON_ADDRESS_REFUSED);
        return BAD_ADDRESSES.every((a) => e.some((m) => m.includes(a) && m.includes(out.pod))) ? e : undefined;
      }).catch(() => events(t, t.namespace, REASON_ADDRESS_REFUSED));
      await node.kubectl(['scale', '-n', t.namespace, `deployment/${SERVICE}`, '--replicas=3']);
      out.newReplicaMs = await tenantSliceFollows(node, t, 3, 60_000).catch(() => -1);
      out.slice = await sliceAddresses(node, t.namespace, SERVICE);
    },
    async undo() {
      await restoreStatus(t, out.pod, original);
      await node.kubectl(['scale', '-n', t.namespace, `deployment/${SERVICE}`, '--replicas=2']);
      out.recoveredMs = await tenantSliceFollows(node, t, 2, 60_000).catch(() => -1);
    },
  };
}

/** A route that an `ip -batch` line smuggled in through an interface name would add (TEST-NET-3). */
export const SMUGGLED_ROUTE = '203.0.113.0/24';

export interface SmuggledInterface {
  annotated: ExecResult | undefined;
  /** Warning Events on the client pod while the annotation is bad. */
  events: string[];
  /** Routes in the client pod's namespace naming the smuggled prefix (must stay empty). */
  smuggled: string[];
  /** The sidecar's metrics lines (multus_proxy_sidecar_*) while the annotation is bad. */
  metrics: string[];
  /** The client pod's Ready condition while the annotation is bad (read last thing before it is restored). */
  ready: boolean;
  /** Restarts of the client's sidecar from the rewrite until just before the restore. */
  sidecarRestarts: number;
  /** After the annotation was restored, a new backend replica answered the client (-1: never). */
  followsAfterMs: number;
}

async function podRoutes(node: RealNode, ns: string, podName: string): Promise<string> {
  const r = await node.exec(ns, podName, ['ip', 'route', 'show', 'table', 'all'], { container: CLIENT });
  if (r.code !== 0) throw new Error(`ip route in ${ns}/${podName}: ${r.stderr}`);
  return r.stdout;
}

/** The injected sidecar's restart count in a pod (native sidecar or container). */
function sidecarRestarts(p: V1Pod): number {
  const st = [...(p.status?.initContainerStatuses ?? []), ...(p.status?.containerStatuses ?? [])].find((c) => c.name === SIDECAR_CONTAINER_NAME);
  return st?.restartCount ?? 0;
}

/** The sidecar's gauge while it refuses the pod's network-status. */
const STATUS_REFUSED = 'multus_proxy_sidecar_invalid_pod_annotation{annotation="network-status"} 1';

/**
 * Attack 2: the tenant sets the `interface` of its injected client's net1 entry to
 * `net1\nroute add 203.0.113.0/24 dev lo`. The line never reaches `ip`; the pod gets a Warning
 * Event and the sidecar's metrics show it cannot sync; once the annotation is restored, the sidecar
 * follows the Service again (a new replica answers the client).
 */
export function smuggledInterface(node: RealNode, t: Tenant, out: SmuggledInterface): Attack {
  let original = '';
  let restartsBefore = 0;
  return {
    async attack() {
      original = (await pod(node, t.namespace, CLIENT)).metadata?.annotations?.[NETWORK_STATUS_ANNOTATION] ?? '';
      if (!original) throw new Error(`${t.namespace}/${CLIENT} has no network-status`);
      restartsBefore = sidecarRestarts(await pod(node, t.namespace, CLIENT));
      const since = Date.now();
      out.annotated = await rewriteNet1(t, CLIENT, original, (e) => ({ ...e, interface: `net1\nroute add ${SMUGGLED_ROUTE} dev lo` }));
      out.events = await until(`a Warning Event on ${CLIENT}`, 60_000, async () => {
        const e = await warningsAbout(t, 'Pod', CLIENT, since);
        return e.length > 0 ? e : undefined;
      }).catch(() => []);
      // The sidecar's own verdict on the value the kubelet put in the downwardAPI volume: its gauge
      // is 1 once it has read and refused it (keeping the last good value), so the routes read
      // after it are those it left with the bad value in hand.
      const port = await sidecarHealthPort(node, t.namespace, CLIENT);
      out.metrics = await until('the sidecar refusing the network-status', 60_000, async () => {
        const m = await sidecarMetrics(node, t.namespace, CLIENT, port);
        return m.includes(STATUS_REFUSED) ? m : undefined;
      }).catch(() => sidecarMetrics(node, t.namespace, CLIENT, port));
      out.smuggled = (await podRoutes(node, t.namespace, CLIENT)).split('\n').filter((l) => l.includes(SMUGGLED_ROUTE.replace('/24', '')));
    },
    async undo() {
      // The guard's checks ran meanwhile with the bad value in place: the pod is Ready and its
      // sidecar has not restarted through all of it.
      const p = await pod(node, t.namespace, CLIENT);
      out.ready = isReady(p);
      out.sidecarRestarts = sidecarRestarts(p) - restartsBefore;
      await restoreStatus(t, CLIENT, original);
      out.followsAfterMs = await newReplicaAnswers(node, t);
    },
  };
}

/**
 * The sidecar still follows the tenant's Service: a replica added to its backends answers the
 * tenant's client within 60 s (ms from the replica being in the slice; -1: never). Scales back after.
 */
export async function newReplicaAnswers(node: RealNode, t: Tenant): Promise<number> {
  const names = (await pods(node, t.namespace, `app=${SERVICE}`)).map((p) => p.metadata?.name ?? '');
  await node.kubectl(['scale', '-n', t.namespace, `deployment/${SERVICE}`, '--replicas=3']);
  await tenantSliceFollows(node, t, 3, 60_000);
  const fresh = (await pods(node, t.namespace, `app=${SERVICE}`)).find((p) => !names.includes(p.metadata?.name ?? ''))?.metadata?.name ?? '';
  const clientNet1 = net1Addresses(await pod(node, t.namespace, CLIENT))[0] ?? '';
  const t0 = Date.now();
  const ms = await until(`the new replica ${fresh} to answer ${t.namespace}/${CLIENT}`, 60_000, async () => {
    await curlBurst(node, t.namespace, CLIENT, tenantUrl(t), 6);
    return (await arrivals(node, t.namespace, fresh)).some((a) => a.from === clientNet1) ? Date.now() - t0 : undefined;
  }).catch(() => -1);
  await node.kubectl(['scale', '-n', t.namespace, `deployment/${SERVICE}`, '--replicas=2']);
  await tenantSliceFollows(node, t, 2, 60_000);
  return ms;
}

const tenantUrl = (t: Tenant): string => `${SERVICE}.${t.namespace}.svc.cluster.local`;

/** The injected sidecar's health (and metrics) port, from its startup probe in the pod spec. */
export async function sidecarHealthPort(node: RealNode, ns: string, podName: string): Promise<number> {
  const spec = (await pod(node, ns, podName)).spec;
  const c = [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])].find((x) => x.name === SIDECAR_CONTAINER_NAME);
  const port = Number(c?.startupProbe?.httpGet?.port);
  if (!Number.isInteger(port) || port <= 0) throw new Error(`${ns}/${podName} has no injected sidecar with an HTTP startup probe`);
  return port;
}

/** The sidecar's metrics (multus_proxy_sidecar_* lines), read from inside the pod. */
export async function sidecarMetrics(node: RealNode, ns: string, podName: string, port: number): Promise<string[]> {
  const m = await node.exec(ns, podName, ['curl', '-s', '-m', '3', `http://127.0.0.1:${port}/metrics`], { container: CLIENT });
  if (m.code !== 0) throw new Error(`metrics of ${ns}/${podName}: curl exit ${m.code} ${m.stderr}`);
  return m.stdout.split('\n').filter((l) => l.startsWith('multus_proxy_sidecar_'));
}

/** Values of one metric's series, by their label text (`{annotation="network-status"}`), from metrics lines. */
export function metricValues(lines: readonly string[], name: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const l of lines) {
    const m = /^(\S+?)(\{[^}]*\})? (\S+)$/.exec(l);
    if (m?.[1] === name) out[m[2] ?? ''] = Number(m[3]);
  }
  return out;
}

export interface MalformedAnnotations {
  /** The tenant's annotate of its client pod. */
  annotated: ExecResult | undefined;
  /** SidecarInvalidAnnotation Events on the client pod while the annotations are bad. */
  events: string[];
  /** multus_proxy_sidecar_invalid_pod_annotation per annotation, while bad and after the fix. */
  invalidWhileBad: Record<string, number>;
  invalidAfter: Record<string, number>;
  /** 10 curls of the tenant's Service from its client while the annotations are bad. */
  curlsWhileBad: string[];
  readyWhileBad: boolean;
  /** After the fix, a new replica answered the client after this long (-1: never). */
  followsAfterMs: number;
}

/**
 * A sidecar that met bad input (attack 9): the tenant writes a malformed `service-network` and a
 * `network-status` that is not JSON on its own injected client. The sidecar keeps its last good
 * values (the client still reaches its Service), says so with an Event on the pod and a metric,
 * and once the annotations are fixed it follows the Service again.
 */
export function malformedAnnotations(node: RealNode, t: Tenant, out: MalformedAnnotations): Attack {
  let original = '';
  const invalid = async (): Promise<Record<string, number>> =>
    metricValues(await sidecarMetrics(node, t.namespace, CLIENT, await sidecarHealthPort(node, t.namespace, CLIENT)), 'multus_proxy_sidecar_invalid_pod_annotation');
  return {
    async attack() {
      original = (await pod(node, t.namespace, CLIENT)).metadata?.annotations?.[NETWORK_STATUS_ANNOTATION] ?? '';
      if (!original) throw new Error(`${t.namespace}/${CLIENT} has no network-status`);
      out.annotated = await t.kubectl(['annotate', 'pod', '-n', t.namespace, CLIENT, '--overwrite', `${SERVICE_NETWORK_ANNOTATION}=not a network!`, `${NETWORK_STATUS_ANNOTATION}={not json`]);
      if (out.annotated.code !== 0) return;
      out.events = await until(`${REASON_INVALID_ANNOTATION} Events on ${CLIENT} about both annotations`, 30_000, async () => {
        const e = await events(t, t.namespace, REASON_INVALID_ANNOTATION);
        return e.some((m) => m.includes(SERVICE_NETWORK_ANNOTATION)) && e.some((m) => m.includes(NETWORK_STATUS_ANNOTATION)) ? e : undefined;
      }).catch(() => events(t, t.namespace, REASON_INVALID_ANNOTATION));
      out.invalidWhileBad = await invalid();
      out.curlsWhileBad = await curlBurst(node, t.namespace, CLIENT, tenantUrl(t), 10);
      out.readyWhileBad = isReady(await pod(node, t.namespace, CLIENT));
    },
    async undo() {
      const r = await t.kubectl(['annotate', 'pod', '-n', t.namespace, CLIENT, '--overwrite', `${SERVICE_NETWORK_ANNOTATION}-`, `${NETWORK_STATUS_ANNOTATION}=${original}`]);
      if (r.code !== 0) throw new Error(`the tenant could not fix its annotations: ${r.stderr}`);
      out.invalidAfter = await until('the invalid-annotation metric back at 0', 30_000, async () => {
        const v = await invalid();
        return Object.values(v).every((x) => x === 0) ? v : undefined;
      }).catch(() => invalid());
      out.followsAfterMs = await newReplicaAnswers(node, t);
    },
  };
}

// --- attack 1: the node agent ------------------------------------------------------------------

/** The node's address on the blog's network, as the admin gives it (docs/node-agent.md; as nodeport.ts does). */
const AGENT_NODE_ADDRESS = '10.1.1.250';

/**
 * The admin installs the node agent (bootstrap install plus its component) and gives the node its
 * address (`<ip>/<prefix>`, the blog network's by default) and parent on `network` (`<ns>/<nad>`,
 * the blog's by default); resolves with the agent's interface, once it holds that address.
 */
export async function installAgent(node: RealNode, network = 'default/macvlan1', address = `${AGENT_NODE_ADDRESS}/24`): Promise<string> {
  await node.sh(`${buildOverlay(agentOverlay(node, true))} | kubectl apply -f -`);
  await node.kubectl(['annotate', 'node', NODE.name, '--overwrite', `${NODE_ADDRESSES_ANNOTATION}=${network}=${address}`, `${NODE_PARENTS_ANNOTATION}=${network}=${NODE.parent}`]);
  await node.kubectl(['rollout', 'status', '-n', AGENT_NAMESPACE, 'daemonset/multus-proxy-node', '--timeout=180s'], { timeoutMs: 190_000 });
  await node.kubectl(['wait', '-n', AGENT_NAMESPACE, '--for=condition=Ready', 'pod', '-l', AGENT_SELECTOR, '--timeout=120s'], { timeoutMs: 130_000 });
  const ip = address.split('/')[0] ?? '';
  const v6 = ip.includes(':');
  return until('the agent interface with the node address', 60_000, async () => {
    const out = (await run('ip', ['-o', v6 ? '-6' : '-4', 'addr', 'show', 'to', `${ip}/${v6 ? 128 : 32}`], { encoding: 'utf8' })).stdout;
    return /^\d+: (mpxh[^\s@]*)/.exec(out)?.[1];
  });
}

/** The node agent's completed syncs (every kind and result), from its /metrics on the host (hostNetwork). */
async function agentSyncs(): Promise<number> {
  const r = await fetch(`http://127.0.0.1:${DEFAULT_NODE_HEALTH_PORT}/metrics`, { signal: AbortSignal.timeout(5_000) });
  if (!r.ok) throw new Error(`the node agent's /metrics: HTTP ${r.status}`);
  return Object.values(metricValues((await r.text()).split('\n'), 'multus_proxy_node_syncs_total')).reduce((a, b) => a + b, 0);
}

export interface AgentAttack {
  /** The other namespace's backend address the tenant claimed for the node. */
  victim: string;
  /** `ip route get <victim>` on the host after each attempt (must never say local). */
  routeGet: string[];
  /** Warning Events on the tenant's NADs. */
  events: string[];
  annotated: ExecResult[];
}

const nadJson = (t: Tenant, name: string, master: string, annotations: Record<string, string>): string =>
  JSON.stringify({
    apiVersion: 'k8s.cni.cncf.io/v1',
    kind: 'NetworkAttachmentDefinition',
    metadata: { name, namespace: t.namespace, annotations },
    spec: { config: JSON.stringify({ cniVersion: '0.3.1', type: 'macvlan', master, mode: 'bridge', ipam: { type: 'whereabouts', range: '10.1.1.0/24' } }) },
  });

/**
 * Attack 1: with the agent serving the blog's network for the admin, the tenant gives its own NAD
 * (named by its Service) a `node-address-range` holding another namespace's backend address, then
 * a /15, and adds a NAD on the node's own bridge (which holds the InternalIP), named by a Service
 * too. Nothing of it may reach the host (guard's snapshot); `ip route get` of the victim never
 * says `local`; the NADs get Events saying why they are not used.
 */
export function nadReachesHost(node: RealNode, t: Tenant, out: AgentAttack): Attack {
  const range = (a: string, prefix: number): string => `${a}-${a}/${prefix}`;
  const routeGet = async (): Promise<string> => (await run('ip', ['route', 'get', out.victim], { encoding: 'utf8' })).stdout.trim();
  return {
    async attack() {
      out.victim = (await sliceAddresses(node, 'default', SERVICE))[0] ?? '';
      if (!out.victim) throw new Error(`no backend address in default/${SERVICE}`);
      const attempts: { nad: string; master: string; annotations: Record<string, string> }[] = [
        { nad: 'macvlan1', master: NODE.parent, annotations: { [NODE_ADDRESS_RANGE_ANNOTATION]: range(out.victim, 24) } },
        { nad: 'macvlan1', master: NODE.parent, annotations: { [NODE_ADDRESS_RANGE_ANNOTATION]: range('10.1.1.240', 15) } },
        { nad: 'uplink', master: NODE.bridge, annotations: { [NODE_ADDRESS_RANGE_ANNOTATION]: range('10.244.0.240', 24) } },
      ];
      const svc = {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'uplink', namespace: t.namespace, labels: { [PROXY_NAME_LABEL]: PROXY_NAME }, annotations: { [SERVICE_NETWORK_ANNOTATION]: 'uplink' } },
        spec: { selector: { app: SERVICE }, ports: [{ port: 80 }] },
      };
      out.annotated.push(await t.kubectl(['apply', '-f', '-'], { input: JSON.stringify(svc) }));
      for (const a of attempts) {
        const before = await agentSyncs();
        out.annotated.push(await t.kubectl(['apply', '-f', '-'], { input: nadJson(t, a.nad, a.master, a.annotations) }));
        // The agent has met this NAD: its Event on the NAD (once per NAD and message, so the second
        // attempt on macvlan1 has none of its own) and a sync of the agent after the change.
        await until(`the node agent's sync after ${t.namespace}/${a.nad} was given ${JSON.stringify(a.annotations)}`, 60_000, async () => {
          if ((await agentSyncs()) <= before) return undefined;
          return (await warningsAbout(t, 'NetworkAttachmentDefinition', a.nad)).some((e) => e.includes(NODE_ADDRESS_RANGE_ANNOTATION)) ? true : undefined;
        });
        out.routeGet.push(await routeGet());
      }
      out.events = [...(await warningsAbout(t, 'NetworkAttachmentDefinition', 'macvlan1')), ...(await warningsAbout(t, 'NetworkAttachmentDefinition', 'uplink'))];
    },
    async undo() {
      await t.kubectl(['delete', 'service', '-n', t.namespace, 'uplink', '--ignore-not-found']);
      await t.kubectl(['delete', 'network-attachment-definitions.k8s.cni.cncf.io', '-n', t.namespace, 'uplink', '--ignore-not-found']);
      const r = await t.kubectl(['apply', '-n', t.namespace, '-f', '-'], { input: blogFile('net-attach.yml') });
      if (r.code !== 0) throw new Error(`the tenant could not restore its NAD: ${r.stderr}`);
    },
  };
}

// --- attack 4: what a workload's token can read ------------------------------------------------

export interface TokenReach {
  /** HTTP status per request: "<what>: <code>". */
  statuses: Record<string, number>;
}

/** The HTTP status of a GET to the apiserver with the container's own ServiceAccount token. */
async function tokenGet(node: RealNode, ns: string, podName: string, container: string, path: string): Promise<number> {
  const script = `curl -s -o /dev/null -w '%{http_code}' --cacert /var/run/secrets/kubernetes.io/serviceaccount/ca.crt -H "Authorization: Bearer $(cat /var/run/secrets/kubernetes.io/serviceaccount/token)" https://kubernetes.default.svc${path}`;
  const r = await node.exec(ns, podName, ['sh', '-c', script], { container });
  return Number(r.stdout.trim());
}

const PLAIN_POD = 'plain-app';

/**
 * Attack 4 (without the optional policies): the app container of the tenant's injected client,
 * and a plain pod of the namespace under its own ServiceAccount (no sidecar), use their tokens.
 * Neither may list the namespace's pods (the sidecar reads its own pod from a downwardAPI volume);
 * the plain pod may not read Services or EndpointSlices either (only injected pods' accounts are bound).
 */
export function tokenReach(node: RealNode, t: Tenant, out: TokenReach): Attack {
  return {
    async attack() {
      const objs = [
        { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'plain', namespace: t.namespace } },
        {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: PLAIN_POD, namespace: t.namespace },
          spec: {
            serviceAccountName: 'plain',
            terminationGracePeriodSeconds: 1,
            containers: [{ name: 'app', image: 'ghcr.io/redhat-nfvpe/multus-service-demo:fedora-tools', command: ['/sbin/init'] }],
          },
        },
      ];
      for (const o of objs) {
        const r = await t.kubectl(['apply', '-f', '-'], { input: JSON.stringify(o) });
        if (r.code !== 0) throw new Error(`the tenant could not create ${o.kind} ${o.metadata.name}: ${r.stderr}`);
      }
      await node.wait(`pod/${PLAIN_POD}`, 'condition=Ready', { namespace: t.namespace, timeoutMs: 120_000 });
      const pods = `/api/v1/namespaces/${t.namespace}/pods`;
      out.statuses[`injected app container: list pods`] = await tokenGet(node, t.namespace, CLIENT, CLIENT, pods);
      out.statuses[`plain pod: list pods`] = await tokenGet(node, t.namespace, PLAIN_POD, 'app', pods);
      out.statuses[`plain pod: list services`] = await tokenGet(node, t.namespace, PLAIN_POD, 'app', '/api/v1/services');
      out.statuses[`plain pod: list endpointslices`] = await tokenGet(node, t.namespace, PLAIN_POD, 'app', '/apis/discovery.k8s.io/v1/endpointslices');
    },
    async undo() {
      await t.kubectl(['delete', 'pod', '-n', t.namespace, PLAIN_POD, '--ignore-not-found', '--wait=true']);
      await t.kubectl(['delete', 'serviceaccount', '-n', t.namespace, 'plain', '--ignore-not-found']);
    },
  };
}

// --- attack 8: a Service on another namespace's network -----------------------------------------

export interface BorrowedNetwork {
  created: ExecResult | undefined;
  /** Warning Events on the tenant's Service. */
  events: string[];
  /** Lines of the blog client's nat rules naming the tenant's Service (must stay empty). */
  clientRules: string[];
}

const BORROW = 'borrow';

/**
 * Attack 8: the tenant runs a backend attached to the blog's NAD `default/macvlan1` (Multus allows
 * the reference) and a Service naming that network. The NAD's owner allowed nothing: the Service is
 * refused (a denial) or not served (an Event on it), and the blog's client gets no rule for it.
 */
export function borrowedNetwork(node: RealNode, t: Tenant, out: BorrowedNetwork): Attack {
  return {
    async attack() {
      const backend = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: BORROW, namespace: t.namespace, labels: { app: BORROW }, annotations: { 'k8s.v1.cni.cncf.io/networks': 'default/macvlan1', 'multus-proxy.k8s.cni.cncf.io/inject': 'false' } },
        spec: { terminationGracePeriodSeconds: 1, containers: [{ name: 'web', image: 'ghcr.io/redhat-nfvpe/multus-service-demo:fedora-nginx', ports: [{ containerPort: 80 }] }] },
      };
      const r = await t.kubectl(['apply', '-f', '-'], { input: JSON.stringify(backend) });
      if (r.code !== 0) throw new Error(`the tenant could not create its backend: ${r.stderr}`);
      await node.wait(`pod/${BORROW}`, 'condition=Ready', { namespace: t.namespace, timeoutMs: 120_000 });
      const svc = {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: BORROW, namespace: t.namespace, labels: { [PROXY_NAME_LABEL]: PROXY_NAME }, annotations: { [SERVICE_NETWORK_ANNOTATION]: 'default/macvlan1' } },
        spec: { selector: { app: BORROW }, ports: [{ port: 80 }] },
      };
      out.created = await t.kubectl(['apply', '-f', '-'], { input: JSON.stringify(svc) });
      await delay(5_000); // controller and sidecars
      out.events = out.created.code === 0 ? await warningsAbout(t, 'Service', BORROW) : [];
      // iptables rules name the Service in a comment; the nftables table holds its cluster IP.
      const clusterIp = out.created.code === 0 ? (await t.kubectl(['get', 'service', '-n', t.namespace, BORROW, '-o', 'jsonpath={.spec.clusterIP}'])).stdout.trim() : '';
      const names = (l: string): boolean => l.includes(`${t.namespace}/${BORROW}`) || (clusterIp !== '' && new RegExp(`(^|[^0-9.])${clusterIp.replaceAll('.', '\\.')}([^0-9]|$)`).test(l));
      out.clientRules = (await sidecarRules(node, 'default', CLIENT)).filter(names);
    },
    async undo() {
      await t.kubectl(['delete', 'service,pod', '-n', t.namespace, BORROW, '--ignore-not-found', '--wait=true']);
    },
  };
}

// --- attack 5: more Services on a network than a sidecar serves ---------------------------------

export interface ServiceFlood {
  /** ServiceCapReached Events in the tenant's namespace. */
  events: string[];
  /** multus_proxy_sidecar_services_dropped by network while flooded, and after the Services went. */
  dropped: Record<string, number>;
  droppedAfter: Record<string, number>;
}

const FLOOD = 5;
const WEBHOOK_NS = 'multus-proxy-system';

/** The webhook's config.yaml as installed. */
export async function webhookConfig(node: RealNode): Promise<string> {
  return node.kubectl(['get', 'configmap', '-n', WEBHOOK_NS, 'multus-proxy-webhook', '-o', 'jsonpath={.data.config\\.yaml}']);
}

/** Replaces the webhook's config.yaml and restarts the webhook, which reads it at start. */
export async function setWebhookConfig(node: RealNode, config: string): Promise<void> {
  await node.kubectl(['patch', 'configmap', '-n', WEBHOOK_NS, 'multus-proxy-webhook', '--type=merge', '-p', JSON.stringify({ data: { 'config.yaml': config } })]);
  // The webhook reads its config at start.
  await node.kubectl(['rollout', 'restart', '-n', WEBHOOK_NS, 'deployment/multus-proxy-webhook']);
  try {
    await node.kubectl(['rollout', 'status', '-n', WEBHOOK_NS, 'deployment/multus-proxy-webhook', '--timeout=180s'], { timeoutMs: 190_000 });
  } catch (e) {
    // Say why the rollout stalled (a Pending surge pod, a failing probe) rather than only that it did.
    const pods = await node.kubectl(['get', 'pods', '-n', WEBHOOK_NS, '-o', 'wide']).catch((x: unknown) => String(x));
    const events = await node.kubectl(['get', 'events', '-n', WEBHOOK_NS, '--sort-by=.lastTimestamp']).catch((x: unknown) => String(x));
    const nodeUse = await node
      .kubectl(['describe', 'node'])
      .then((d) => d.slice(d.indexOf('Allocated resources')))
      .catch((x: unknown) => String(x));
    throw new Error(`${e instanceof Error ? e.message : String(e)}\npods:\n${pods}\nevents:\n${events.split('\n').slice(-25).join('\n')}\n${nodeUse.slice(0, 1500)}`, { cause: e });
  }
}

/** The webhook's config with sidecar.maxServicesPerNetwork set to `cap`. */
export function cappedConfig(original: string, cap: number): string {
  if (!/^sidecar:\n/m.test(original)) throw new Error(`the webhook config has no sidecar section: ${original}`);
  // The shipped config already sets the cap (2000): change that line; a second key would be a
  // duplicate the webhook refuses to start with (found in a full run: the new pod crash-looped).
  return /^ {2}maxServicesPerNetwork: \d+$/m.test(original)
    ? original.replace(/^ {2}maxServicesPerNetwork: \d+$/m, `  maxServicesPerNetwork: ${cap}`)
    : original.replace(/^sidecar:\n/m, `sidecar:\n  maxServicesPerNetwork: ${cap}\n`);
}

/**
 * The admin's lowered per-network cap, shared by the attacks that need one (the tenant's flood,
 * the fair share): the webhook rolls once to lower it and once to restore it, however many
 * attacks run under it, and each attack still runs under its own guard. `restore` puts the
 * original config back and recreates every client recreated under the cap; it is a no-op once done.
 */
export interface LoweredCap {
  readonly cap: number;
  /** Lowers the cap unless it is already lowered. */
  lower(): Promise<void>;
  /** Recreates the blog client in `ns` (through `kubectl`) until it is injected with the lowered cap. */
  recreateClient(ns: string, kubectl: Tenant['kubectl']): Promise<void>;
  restore(): Promise<void>;
}

export function loweredCap(node: RealNode, cap: number): LoweredCap {
  let original: string | undefined;
  const clients = new Map<string, Tenant['kubectl']>();
  return {
    cap,
    async lower() {
      if (original !== undefined) return;
      const config = await webhookConfig(node);
      await setWebhookConfig(node, cappedConfig(config, cap));
      original = config;
    },
    async recreateClient(ns, kubectl) {
      if (original === undefined) throw new Error(`the cap is not lowered: recreating ${ns}/${CLIENT} would inject the installed one`);
      clients.set(ns, kubectl);
      await recreateClientWithCap(node, ns, String(cap), kubectl);
    },
    async restore() {
      if (original === undefined) return;
      const config = original;
      original = undefined;
      await setWebhookConfig(node, config);
      // The clients are in different namespaces: recreated side by side.
      await Promise.all([...clients].map(([ns, kubectl]) => recreateClientWithCap(node, ns, configuredCap(config), kubectl)));
      clients.clear();
    },
  };
}

/** The cap a webhook config sets (or the default). */
export const configuredCap = (config: string): string => /^ {2}maxServicesPerNetwork: (\d+)$/m.exec(config)?.[1] ?? String(DEFAULT_MAX_SERVICES_PER_NETWORK);

/** The cap the webhook injected into the blog client's sidecar in `ns`. */
async function injectedCap(node: RealNode, ns: string): Promise<string | undefined> {
  const spec = (await pod(node, ns, CLIENT)).spec;
  const c = [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])].find((x) => x.name === SIDECAR_CONTAINER_NAME);
  return c?.env?.find((e) => e.name === 'MAX_SERVICES_PER_NETWORK')?.value;
}

/**
 * Recreates the blog client in `ns` (through `kubectl`: the tenant's or the admin's) until the
 * webhook injected `cap`: right after a rollout the apiserver can still reach an old webhook pod
 * over a kept-alive connection while it shuts down, and that pod injects the old setting (seen in
 * a full run: the flood met a sidecar capped at 2000).
 */
export async function recreateClientWithCap(node: RealNode, ns: string, cap: string, kubectl: Tenant['kubectl']): Promise<void> {
  let got: string | undefined;
  for (let attempt = 1; attempt <= 4; attempt++) {
    await kubectl(['delete', 'pod', '-n', ns, CLIENT, '--wait=true', '--timeout=120s'], { timeoutMs: 130_000 });
    const r = await kubectl(['apply', '-n', ns, '-f', '-'], { input: blogFile('pod.yml') });
    if (r.code !== 0) throw new Error(`could not recreate ${ns}/${CLIENT}: ${r.stderr}`);
    got = await injectedCap(node, ns);
    if (got === cap) break;
    await delay(5_000);
  }
  if (got !== cap) throw new Error(`the webhook still injects MAX_SERVICES_PER_NETWORK=${got ?? '(unset)'} after 4 tries, not ${cap}`);
  await node.wait(`pod/${CLIENT}`, 'condition=Ready', { namespace: ns, timeoutMs: 180_000 });
}

/**
 * Attack 5: the admin caps Services per network at `lowered.cap` (sidecar.maxServicesPerNetwork in
 * the webhook's config) and the tenant's client is recreated under it; the tenant then puts FLOOD
 * more Services on its network. The sidecar serves `cap` of them, says which it leaves out
 * (ServiceCapReached, services_dropped{network}); once the Services go, it serves all again. The
 * cap stays lowered for the next attack that shares it; `lowered.restore()` puts it back.
 */
export function serviceFlood(node: RealNode, t: Tenant, out: ServiceFlood, lowered: LoweredCap): Attack {
  const net = `${t.namespace}/macvlan1`;
  const dropped = async (): Promise<Record<string, number>> =>
    metricValues(await sidecarMetrics(node, t.namespace, CLIENT, await sidecarHealthPort(node, t.namespace, CLIENT)), 'multus_proxy_sidecar_services_dropped');
  return {
    async attack() {
      await lowered.lower();
      await lowered.recreateClient(t.namespace, (a, o) => t.kubectl(a, o));
      for (let i = 0; i < FLOOD; i++) {
        const svc = {
          apiVersion: 'v1',
          kind: 'Service',
          metadata: { name: `flood-${i}`, namespace: t.namespace, labels: { [PROXY_NAME_LABEL]: PROXY_NAME }, annotations: { [SERVICE_NETWORK_ANNOTATION]: 'macvlan1' } },
          spec: { selector: { app: SERVICE }, ports: [{ port: 80 }] },
        };
        const r = await t.kubectl(['apply', '-f', '-'], { input: JSON.stringify(svc) });
        if (r.code !== 0) throw new Error(`the tenant could not create Service flood-${i}: ${r.stderr}`);
      }
      out.events = await until('a ServiceCapReached Event', 60_000, async () => {
        const e = await events(t, t.namespace, 'ServiceCapReached');
        return e.length > 0 ? e : undefined;
      }).catch(() => []);
      out.dropped = await until(`services_dropped for ${net}`, 30_000, async () => {
        const d = await dropped();
        return (d[`{network="${net}"}`] ?? 0) > 0 ? d : undefined;
      }).catch(() => dropped());
    },
    async undo() {
      await t.kubectl(['delete', 'service', '-n', t.namespace, ...Array.from({ length: FLOOD }, (_, i) => `flood-${i}`), '--ignore-not-found']);
      out.droppedAfter = await until(`services_dropped for ${net} back at 0`, 30_000, async () => {
        const d = await dropped();
        return d[`{network="${net}"}`] === 0 ? d : undefined;
      }).catch(() => dropped());
    },
  };
}

// --- the optional admission policies, installed as docs/install.md says -------------------------

export interface OptionalPolicies {
  /** The apiserver's answer to the tenant's privileged pod ('' when it was admitted). */
  privileged: string;
  /** The apiserver's answer to the tenant rewriting its own pod's network-status. */
  forgedStatus: string;
  /** Whether the tenant's recreated client (injected sidecar, Multus writing its status) got Ready. */
  clientReady: boolean;
  /** The recreated client's app container: list pods with its token. */
  listPods: number;
}

const POLICY_NAMES = ['multus-proxy-sidecar-pod-security', 'multus-proxy-network-status-writers'];
const PRIVILEGED_POD = 'privileged-app';

/**
 * The admin installs both optional policies (sidecar-pod-security and network-status-writers), the
 * latter with this node's Multus identity added, as install.md tells an admin whose Multus runs
 * under another identity. Then the tenant: a privileged container is refused; a rewrite of its own
 * pod's network-status is refused; its client, recreated, is admitted with the injected sidecar,
 * gets its status from Multus, becomes Ready, and its app container gets 403 on list pods.
 */
export function optionalPolicies(node: RealNode, t: Tenant, out: OptionalPolicies): Attack {
  const dir = join(node.dir, 'optional-policies');
  const multusUser = 'realnode-admin'; // the harness's Multus thin plugin writes with the admin kubeconfig
  const recreateClient = async (): Promise<void> => {
    await t.kubectl(['delete', 'pod', '-n', t.namespace, CLIENT, '--wait=true', '--timeout=120s'], { timeoutMs: 130_000 });
    const r = await t.kubectl(['apply', '-n', t.namespace, '-f', '-'], { input: blogFile('pod.yml') });
    if (r.code !== 0) throw new Error(`the tenant could not recreate its client: ${r.stderr}`);
  };
  return {
    async attack() {
      mkdirSync(dir, { recursive: true });
      const k = {
        apiVersion: 'kustomize.config.k8s.io/v1beta1',
        kind: 'Kustomization',
        components: ['sidecar-pod-security', 'network-status-writers'].map((c) => relative(dir, join(ROOT, 'deploy', 'components', c))),
        patches: [
          {
            target: { kind: 'ValidatingAdmissionPolicy', name: 'multus-proxy-network-status-writers' },
            patch: dump([{ op: 'replace', path: '/spec/variables/0/expression', value: JSON.stringify(['system:serviceaccount:kube-system:multus', multusUser]) }]),
          },
        ],
      };
      writeFileSync(join(dir, 'kustomization.yaml'), dump(k));
      await node.sh(`${buildOverlay(dir)} | kubectl apply -f -`);
      const privileged = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: PRIVILEGED_POD, namespace: t.namespace, annotations: { 'multus-proxy.k8s.cni.cncf.io/inject': 'false' } },
        spec: {
          terminationGracePeriodSeconds: 1,
          containers: [{ name: 'app', image: 'ghcr.io/redhat-nfvpe/multus-service-demo:fedora-tools', command: ['/sbin/init'], securityContext: { privileged: true } }],
        },
      };
      // The apiserver compiles a new policy a moment after it is created.
      out.privileged = await until('the sidecar-pod-security policy in force', 30_000, async () => {
        const r = await t.kubectl(['apply', '-f', '-'], { input: JSON.stringify(privileged) });
        if (r.code === 0) {
          await t.kubectl(['delete', 'pod', '-n', t.namespace, PRIVILEGED_POD, '--wait=false']);
          return undefined;
        }
        return r.stderr;
      }).catch(() => '');
      out.forgedStatus = await until('the network-status-writers policy in force', 30_000, async () => {
        const r = await t.kubectl(['annotate', 'pod', '-n', t.namespace, CLIENT, '--overwrite', 'k8s.v1.cni.cncf.io/network-status=[]']);
        return r.code === 0 ? undefined : r.stderr;
      }).catch(() => '');
      await recreateClient();
      out.clientReady = await node.wait(`pod/${CLIENT}`, 'condition=Ready', { namespace: t.namespace, timeoutMs: 180_000 }).then(
        () => true,
        () => false,
      );
      if (out.clientReady) out.listPods = await tokenGet(node, t.namespace, CLIENT, CLIENT, `/api/v1/namespaces/${t.namespace}/pods`);
    },
    async undo() {
      await t.kubectl(['delete', 'pod', '-n', t.namespace, PRIVILEGED_POD, '--ignore-not-found']);
      for (const name of POLICY_NAMES) {
        await node.kubectl(['delete', 'validatingadmissionpolicybinding', name, '--ignore-not-found']);
        await node.kubectl(['delete', 'validatingadmissionpolicy', name, '--ignore-not-found']);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
