import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { desiredSidecarRbac, injectedAccounts, planRbac, rbacFailureMessage, SIDECAR_POD_ROLE, SIDECAR_ROLE, type RbacActual } from '../../../cmd/controller/sidecar-rbac.js';
import { KubeApiError } from '../../../src/kube/client.js';
import type { V1ClusterRoleBinding, V1Namespace, V1Pod, V1RoleBinding } from '../../../src/kube/types.js';

const ns = (name: string, labels: Record<string, string> = {}, terminating = false): V1Namespace => ({
  metadata: { name, labels },
  status: { phase: terminating ? 'Terminating' : 'Active' },
});

/** The ServiceAccounts of injected pods: two in a, one in b, one in c (not enabled). */
const ACCOUNTS = new Map([
  ['a', ['default', 'web']],
  ['b', ['default']],
  ['c', ['x']],
]);
const who = (s: { namespace?: string; name: string; kind: string }[] | undefined): string[] => (s ?? []).map((x) => `${x.kind}:${x.namespace ?? ''}/${x.name}`);

/** The actual state after applying every desired object as is. */
function applied(namespaces: V1Namespace[]): RbacActual {
  const d = desiredSidecarRbac(namespaces, ACCOUNTS);
  return {
    clusterRoles: new Map(d.clusterRoles.map((r) => [r.metadata?.name ?? '', r])),
    clusterRoleBinding: d.clusterRoleBinding,
    roleBindings: d.roleBindings,
  };
}

void describe('sidecar RBAC', () => {
  const on = { 'multus-proxy-injection': 'enabled' };

  void test("enabled namespaces get their injected pods' ServiceAccounts (never the namespace's group) and an events RoleBinding; others and terminating ones do not", () => {
    const d = desiredSidecarRbac([ns('b', on), ns('a', on), ns('c'), ns('d', { 'multus-proxy-injection': 'disabled' }), ns('e', on, true)], ACCOUNTS);
    assert.deepEqual(who(d.clusterRoleBinding.subjects), ['ServiceAccount:a/default', 'ServiceAccount:a/web', 'ServiceAccount:b/default']);
    assert.deepEqual(
      d.roleBindings.map((b) => [b.metadata?.namespace, b.roleRef.name, who(b.subjects)]),
      [
        ['a', SIDECAR_POD_ROLE, ['ServiceAccount:a/default', 'ServiceAccount:a/web']],
        ['b', SIDECAR_POD_ROLE, ['ServiceAccount:b/default']],
      ],
    );
    // Pods are not readable at all: the sidecar reads its own pod from the downwardAPI volume.
    const cluster = d.clusterRoles.find((r) => r.metadata?.name === SIDECAR_ROLE);
    assert.ok(d.clusterRoles.every((c) => c.rules?.every((r) => !(r.resources ?? []).includes('pods'))));
    // Read-only, but for Events (a sidecar's own pod's), which only the namespaced role grants.
    assert.ok(cluster?.rules?.every((r) => r.verbs.every((v) => ['get', 'list', 'watch'].includes(v))));
    const writes = d.clusterRoles.flatMap((r) => (r.rules ?? []).filter((x) => x.verbs.some((v) => !['get', 'list', 'watch'].includes(v))).map((x) => [r.metadata?.name, x.resources, x.verbs]));
    assert.deepEqual(writes, [[SIDECAR_POD_ROLE, ['events'], ['create']]]);
  });

  void test('from nothing: creates the binding and the RoleBindings, reports the missing roles without writing them', () => {
    const { writes, problems } = planRbac(desiredSidecarRbac([ns('a', on)], ACCOUNTS), { clusterRoles: new Map(), roleBindings: [] });
    assert.deepEqual(
      writes.map((w) => `${w.verb} ${w.what}`),
      [`create ClusterRoleBinding ${SIDECAR_ROLE}`, `create RoleBinding a/${SIDECAR_POD_ROLE}`],
    );
    assert.equal(problems.length, 2);
    assert.match(problems[0] ?? '', new RegExp(`ClusterRole ${SIDECAR_ROLE} is missing.*deploy/base/sidecar-rbac\\.yaml`));
  });

  void test('nothing differs: no write, whatever the order of subjects', () => {
    const actual = applied([ns('a', on), ns('b', on)]);
    const crb = actual.clusterRoleBinding as V1ClusterRoleBinding;
    const reversed = { ...actual, clusterRoleBinding: { ...crb, subjects: [...(crb.subjects ?? [])].reverse() } };
    assert.deepEqual(planRbac(desiredSidecarRbac([ns('b', on), ns('a', on)], ACCOUNTS), reversed), { writes: [], problems: [] });
  });

  void test('label added: subject added and RoleBinding created; label removed: subject gone and RoleBinding deleted', () => {
    const before = applied([ns('a', on)]);
    const added = planRbac(desiredSidecarRbac([ns('a', on), ns('b', on)], ACCOUNTS), before).writes;
    assert.deepEqual(
      added.map((w) => `${w.verb} ${w.what}`),
      [`replace ClusterRoleBinding ${SIDECAR_ROLE}`, `create RoleBinding b/${SIDECAR_POD_ROLE}`],
    );
    const body = added[0]?.body as V1ClusterRoleBinding;
    assert.deepEqual(who(body.subjects), ['ServiceAccount:a/default', 'ServiceAccount:a/web', 'ServiceAccount:b/default']);

    const removed = planRbac(desiredSidecarRbac([ns('a')], ACCOUNTS), before).writes;
    assert.deepEqual(
      removed.map((w) => `${w.verb} ${w.what}`),
      [`replace ClusterRoleBinding ${SIDECAR_ROLE}`, `delete RoleBinding a/${SIDECAR_POD_ROLE}`],
    );
    assert.deepEqual((removed[0]?.body as V1ClusterRoleBinding).subjects, []);
  });

  void test('injectedAccounts: pods with the multus-proxy container (init or regular), by namespace, sorted and unique; an unset account is default', () => {
    const pod = (ns: string, sa: string | undefined, where: 'init' | 'main' | 'none'): V1Pod => ({
      metadata: { namespace: ns, name: 'p' },
      spec: {
        ...(sa !== undefined ? { serviceAccountName: sa } : {}),
        initContainers: where === 'init' ? [{ name: 'multus-proxy' }] : [],
        containers: [{ name: 'app' }, ...(where === 'main' ? [{ name: 'multus-proxy' }] : [])],
      },
    });
    const got = injectedAccounts([pod('a', 'web', 'init'), pod('a', undefined, 'main'), pod('a', 'web', 'main'), pod('a', 'plain', 'none'), pod('b', 'x', 'none')]);
    assert.deepEqual([...got], [['a', ['default', 'web']]]);
  });

  void test('an enabled namespace without injected pods holds its RoleBinding with no subjects, and adds nothing to the ClusterRoleBinding', () => {
    const d = desiredSidecarRbac([ns('a', on)], new Map());
    assert.deepEqual(d.clusterRoleBinding.subjects, []);
    assert.deepEqual(
      d.roleBindings.map((b) => [b.metadata?.namespace, b.subjects]),
      [['a', []]],
    );
  });

  void test('a binding pointing at another role is recreated (roleRef is immutable)', () => {
    const actual = applied([ns('a', on)]);
    const rb = actual.roleBindings[0] as V1RoleBinding;
    const wrong = { ...actual, roleBindings: [{ ...rb, roleRef: { ...rb.roleRef, name: 'cluster-admin' } }] };
    const { writes } = planRbac(desiredSidecarRbac([ns('a', on)], ACCOUNTS), wrong);
    assert.deepEqual(
      writes.map((w) => w.verb),
      ['delete', 'create'],
    );
  });

  void test('a widened role is reported, never rewritten by the controller', () => {
    const actual = applied([]);
    const role = actual.clusterRoles.get(SIDECAR_ROLE);
    assert.ok(role);
    const widened = new Map(actual.clusterRoles);
    widened.set(SIDECAR_ROLE, { ...role, rules: [...(role.rules ?? []), { apiGroups: [''], resources: ['secrets'], verbs: ['get'] }] });
    const { writes, problems } = planRbac(desiredSidecarRbac([], ACCOUNTS), { ...actual, clusterRoles: widened });
    assert.deepEqual(writes, []);
    assert.equal(problems.length, 1);
    assert.match(problems[0] ?? '', /secrets/);
  });

  void test('RoleBinding writes name their namespace, so a failure is reported there; a stray binding named like ours gets a message with the fix', () => {
    const { writes } = planRbac(desiredSidecarRbac([ns('a', on), ns('b', on)], ACCOUNTS), { clusterRoles: new Map(), roleBindings: [] });
    assert.deepEqual(
      writes.map((w) => [w.verb, w.namespace ?? '-']),
      [
        ['create', '-'],
        ['create', 'a'],
        ['create', 'b'],
      ],
    );
    const create = writes[1]!;
    const conflict = new KubeApiError(409, `rolebindings.rbac.authorization.k8s.io "${SIDECAR_POD_ROLE}" already exists`, 'AlreadyExists');
    const stray: V1RoleBinding = { metadata: { name: SIDECAR_POD_ROLE, namespace: 'a' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' } };
    assert.match(
      rbacFailureMessage(create, conflict, stray),
      /^RoleBinding a\/multus-proxy-sidecar-pods exists and is not managed by multus-proxy \(no label app\.kubernetes\.io\/managed-by=multus-proxy-controller\).*delete or rename it$/,
    );
    assert.equal(rbacFailureMessage(create, new KubeApiError(403, 'forbidden', 'Forbidden'), undefined), 'create RoleBinding a/multus-proxy-sidecar-pods failed (403 Forbidden: forbidden); retrying');
  });
});
