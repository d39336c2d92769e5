/**
 * The sidecars' RBAC, kept by the controller: every namespace labelled
 * `multus-proxy-injection: enabled` gets read access for its service accounts; when the label
 * goes, the access goes.
 *
 * Least privilege, split in two because the two needs have different scopes:
 * - ClusterRole `multus-proxy-sidecar` (get/list/watch Services and EndpointSlices), bound
 *   cluster-wide by the ClusterRoleBinding `multus-proxy-sidecar`: a client pod may reach Services
 *   of any namespace on its networks (a NAD `other/net` serves Services in `other`).
 * - ClusterRole `multus-proxy-sidecar-pods` (create Events; get/list/watch MultiNetworkPolicies),
 *   bound by a RoleBinding inside each enabled namespace only: the sidecar says why it cannot sync
 *   on its own pod, and reads the policies of its own namespace (the address groups are
 *   EndpointSlices, which the first role covers). It holds no right
 *   to read pods (any more): the sidecar reads its own pod's annotations from the downwardAPI
 *   volume the webhook mounts, and pod specs can carry secrets in environment variables. The
 *   name stays, so upgrades keep the bindings.
 * Subjects are the ServiceAccounts that run injected pods (a pod with the `multus-proxy` container),
 * per enabled namespace, as the controller's pod cache shows them (`injectedAccounts`): not the
 * group `system:serviceaccounts:<ns>`, which handed the sidecar's read access to Services and
 * EndpointSlices of the whole cluster to every workload of an enabled namespace.
 *
 * The two ClusterRoles ship with the manifests (deploy/base/sidecar-rbac.yaml); the controller
 * only checks them and reports a missing or different one, it never writes roles: that would need
 * `escalate`-like rights, while binding them needs only `bind` on exactly these two names.
 *
 * `planRbac` is pure (desired vs actual -> writes and problems); `syncSidecarRbac` reads and
 * writes. Writes happen only when something differs. Each write stands alone: one that fails
 * (a tenant's own RoleBinding with our name, say) is reported for its namespace and retried, and
 * never keeps the other namespaces from being bound.
 */
import { getIfExists, KubeApiError, type KubeClient } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1ClusterRole, V1ClusterRoleBinding, V1Namespace, V1RoleBinding } from '../../src/kube/types.js';
import { INJECTION_ENABLED, INJECTION_LABEL, MANAGED_BY, MULTI_NETWORK_POLICY_GROUP, MULTI_NETWORK_POLICY_RESOURCE, SIDECAR_CONTAINER_NAME } from '../../src/keys.js';
import type { V1Pod } from '../../src/kube/types.js';

export const SIDECAR_ROLE = 'multus-proxy-sidecar';
export const SIDECAR_POD_ROLE = 'multus-proxy-sidecar-pods';
export const RBAC_MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
const RBAC_GROUP = 'rbac.authorization.k8s.io';

const LABELS = { [RBAC_MANAGED_BY_LABEL]: MANAGED_BY };
const READ = ['get', 'list', 'watch'];

type Rule = NonNullable<V1ClusterRole['rules']>[number];
type Subject = NonNullable<V1ClusterRoleBinding['subjects']>[number];

export interface RbacObjects {
  readonly clusterRoles: V1ClusterRole[];
  readonly clusterRoleBinding: V1ClusterRoleBinding;
  /** One per enabled namespace. */
  readonly roleBindings: V1RoleBinding[];
}

export function isInjectionEnabled(ns: V1Namespace): boolean {
  const terminating = ns.status?.phase === 'Terminating' || (ns.metadata?.deletionTimestamp !== undefined && ns.metadata.deletionTimestamp !== null);
  return !terminating && ns.metadata?.labels?.[INJECTION_LABEL] === INJECTION_ENABLED;
}

function account(ns: string, name: string): Subject {
  return { kind: 'ServiceAccount', name, namespace: ns };
}

/** ServiceAccounts by namespace (sorted, unique) of the pods that carry the injected sidecar. */
export function injectedAccounts(pods: Iterable<V1Pod>): Map<string, string[]> {
  const by = new Map<string, Set<string>>();
  for (const p of pods) {
    const ns = p.metadata?.namespace;
    const injected = [...(p.spec?.initContainers ?? []), ...(p.spec?.containers ?? [])].some((c) => c.name === SIDECAR_CONTAINER_NAME);
    if (ns === undefined || !injected) continue;
    // An unset serviceAccountName is `default` (the ServiceAccount admission plugin sets it).
    const sa = p.spec?.serviceAccountName || 'default';
    let set = by.get(ns);
    if (set === undefined) by.set(ns, (set = new Set()));
    set.add(sa);
  }
  return new Map([...by].map(([ns, set]) => [ns, [...set].sort()]));
}

/**
 * `accounts`: the ServiceAccounts of injected pods per namespace (injectedAccounts). An enabled
 * namespace without one still gets its RoleBinding (with no subjects), so the name is held.
 */
export function desiredSidecarRbac(namespaces: readonly V1Namespace[], accounts: ReadonlyMap<string, readonly string[]> = new Map()): RbacObjects {
  const enabled = namespaces
    .filter(isInjectionEnabled)
    .map((n) => n.metadata?.name ?? '')
    .filter((n) => n !== '')
    .sort();
  const role = (name: string, rules: Rule[]): V1ClusterRole => ({
    apiVersion: `${RBAC_GROUP}/v1`,
    kind: 'ClusterRole',
    metadata: { name, labels: { ...LABELS } },
    rules,
  });
  return {
    clusterRoles: [
      role(SIDECAR_ROLE, [
        { apiGroups: [''], resources: ['services'], verbs: READ },
        { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: READ },
      ]),
      role(SIDECAR_POD_ROLE, [
        // Bound per namespace: a sidecar says why it cannot sync with an Event on its own pod.
        // No pods: its own pod's annotations come from the downwardAPI volume (cmd/webhook/mutate.ts).
        { apiGroups: [''], resources: ['events'], verbs: ['create'] },
        // The MultiNetworkPolicies of its own namespace only: a policy selects pods of its namespace.
        { apiGroups: [MULTI_NETWORK_POLICY_GROUP], resources: [MULTI_NETWORK_POLICY_RESOURCE], verbs: READ },
      ]),
    ],
    clusterRoleBinding: {
      apiVersion: `${RBAC_GROUP}/v1`,
      kind: 'ClusterRoleBinding',
      metadata: { name: SIDECAR_ROLE, labels: { ...LABELS } },
      roleRef: { apiGroup: RBAC_GROUP, kind: 'ClusterRole', name: SIDECAR_ROLE },
      subjects: enabled.flatMap((ns) => (accounts.get(ns) ?? []).map((sa) => account(ns, sa))),
    },
    roleBindings: enabled.map((ns) => ({
      apiVersion: `${RBAC_GROUP}/v1`,
      kind: 'RoleBinding',
      metadata: { name: SIDECAR_POD_ROLE, namespace: ns, labels: { ...LABELS } },
      roleRef: { apiGroup: RBAC_GROUP, kind: 'ClusterRole', name: SIDECAR_POD_ROLE },
      subjects: (accounts.get(ns) ?? []).map((sa) => account(ns, sa)),
    })),
  };
}

export interface RbacActual {
  readonly clusterRoles: ReadonlyMap<string, V1ClusterRole>;
  readonly clusterRoleBinding?: V1ClusterRoleBinding;
  /** Our RoleBindings (by label) in every namespace. */
  readonly roleBindings: readonly V1RoleBinding[];
}

export interface RbacWrite {
  readonly verb: 'create' | 'replace' | 'delete';
  /** Collection path for create, object path otherwise. */
  readonly path: string;
  readonly body?: object;
  readonly what: string;
  /** The namespace a RoleBinding write is for (unset: cluster-scoped). */
  readonly namespace?: string;
}

const canonRules = (rules: readonly Rule[] | undefined): string =>
  JSON.stringify(
    (rules ?? []).map((r) => [[...(r.apiGroups ?? [])].sort(), [...(r.resources ?? [])].sort(), [...r.verbs].sort(), [...(r.resourceNames ?? [])].sort(), [...(r.nonResourceURLs ?? [])].sort()]),
  );
const canonSubjects = (s: readonly Subject[] | undefined): string => JSON.stringify((s ?? []).map((x) => `${x.kind}|${x.apiGroup ?? ''}|${x.namespace ?? ''}|${x.name}`).sort());
const labelsMatch = (have: Record<string, string> | undefined): boolean => Object.entries(LABELS).every(([k, v]) => have?.[k] === v);

type Binding = V1ClusterRoleBinding | V1RoleBinding;

/** Writes that turn one binding into the desired one (roleRef is immutable: delete + create). */
function bindingWrites(want: Binding, have: Binding | undefined, collection: string, path: string, what: string): RbacWrite[] {
  const ns = want.metadata?.namespace;
  const scope = ns !== undefined ? { namespace: ns } : {};
  if (have === undefined) return [{ verb: 'create', path: collection, body: want, what, ...scope }];
  const r = have.roleRef;
  if (r.name !== want.roleRef.name || r.kind !== want.roleRef.kind || r.apiGroup !== want.roleRef.apiGroup) {
    return [
      { verb: 'delete', path, what, ...scope },
      { verb: 'create', path: collection, body: want, what, ...scope },
    ];
  }
  if (canonSubjects(have.subjects) === canonSubjects(want.subjects) && labelsMatch(have.metadata?.labels)) return [];
  const body = { ...have, subjects: want.subjects, metadata: { ...have.metadata, labels: { ...(have.metadata?.labels ?? {}), ...LABELS } } };
  return [{ verb: 'replace', path, body, what, ...scope }];
}

export interface RbacPlan {
  readonly writes: RbacWrite[];
  /** ClusterRoles missing or not as the manifests define them: reported, never written. */
  readonly problems: string[];
}

export function planRbac(desired: RbacObjects, actual: RbacActual): RbacPlan {
  const writes: RbacWrite[] = [];
  const problems: string[] = [];
  for (const want of desired.clusterRoles) {
    const name = want.metadata?.name ?? '';
    const have = actual.clusterRoles.get(name);
    if (have === undefined) {
      problems.push(`ClusterRole ${name} is missing, so the sidecars' bindings grant nothing; apply deploy/base/sidecar-rbac.yaml`);
    } else if (canonRules(have.rules) !== canonRules(want.rules)) {
      problems.push(`ClusterRole ${name} has rules ${canonRules(have.rules)}, expected ${canonRules(want.rules)}; re-apply deploy/base/sidecar-rbac.yaml`);
    }
  }
  const crb = desired.clusterRoleBinding;
  writes.push(
    ...bindingWrites(
      crb,
      actual.clusterRoleBinding,
      apiPath(RBAC_GROUP, 'v1', 'clusterrolebindings'),
      apiPath(RBAC_GROUP, 'v1', 'clusterrolebindings', undefined, SIDECAR_ROLE),
      `ClusterRoleBinding ${SIDECAR_ROLE}`,
    ),
  );
  const haveRb = new Map(actual.roleBindings.filter((b) => b.metadata?.name === SIDECAR_POD_ROLE).map((b) => [b.metadata?.namespace ?? '', b]));
  const wantNs = new Set<string>();
  for (const want of desired.roleBindings) {
    const ns = want.metadata?.namespace ?? '';
    wantNs.add(ns);
    const path = apiPath(RBAC_GROUP, 'v1', 'rolebindings', ns, SIDECAR_POD_ROLE);
    writes.push(...bindingWrites(want, haveRb.get(ns), apiPath(RBAC_GROUP, 'v1', 'rolebindings', ns), path, `RoleBinding ${ns}/${SIDECAR_POD_ROLE}`));
  }
  for (const ns of [...haveRb.keys()].sort()) {
    if (!wantNs.has(ns)) {
      writes.push({ verb: 'delete', path: apiPath(RBAC_GROUP, 'v1', 'rolebindings', ns, SIDECAR_POD_ROLE), what: `RoleBinding ${ns}/${SIDECAR_POD_ROLE}`, namespace: ns });
    }
  }
  return { writes, problems };
}

/** A write that failed, with what to tell the namespace's owner (or the admin, for cluster-scoped ones). */
export interface RbacFailure {
  readonly write: RbacWrite;
  readonly message: string;
  /** The object in the way, when it exists (a RoleBinding of ours by name, not by label). */
  readonly blocker?: { readonly uid: string };
}

export interface RbacResult extends RbacPlan {
  /** Writes made. */
  readonly made: RbacWrite[];
  /** Writes that failed; the others were made regardless (one namespace never blocks another). */
  readonly failures: RbacFailure[];
}

/** Why a write failed, for an Event: names the object, the cause and the fix. Pure. */
export function rbacFailureMessage(w: RbacWrite, e: unknown, blocker: V1RoleBinding | undefined): string {
  if (w.verb === 'create' && blocker !== undefined && !labelsMatch(blocker.metadata?.labels)) {
    return `${w.what} exists and is not managed by multus-proxy (no label ${RBAC_MANAGED_BY_LABEL}=${MANAGED_BY}), so the sidecars here are not bound; the controller leaves it alone: delete or rename it`;
  }
  const why = e instanceof KubeApiError ? `${e.status}${e.reason ? ` ${e.reason}` : ''}: ${e.apiMessage}` : e instanceof Error ? e.message : String(e);
  return `${w.verb} ${w.what} failed (${why}); retrying`;
}

/**
 * Makes the writes one by one; a failure skips only the rest of the same object's writes (a
 * delete + create pair), never another namespace's: a stray RoleBinding named like ours in one
 * namespace must not leave every namespace after it unbound.
 */
export async function applyRbacWrites(client: KubeClient, writes: readonly RbacWrite[]): Promise<Pick<RbacResult, 'made' | 'failures'>> {
  const made: RbacWrite[] = [];
  const failures: RbacFailure[] = [];
  const failed = new Set<string>();
  for (const w of writes) {
    if (failed.has(w.what)) continue;
    try {
      if (w.verb === 'create') await client.create(w.path, w.body);
      else if (w.verb === 'replace') await client.replace(w.path, w.body);
      else await client.delete(w.path);
      made.push(w);
    } catch (e) {
      failed.add(w.what);
      const body = w.body as V1RoleBinding | undefined;
      const blocker =
        w.verb === 'create' && w.namespace !== undefined && e instanceof KubeApiError && e.status === 409
          ? await getIfExists<V1RoleBinding>(client, apiPath(RBAC_GROUP, 'v1', 'rolebindings', w.namespace, body?.metadata?.name ?? SIDECAR_POD_ROLE)).catch(() => undefined)
          : undefined;
      const uid = blocker?.metadata?.uid;
      failures.push({ write: w, message: rbacFailureMessage(w, e, blocker), ...(uid !== undefined ? { blocker: { uid } } : {}) });
    }
  }
  return { made, failures };
}

/** Reads the current RBAC objects, writes what differs; returns the writes planned, the problems seen and the writes that failed. */
export async function syncSidecarRbac(client: KubeClient, namespaces: readonly V1Namespace[], accounts: ReadonlyMap<string, readonly string[]>): Promise<RbacResult> {
  const desired = desiredSidecarRbac(namespaces, accounts);
  const clusterRoles = new Map<string, V1ClusterRole>();
  for (const name of [SIDECAR_ROLE, SIDECAR_POD_ROLE]) {
    const cr = await getIfExists<V1ClusterRole>(client, apiPath(RBAC_GROUP, 'v1', 'clusterroles', undefined, name));
    if (cr !== undefined) clusterRoles.set(name, cr);
  }
  const clusterRoleBinding = await getIfExists<V1ClusterRoleBinding>(client, apiPath(RBAC_GROUP, 'v1', 'clusterrolebindings', undefined, SIDECAR_ROLE));
  const roleBindings = (await client.list<V1RoleBinding>(apiPath(RBAC_GROUP, 'v1', 'rolebindings'), { labelSelector: `${RBAC_MANAGED_BY_LABEL}=${MANAGED_BY}` })).items;
  const plan = planRbac(desired, { clusterRoles, ...(clusterRoleBinding ? { clusterRoleBinding } : {}), roleBindings });
  return { ...plan, ...(await applyRbacWrites(client, plan.writes)) };
}
