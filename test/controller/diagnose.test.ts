/**
 * `controller diagnose` as users run it: the real program, a child process with a kubeconfig,
 * against a real kube-apiserver where objects are broken each way a pod or a Service can be. The
 * controller runs for the namespace, so the slices are real; pod status (readiness, the sidecar's
 * container status) and network-status are written directly, standing in for the kubelet and
 * Multus. Each answer must name the cause (its finding code and the object), in text and JSON,
 * with exit status 1 for a cause, 0 for a working setup and 2 for a missing object.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { dump, load, loadAll } from 'js-yaml';
import { apiPath } from '../../src/kube/paths.js';
import { objectEvent } from '../../src/kube/events.js';
import type { V1EndpointSlice, V1Pod } from '../../src/kube/types.js';
import type { RunningController } from '../../cmd/controller/run.js';
import type { PodReport, Report, ServiceReport } from '../../cmd/controller/diagnose/report.js';
import {
  INJECT_ANNOTATION,
  INJECTION_ENABLED,
  INJECTION_LABEL,
  MANAGED_BY_LABEL,
  MULTI_NETWORK_POLICY_GROUP,
  MULTI_NETWORK_POLICY_RESOURCE,
  NETWORKS_ANNOTATION,
  NETWORK_STATUS_ANNOTATION,
  POLICY_FOR_ANNOTATION,
  SERVICE_NAMESPACES_ANNOTATION,
  SIDECAR_CONTAINER_NAME,
} from '../../src/keys.js';
import { isNotFound, KubeApiError } from '../../src/kube/client.js';
import type { MultiNetworkPolicy } from '../../src/policy/api.js';
import { ADDRESS_GROUP_MANAGED_BY, ADDRESS_GROUP_POLICY_LABEL } from '../../src/policy/address-group.js';
import { EVENT_COMPONENT, REASON_SYNC_FAILED } from '../../src/sidecar-contract.js';
import { poll, useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { networkStatus } from '../unit/controller/fixtures.js';
import { createPod, createService, ourSlices, podPath, startNamespacedController } from './helpers.js';

const ROOT = resolve(import.meta.dirname, '..', '..');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * A policy the controller writes no address group for: its name is too long for the group's
 * policy label (the controller refuses it with AddressGroupRefused), so its group stays unwritten.
 */
const BATCH = `db-batch-${'a'.repeat(60)}`;
const ADDRESS_GROUP_MANAGED_BY_SELECTOR = `${MANAGED_BY_LABEL}=${ADDRESS_GROUP_MANAGED_BY}`;

void describe('controller diagnose against a real apiserver', () => {
  let cp: ControlPlane;
  let ns: string;
  let plain: string;
  let psa: string;
  let other: string;
  let ctl: RunningController;
  const nadPath = (n: string): string => apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', n);
  const status = (ips: string[], net = 'macvlan1'): string => networkStatus([{ name: `${ns}/${net}`, ips }]);

  /** The real command, as a user runs it (no KUBECONFIG in the environment: the flag says which). */
  const diagnose = (...args: string[]): Promise<Run> =>
    new Promise((done) => {
      const env = { ...process.env };
      delete env['KUBECONFIG'];
      execFile(process.execPath, ['--import', 'tsx', 'cmd/controller/main.ts', 'diagnose', ...args, '--kubeconfig', cp.kubeconfigPath], { cwd: ROOT, env, timeout: 60_000 }, (e, stdout, stderr) => {
        const code = e === null ? 0 : typeof (e as { code?: unknown }).code === 'number' ? (e as { code: number }).code : -1;
        done({ code, stdout, stderr });
      });
    });
  const json = async <R extends Report>(...args: string[]): Promise<{ run: Run; report: R }> => {
    const run = await diagnose(...args, '-o', 'json');
    assert.ok(run.stdout.startsWith('{'), `no JSON (exit ${run.code}): ${run.stdout}${run.stderr}`);
    return { run, report: JSON.parse(run.stdout) as R };
  };
  const codes = (r: Report, severity = 'error'): string[] => r.findings.filter((f) => f.severity === severity).map((f) => f.code);

  /** A client pod; `sidecar` gives it the injected native sidecar and its container status. */
  async function clientPod(
    namespace: string,
    name: string,
    o: {
      annotations?: Record<string, string>;
      sidecar?: 'ready' | 'crashing';
      hostNetwork?: boolean;
      labels?: Record<string, string>;
      ip?: string;
      ports?: { name: string; containerPort: number }[];
    } = {},
  ): Promise<V1Pod> {
    const pod: V1Pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name,
        namespace,
        labels: o.labels ?? { app: 'client' },
        annotations: { [NETWORKS_ANNOTATION]: 'macvlan1', [NETWORK_STATUS_ANNOTATION]: networkStatus([{ name: `${namespace}/macvlan1`, ips: [o.ip ?? '10.1.1.50'] }]), ...(o.annotations ?? {}) },
      },
      spec: {
        containers: [{ name: 'client', image: 'curl', ...(o.ports !== undefined ? { ports: o.ports } : {}) }],
        ...(o.sidecar !== undefined ? { initContainers: [{ name: SIDECAR_CONTAINER_NAME, image: 'multus-proxy:0.1.0', restartPolicy: 'Always' }] } : {}),
        ...(o.hostNetwork === true ? { hostNetwork: true } : {}),
      },
    };
    await cp.client.create(podPath(namespace), pod);
    if (o.sidecar === undefined) return pod;
    const ready = o.sidecar === 'ready';
    const now = new Date().toISOString();
    return cp.client.patch<V1Pod>(
      `${podPath(namespace, name)}/status`,
      {
        status: {
          phase: ready ? 'Running' : 'Pending',
          conditions: [{ type: 'Ready', status: ready ? 'True' : 'False', lastTransitionTime: now }],
          initContainerStatuses: [
            {
              name: SIDECAR_CONTAINER_NAME,
              image: 'multus-proxy:0.1.0',
              imageID: '',
              ready,
              started: ready,
              restartCount: ready ? 0 : 5,
              state: ready ? { running: { startedAt: now } } : { waiting: { reason: 'CrashLoopBackOff', message: 'back-off restarting' } },
              ...(ready ? {} : { lastState: { terminated: { exitCode: 1, reason: 'Error', startedAt: now, finishedAt: now } } }),
            },
          ],
        },
      },
      'merge',
    );
  }

  before(async () => {
    cp = await useControlPlane();
    ns = uniqueName('diag');
    plain = uniqueName('diag-plain');
    psa = uniqueName('diag-psa');
    other = uniqueName('diag-infra');
    await cp.createNamespace(ns, { [INJECTION_LABEL]: INJECTION_ENABLED });
    await cp.createNamespace(plain);
    await cp.createNamespace(psa, { [INJECTION_LABEL]: INJECTION_ENABLED, 'pod-security.kubernetes.io/enforce': 'baseline' });
    await cp.createNamespace(other);
    const nad = (name: string, namespace: string, annotations: Record<string, string> = {}): object => ({
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name, namespace, annotations },
      spec: { config: JSON.stringify({ cniVersion: '0.3.1', type: 'macvlan', master: 'eth1', ipam: { type: 'static' } }) },
    });
    await cp.client.create(nadPath(ns), nad('macvlan1', ns));
    await cp.client.create(nadPath(other), nad('shared', other, { [SERVICE_NAMESPACES_ANNOTATION]: 'somebody-else' }));

    // The Service and its pods, one per cause.
    await createService(cp.client, ns, 'web', { network: 'macvlan1', selector: { app: 'web' } });
    await createPod(cp.client, ns, 'web-ok', { labels: { app: 'web' }, status: status(['10.1.1.10']) });
    await createPod(cp.client, ns, 'web-nostatus', { labels: { app: 'web' } });
    await createPod(cp.client, ns, 'web-unready', { labels: { app: 'web' }, status: status(['10.1.1.11']), ready: false });
    await createPod(cp.client, ns, 'web-othernet', { labels: { app: 'web' }, status: status(['10.2.2.12'], 'macvlan2') });
    await createPod(cp.client, ns, 'web-loopback', { labels: { app: 'web' }, status: status(['127.0.0.1']) });
    await createService(cp.client, ns, 'typo', { network: 'macvlan1,', selector: { app: 'web' } });
    await createService(cp.client, ns, 'nonad', { network: 'macvlan9', selector: { app: 'web' } });
    await createService(cp.client, ns, 'foreign', { network: `${other}/shared`, selector: { app: 'web' } });
    await createService(cp.client, ns, 'unready', { network: 'macvlan1', selector: { app: 'only-unready' } });
    await createPod(cp.client, ns, 'lonely-unready', { labels: { app: 'only-unready' }, status: status(['10.1.1.13']), ready: false });

    // Client pods.
    await clientPod(ns, 'client-ok', { sidecar: 'ready' });
    await clientPod(ns, 'client-crashing', { sidecar: 'crashing' });
    await clientPod(ns, 'client-syncfail', { sidecar: 'ready' });
    await cp.client.create(
      apiPath('', 'v1', 'events', ns),
      objectEvent(
        { apiVersion: 'v1', kind: 'Pod', name: 'client-syncfail', namespace: ns, uid: '' },
        'Warning',
        REASON_SYNC_FAILED,
        'rule sync failed (3 in a row): iptables-restore v1.8.9: line 12 failed; the last good rules stay in place and the sync is retried with backoff',
        new Date(),
        {
          component: EVENT_COMPONENT,
          instance: 'client-syncfail',
        },
      ),
    );
    await clientPod(ns, 'client-optout', { annotations: { [INJECT_ANNOTATION]: 'false' } });
    await clientPod(ns, 'client-hostnet', { hostNetwork: true });
    await clientPod(ns, 'client-late');
    await clientPod(plain, 'client-plain');
    await clientPod(psa, 'client-psa');

    ctl = await startNamespacedController(cp.connection, ns);
    await waitFor('the controller published web-ok', async () => (await ourSlices(cp.client, ns, 'web')).some((s) => (s.endpoints ?? []).some((e) => e.targetRef?.name === 'web-ok')), 15_000);
  });

  after(async () => {
    await ctl?.stop();
    for (const n of [ns, plain, psa, other]) if (n !== undefined) await cp?.client.delete(apiPath('', 'v1', 'namespaces', undefined, n));
    await cp?.stop();
  });

  /**
   * MultiNetworkPolicy: the CRD as deploy/components/multi-networkpolicy ships it (kept afterwards:
   * the control plane may be shared), policies written through v1beta2 and v1beta1 without the
   * webhook (so a broken one is stored), and the address groups written as the controller writes
   * them, but for one policy only: the other's group is "not written yet".
   */
  void describe('MultiNetworkPolicy', () => {
    const mnpPath = (version: string): string => apiPath(MULTI_NETWORK_POLICY_GROUP, version, MULTI_NETWORK_POLICY_RESOURCE, ns);
    const mnp = (name: string, spec: unknown, version = 'v1beta2'): MultiNetworkPolicy => ({
      apiVersion: `${MULTI_NETWORK_POLICY_GROUP}/${version}`,
      kind: 'MultiNetworkPolicy',
      metadata: { name, namespace: ns, annotations: { [POLICY_FOR_ANNOTATION]: 'macvlan1' } },
      spec: spec as MultiNetworkPolicy['spec'],
    });

    before(async () => {
      const crd = loadAll(readFileSync(join(ROOT, 'deploy', 'components', 'multi-networkpolicy', 'crd.yaml'), 'utf8'))[0] as object;
      try {
        await cp.client.create(apiPath('apiextensions.k8s.io', 'v1', 'customresourcedefinitions'), crd);
      } catch (e) {
        if (!(e instanceof KubeApiError && e.status === 409)) throw e;
      }
      await poll('the MultiNetworkPolicy CRD is served', 30_000, async () => {
        try {
          await cp.client.list(mnpPath('v1beta2'));
          return true;
        } catch (e) {
          // 404 until the CRD is established, then 429 while its storage initialises.
          if (isNotFound(e) || (e instanceof KubeApiError && e.status === 429)) return false;
          throw e;
        }
      });
      await clientPod(ns, 'db', { sidecar: 'ready', labels: { app: 'db' }, ip: '10.1.1.60', ports: [{ name: 'sql', containerPort: 5432 }] });
      await clientPod(ns, 'db-bare', { labels: { app: 'db' }, ip: '10.1.1.61' });
      await clientPod(ns, 'legacy', { sidecar: 'ready', labels: { app: 'legacy' }, ip: '10.1.1.62' });
      await cp.client.create<MultiNetworkPolicy>(
        mnpPath('v1beta2'),
        mnp('db-in', {
          podSelector: { matchLabels: { app: 'db' } },
          ingress: [
            { from: [{ podSelector: { matchLabels: { app: 'web' } } }], ports: [{ port: 'sql' }] },
            { from: [{ ipBlock: { cidr: '10.1.9.0/24', except: ['10.1.9.128/25'] } }], ports: [{ port: 30000, endPort: 30100 }] },
          ],
        }),
      );
      await cp.client.create(mnpPath('v1beta1'), mnp(BATCH, { podSelector: { matchLabels: { app: 'db' } }, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'batch' } } }] }] }, 'v1beta1'));
      // Stored without the webhook: no prefix length. It selects legacy and fails closed there.
      await cp.client.create(mnpPath('v1beta1'), mnp('legacy-in', { podSelector: { matchLabels: { app: 'legacy' } }, ingress: [{ from: [{ ipBlock: { cidr: '10.1.9.0' } }] }] }, 'v1beta1'));
      // The controller writes db-in's groups: web-ok and web-unready (a peer whether ready or not); the
      // loopback and other-network pods are left out.
      const groups = `${apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns)}?labelSelector=${encodeURIComponent(`${ADDRESS_GROUP_MANAGED_BY_SELECTOR},${ADDRESS_GROUP_POLICY_LABEL}=db-in`)}`;
      await waitFor(
        "the controller wrote db-in's address groups",
        async () => (await cp.client.get<{ items: V1EndpointSlice[] }>(groups)).items.reduce((n, s) => n + (s.endpoints ?? []).length, 0) === 2,
        30_000,
      );
    });

    void test('a peer a rule admits: named by policy and rule; the group not yet written is said; exit 0', async () => {
      const { run, report } = await json<PodReport>('pod', `${ns}/db`, '--peer', '10.1.1.10', '--port', '5432');
      assert.equal(run.code, 0, run.stdout);
      assert.deepEqual(
        report.policy?.probes.map((p) => `${p.network} ${p.result} ${p.allowedBy ?? ''}`),
        [`${ns}/macvlan1 allowed ${ns}/db-in spec.ingress[0]`],
      );
      assert.deepEqual(report.policy?.networks, [
        { network: `${ns}/macvlan1`, interface: 'net1', ingress: { isolated: true, by: [`${ns}/${BATCH}`, `${ns}/db-in`] }, egress: { isolated: false, by: [] } },
      ]);
      assert.deepEqual(
        report.findings.filter((f) => f.topic === 'policy').map((f) => `${f.severity} ${f.code}`),
        ['info PolicySelects', 'warning AddressGroupNotWritten', 'info PolicySelects', 'ok PolicyEnforced', 'ok PolicyAllows'],
      );
      assert.match(report.findings.find((f) => f.code === 'AddressGroupNotWritten')?.message ?? '', new RegExp(`${ns}/${BATCH}: the address group of pods app=batch in namespace ${ns}`));
      // endPort, written through v1beta2, is read back.
      const ranged = await json<PodReport>('pod', `${ns}/db`, '--peer', '10.1.9.5', '--port', '30100/TCP');
      assert.equal(ranged.report.policy?.probes[0]?.allowedBy, `${ns}/db-in spec.ingress[1]`);
    });

    void test('a peer no rule admits: exit 1, and each rule of the isolating policies says which part fails', async () => {
      const text = await diagnose('pod', `${ns}/db`, '--peer', '10.1.9.200', '--port', '30050');
      assert.equal(text.code, 1, text.stdout);
      assert.match(text.stdout, new RegExp(`ingress 10\\.1\\.9\\.200 port 30050/TCP on ${ns}/macvlan1: denied`));
      assert.match(
        text.stdout,
        new RegExp(`${ns}/${BATCH} spec\\.ingress\\[0\\]: peer fails, port matches\\n +from\\[0\\] \\(pods app=batch in namespace ${ns}\\): its address group is not written yet`),
      );
      assert.match(
        text.stdout,
        new RegExp(
          `${ns}/db-in spec\\.ingress\\[0\\]: peer fails, port fails\\n +from\\[0\\] \\(pods app=web in namespace ${ns}\\): 10\\.1\\.9\\.200 is not among the 2 addresses of the pods it selects`,
        ),
      );
      assert.match(text.stdout, /ports: 30050\/TCP is not listed \(sql\/TCP \(5432 in the pod's containerPorts\)\)/);
      assert.match(
        text.stdout,
        new RegExp(`${ns}/db-in spec\\.ingress\\[1\\]: peer fails, port matches\\n +from\\[0\\] ipBlock 10\\.1\\.9\\.0/24: 10\\.1\\.9\\.200 is in its except 10\\.1\\.9\\.128/25`),
      );
      assert.match(text.stdout, /ERROR {2}PolicyDenies: /);
      assert.match(text.stdout, /fix: to allow it, give one isolating policy a rule whose from covers 10\.1\.9\.200/);
    });

    void test('a selected pod without the sidecar: the policy is not enforced there, with the fix; a broken policy fails closed with its message', async () => {
      const [bare, legacy] = await Promise.all([json<PodReport>('pod', `${ns}/db-bare`), json<PodReport>('pod', `${ns}/legacy`)]);
      assert.equal(bare.run.code, 1);
      assert.equal(bare.report.policy?.enforced, false);
      const notEnforced = bare.report.findings.find((f) => f.code === 'PolicyNotEnforced');
      assert.match(notEnforced?.message ?? '', new RegExp(`Pod ${ns}/db-bare is selected by ${ns}/${BATCH}, ${ns}/db-in, but has no multus-proxy sidecar`));
      assert.match(notEnforced?.fix ?? '', new RegExp(`recreate the pod \\(kubectl delete pod -n ${ns} db-bare`));
      assert.equal(legacy.run.code, 1);
      assert.deepEqual(codes(legacy.report), ['PolicyFailsClosed']);
      assert.match(
        legacy.report.findings.find((f) => f.code === 'PolicyFailsClosed')?.message ?? '',
        /isolates ingress on .*: MultiNetworkPolicy .*\/legacy-in: spec\.ingress\[0\]\.from\[0\]\.ipBlock\.cidr "10\.1\.9\.0": has no prefix length/,
      );
    });
  });

  void test('a Service whose pods are broken each way: every pod named with its cause; the working one keeps it ok', async () => {
    const { run, report } = await json<ServiceReport>('service', `${ns}/web`);
    assert.equal(run.code, 0, `one ready endpoint: exit 0\n${run.stdout}`);
    const rows = Object.fromEntries(report.pods.map((p) => [p.pod, `${p.state} ${p.reasons.map((x) => x.code).join(',')}`.trim()]));
    assert.deepEqual(rows, {
      'web-loopback': 'missing AddressRefused',
      'web-nostatus': 'missing NetworkStatusMissing',
      'web-ok': 'ready',
      'web-othernet': 'missing NetworkNotAttached',
      'web-unready': 'not-ready NotReady',
    });
    assert.deepEqual(report.networks, [{ network: `${ns}/macvlan1`, nad: 'exists', shared: true }]);
    assert.equal(report.readyEndpoints, 1);

    const text = await diagnose('service', 'web', '-n', ns);
    assert.equal(text.code, 0, text.stderr);
    for (const line of [
      /web-loopback +missing +\(AddressRefused\)/,
      /web-nostatus +missing +\(NetworkStatusMissing\)/,
      /web-othernet +missing +\(NetworkNotAttached\)/,
      /web-unready +not-ready +10\.1\.1\.11 +\(NotReady\)/,
      /web-ok +ready +10\.1\.1\.10/,
    ]) {
      assert.match(text.stdout, line);
    }
    assert.match(text.stdout, /127\.0\.0\.1 is a loopback address/);
    assert.match(text.stdout, new RegExp(`has no entry named "${ns}/macvlan1" \\(attached: cbr0, ${ns}/macvlan2\\)`));
    assert.match(text.stdout, /verdict: ok/);
  });

  void test('Service causes: a malformed annotation, a missing NAD, a NAD not shared, no ready endpoint', async () => {
    const [typo, nonad, foreign, unready] = await Promise.all(['typo', 'nonad', 'foreign', 'unready'].map((s) => json<ServiceReport>('svc', `${ns}/${s}`)));
    for (const r of [typo, nonad, foreign, unready]) assert.equal(r?.run.code, 1, `a cause: exit 1\n${r?.run.stdout ?? ''}`);
    assert.deepEqual(codes(typo?.report as Report), ['InvalidAnnotation']);
    assert.match(typo?.report.findings[0]?.message ?? '', new RegExp(`^Service ${ns}/typo: k8s\\.v1\\.cni\\.cncf\\.io/service-network "macvlan1,": item 2 of 2 is empty`));
    assert.deepEqual(codes(nonad?.report as Report), ['NadMissing', 'NoReadyEndpoints']);
    assert.deepEqual(nonad?.report.networks, [{ network: `${ns}/macvlan9`, nad: 'missing', shared: true }]);
    assert.deepEqual(codes(foreign?.report as Report), ['NetworkNotShared', 'NoReadyEndpoints']);
    assert.match(foreign?.report.findings.find((f) => f.code === 'NetworkNotShared')?.message ?? '', new RegExp(`not shared with namespace ${ns} \\(it lists "somebody-else"\\)`));
    assert.deepEqual(codes(unready?.report as Report), ['NoReadyEndpoints']);
    assert.deepEqual(
      unready?.report.pods.map((p) => [p.pod, p.state]),
      [['lonely-unready', 'not-ready']],
    );
  });

  void test('a client pod that works: injected, ready, synced, serving web with its one ready endpoint', async () => {
    const { run, report } = await json<PodReport>('pod', `${ns}/client-ok`);
    assert.equal(run.code, 0, run.stdout);
    assert.deepEqual(report.sidecar, { mode: 'native', ready: true, restarts: 0, state: 'running', synced: true });
    const services = report.networks.flatMap((n) => n.services.map((s) => `${n.network} ${s.service} ${s.readyEndpoints}/${s.endpoints}`));
    assert.ok(services.includes(`${ns}/macvlan1 ${ns}/web 1/2`), services.join('\n'));
    const text = await diagnose('pod/client-ok', '-n', ns);
    assert.match(text.stdout, /sidecar: injected \(native\), ready, running, 0 restarts, synced: yes/);
    assert.match(text.stdout, new RegExp(`Service ${ns}/web [0-9.]+ 80/TCP: 1 of 2 endpoints ready`));
  });

  void test('client pods without the sidecar: namespace label, opt-out, PodSecurity, hostNetwork, no webhook registered', async () => {
    const cases: [string, string, string, RegExp][] = [
      [plain, 'client-plain', 'NamespaceNotEnabled', new RegExp(`namespace ${plain} is not labelled multus-proxy-injection=enabled`)],
      [ns, 'client-optout', 'OptedOut', /inject: "false"/],
      [psa, 'client-psa', 'PodSecurity', /"baseline" Pod Security level forbids/],
      [ns, 'client-hostnet', 'HostNetwork', /spec\.hostNetwork/],
      // No webhook is registered on this apiserver: the pod the webhook would inject now never met one.
      [ns, 'client-late', 'WebhookNotRegistered', /the MutatingWebhookConfiguration multus-proxy-webhook does not exist/],
    ];
    const runs = await Promise.all(cases.map(([n, name]) => diagnose('pod', name, '-n', n)));
    cases.forEach(([n, name, code, why], i) => {
      const r = runs[i] as Run;
      assert.equal(r.code, 1, `${name}: exit 1\n${r.stdout}${r.stderr}`);
      assert.match(r.stdout, new RegExp(`ERROR {2}${code}: Pod ${n}/${name} has no sidecar`), r.stdout);
      assert.match(r.stdout, why);
      assert.match(r.stdout, /sidecar: not injected/);
    });
    assert.match((runs[0] as Run).stdout, new RegExp(`fix: kubectl label namespace ${plain} multus-proxy-injection=enabled --overwrite`));
  });

  void test('an injected sidecar that is not ready, and one whose sync fails', async () => {
    const [crashing, failing] = await Promise.all([json<PodReport>('pod', `${ns}/client-crashing`), json<PodReport>('pod', `${ns}/client-syncfail`)]);
    assert.equal(crashing?.run.code, 1);
    assert.deepEqual(codes(crashing.report), ['SidecarNotReady']);
    assert.match(crashing.report.findings.find((f) => f.code === 'SidecarNotReady')?.message ?? '', /waiting: CrashLoopBackOff, 5 restarts; last exit: Error \(exit 1\)/);
    assert.equal(failing?.run.code, 1);
    assert.deepEqual(codes(failing.report), ['SidecarSyncFailed']);
    assert.match(failing.report.findings.find((f) => f.code === 'SidecarSyncFailed')?.message ?? '', /iptables-restore v1\.8\.9: line 12 failed/);
    assert.equal(failing.report.sidecar?.synced, false);
  });

  void test("the image's bundle (dist/controller.js, what `kubectl exec deploy/multus-proxy-controller -- node /app/dist/controller.js diagnose` runs) answers the same", async () => {
    const out = mkdtempSync(join(tmpdir(), 'mpx-diagnose-'));
    try {
      execFileSync(process.execPath, ['scripts/build.mjs', '--outdir', out, '--only', 'controller'], { cwd: ROOT, stdio: 'pipe' });
      const env = { ...process.env };
      delete env['KUBECONFIG'];
      const r = spawnSync(process.execPath, [join(out, 'controller.js'), 'diagnose', 'service', `${ns}/web`, '-o', 'json', '--kubeconfig', cp.kubeconfigPath], {
        encoding: 'utf8',
        env,
        timeout: 60_000,
      });
      assert.equal(r.status, 0, r.stderr);
      const bundled = JSON.parse(r.stdout) as ServiceReport;
      const { report } = await json<ServiceReport>('service', `${ns}/web`);
      assert.deepEqual(bundled.pods, report.pods);
      assert.deepEqual(
        bundled.findings.map((f) => f.code),
        report.findings.map((f) => f.code),
      );
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  void test("without -n, the kubeconfig context's namespace, as kubectl", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mpx-diagnose-ctx-'));
    try {
      const config = load(readFileSync(cp.kubeconfigPath, 'utf8')) as { contexts: { context: Record<string, string> }[] };
      for (const c of config.contexts) c.context['namespace'] = ns;
      const file = join(dir, 'config');
      writeFileSync(file, dump(config));
      const r = spawnSync(process.execPath, ['--import', 'tsx', 'cmd/controller/main.ts', 'diagnose', 'svc', 'web', '-o', 'json', '--kubeconfig', file], {
        cwd: ROOT,
        encoding: 'utf8',
        timeout: 60_000,
      });
      assert.equal(r.status, 0, r.stderr);
      assert.equal((JSON.parse(r.stdout) as ServiceReport).namespace, ns);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  void test('a missing pod or Service: exit 2, the object named with the fix; bad usage: exit 2', async () => {
    const [pod, svc, usage] = await Promise.all([diagnose('pod', 'nope', '-n', ns), diagnose('service', `${ns}/nope`), diagnose('deployment', 'x')]);
    assert.equal(pod.code, 2);
    assert.equal(pod.stdout, '');
    assert.equal(pod.stderr, `diagnose: Pod ${ns}/nope not found: check the name and the namespace (kubectl get pods -n ${ns}); give the namespace with -n NAMESPACE or as NAMESPACE/NAME\n`);
    assert.equal(svc.code, 2);
    assert.match(svc.stderr, new RegExp(`^diagnose: Service ${ns}/nope not found: .*kubectl get services -n ${ns}`));
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /unknown kind "deployment": write pod or service/);
  });
});
