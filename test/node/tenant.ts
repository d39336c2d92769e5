/**
 * The tenant suite (issue 19, docs/security.md "Attacks and what stops them"): a user with the
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
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { dump } from 'js-yaml';
import type { ExecResult, RealNode } from '../harness/node.js';
import { NODE } from '../harness/node-config.js';
import { CLIENT, createNamespace, net1Addresses, pods, SERVICE, sliceAddresses } from './cluster.js';
import { URL } from './blog.js';
import { INJECTION_ENABLED, INJECTION_LABEL, MANAGED_BY, MANAGED_BY_LABEL, SERVICE_NAME_LABEL } from '../../src/keys.js';
import { RBAC_MANAGED_BY_LABEL, SIDECAR_POD_ROLE } from '../../src/controller/sidecar-rbac.js';

const run = promisify(execFile);

export const TENANT_USER = 'tenant';
export const TENANT_NS = 'tenant-a';
/** Another namespace, named after the tenant's, owned by the admin (the RBAC sync goes in name order). */
export const OTHER_NS = 'tenant-z';

export interface Tenant {
  readonly user: string;
  readonly namespace: string;
  readonly kubeconfig: string;
  /** kubectl as the tenant; never throws (denials are what the attacks look for). */
  kubectl(args: string[], opts?: { input?: string; timeoutMs?: number }): Promise<ExecResult>;
}

/** Creates the tenant's namespace (not yet enabled for injection) and the user confined to it. */
export async function setupTenant(node: RealNode): Promise<Tenant> {
  await createNamespace(node, TENANT_NS, false);
  await node.apply(
    [
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: 'tenant-admin', namespace: TENANT_NS }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admin' }, subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: TENANT_USER }] },
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'nad-editor', namespace: TENANT_NS }, rules: [{ apiGroups: ['k8s.cni.cncf.io'], resources: ['network-attachment-definitions'], verbs: ['*'] }] },
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: 'tenant-nads', namespace: TENANT_NS }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'nad-editor' }, subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: TENANT_USER }] },
    ]
      .map((o) => dump(o))
      .join('---\n'),
  );
  const kubeconfig = node.userKubeconfig(TENANT_USER);
  return {
    user: TENANT_USER,
    namespace: TENANT_NS,
    kubeconfig,
    kubectl: (args, o = {}) => node.kubectlResult(args, { ...o, kubeconfig, allowFail: true }),
  };
}

export async function cleanupTenant(node: RealNode): Promise<void> {
  for (const ns of [TENANT_NS, OTHER_NS]) await node.kubectl(['delete', 'namespace', ns, '--ignore-not-found', '--wait=true', '--timeout=180s'], { timeoutMs: 190_000 });
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
    out.push(`link ${l.ifname} kind=${l.linkinfo?.info_kind ?? '-'} master=${l.master ?? '-'} mtu=${l.mtu ?? '-'} up=${l.flags?.includes('UP') ? 1 : 0} mac=${l.address ?? '-'}`);
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

// --- the blog's traffic beside the attacks ------------------------------------------------------

export interface Traffic {
  /** Stops the loop; per request "ok" or "fail:<curl code>". */
  stop(): Promise<string[]>;
}

let trafficRuns = 0;

/** The blog client curls its Service by name every 200 ms until stopped (one exec, in the background). */
export function startTraffic(node: RealNode): Traffic {
  const stopFile = `/tmp/tenant-traffic-${++trafficRuns}`;
  const script =
    `rm -f ${stopFile}; while [ ! -e ${stopFile} ]; do ` +
    `if curl -s -m 2 -o /tmp/tenant-body ${URL} && grep -q '${SERVICE}' /tmp/tenant-body; then echo ok; else echo "fail:$?"; fi; sleep 0.2; done`;
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

export async function until<T>(what: string, timeoutMs: number, f: () => Promise<T | undefined>): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await f();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ''}`);
    await delay(250);
  }
}

const isReady = (p: { status?: { conditions?: { type: string; status: string }[] } }): boolean => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;

/** The blog Service's slice lists exactly its live Ready pods' net1 addresses, `count` of them. */
async function blogSliceFollows(node: RealNode, count: number, timeoutMs: number): Promise<number> {
  const t0 = Date.now();
  await until(`the slice of default/${SERVICE} to list its ${count} Ready pods`, timeoutMs, async () => {
    const live = (await pods(node, 'default', `app=${SERVICE}`)).filter((p) => !p.metadata?.deletionTimestamp);
    const want = live.filter(isReady).map((p) => net1Addresses(p)[0] ?? '').sort();
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
}

/** Runs one attack inside the checks every attack shares (module comment). Throws on the attack's own assertions. */
export async function guard(node: RealNode, log: (m: string) => void, a: Attack): Promise<GuardReport> {
  const hostBefore = await hostNetwork();
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
  await a.undo();
  const failures = curls.filter((c) => c !== 'ok');
  log(`  blog traffic: ${curls.length - failures.length}/${curls.length} ok; blog slice followed a new replica in ${followUpMs} ms, a removed one in ${followDownMs} ms; host: ${hostAfter.length} lines`);
  return { requests: curls.length, failures, hostBefore, hostAfter, followUpMs, followDownMs };
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
        { what: `label its namespace ${INJECTION_LABEL}=${INJECTION_ENABLED}`, args: ['label', 'namespace', t.namespace, `${INJECTION_LABEL}=${INJECTION_ENABLED}`, '--overwrite'], verb: 'patch', resource: 'namespaces' },
        { what: 'label its namespace pod-security.kubernetes.io/enforce=privileged', args: ['label', 'namespace', t.namespace, 'pod-security.kubernetes.io/enforce=privileged', '--overwrite'], verb: 'patch', resource: 'namespaces' },
        { what: 'label namespace default (another one)', args: ['label', 'namespace', 'default', `${INJECTION_LABEL}=${INJECTION_ENABLED}`, '--overwrite'], verb: 'patch', resource: 'namespaces' },
        { what: 'create an EndpointSlice managed by the controller', args: ['create', '-f', '-'], input: JSON.stringify(slice), verb: 'create', resource: 'endpointslices', group: 'discovery.k8s.io' },
        { what: "read the blog's slices in namespace default", args: ['get', 'endpointslices', '-n', 'default'], verb: 'list', resource: 'endpointslices', group: 'discovery.k8s.io' },
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
      out.recoveredMs = await until(`the controller's RoleBinding in ${t.namespace} after the stray one went`, 120_000, async () => ((await ownPodBinding(node, t.namespace)) ? Date.now() - t0 : undefined)).catch(() => -1);
    },
  };
}
