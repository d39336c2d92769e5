/**
 * The real-node suite: one real single-node Kubernetes (test/harness/node.ts) for the whole file,
 * brought up once because bring-up and teardown cost ~half a minute together. The tests run in
 * order on it and each removes what it created; the last one stops the node and asserts that the
 * host is exactly as before (no process, interface, mount, iptables rule, directory or sysctl).
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { startNode, type RealNode } from '../harness/node.js';
import { NODE } from '../harness/node-config.js';
import { createNamespace, net1Addresses, pod } from './cluster.js';
import { blogFile, sliceAddresses } from './cluster.js';
import { installBootstrap, projectLeftovers, uninstall } from './install.js';
import { cleanupBlog, runBlog, type BlogObservations } from './blog.js';
import { runSidecar } from './sidecar.js';
import { runSoak, tearDown, SOAK_SUITE, type SoakRecord } from './soak.js';
import { exitRaceEvents } from './soak-analysis.js';
import { PROBE_CYCLE, runProbeCycle, tearDownProbeCycle, type ProbeCycleRecord } from './probes.js';
import type { SidecarStart } from './sidecar-starts.js';
import { HEALTH_LISTEN } from '../../cmd/webhook/options.js';
import { quantileSorted } from '../harness/stats.js';
import { STAGE_COLUMNS, stageCells } from '../controller/deletion-stages.js';
import { CLIENT_ADDRESS, NODE_ADDRESS, runNodePort } from './nodeport.js';
import { CLIENT } from './cluster.js';
import { runHeadless } from './headless.js';
import { runSliceMetadata } from './slices.js';
import { runDiagnoseOnNode } from './diagnose.js';
import { runCertManager } from './certmanager.js';
import { buildOverlay, netServiceOverlay, runNetService } from './netservice.js';
import { SIDECAR_CONTAINER_NAME } from '../../src/keys.js';
import { cleanupTenant, guard, malformedAnnotations, outOfReach, setupTenant, strayRoleBinding, tenantBlog, tenantNamespace, AAA_NS, OTHER_NS, TENANT_NS, TENANT_USER } from './tenant.js';
import { badAddresses, borrowedNetwork, installAgent, loweredCap, nadReachesHost, optionalPolicies, serviceFlood, smuggledInterface, tokenReach, BAD_ADDRESSES, SMUGGLED_ROUTE } from './tenant.js';
import type { AgentAttack, BadAddresses, BorrowedNetwork, LoweredCap, OptionalPolicies, ServiceFlood, SmuggledInterface, TokenReach } from './tenant.js';
import { deletedServiceReannotated, forgedEvent, manyNames, type DeletedReannotated, type ForgedEvent, type ManyNames } from './tenant-bounds.js';
import { bigLabels, bigNad, bigNetworkStatus, emptyOverBudget, fairShare, manyPorts, manySourceRanges } from './tenant-bounds.js';
import type { BigLabels, BigNad, BigNetworkStatus, FairShare, OverBudgetService } from './tenant-bounds.js';
import { uninstallAgent } from './nodeport.js';
import { runMetalLB } from './metallb.js';
import { LB_CLIENT, runLoadBalancer } from './loadbalancer.js';
import { checkLoadBalancerV6, runLoadBalancerV6 } from './loadbalancer6.js';
import type { GuardReport, MalformedAnnotations, OutOfReach, StrayBinding, Tenant } from './tenant.js';
import { REASON_INVALID_ANNOTATION } from '../../cmd/sidecar/problems.js';
import { runMonitoring } from './monitoring.js';
import { INSTALL_NAMESPACE } from '../../src/keys.js';
import { observe, runMatrix, setUpMatrix, sidecarLogs, tearDownMatrix, type Matrix, type MatrixRun } from './netpol.js';
import { allowAll, CASES, differingCells, UPDATE_CASES } from './netpol-cases.js';
import { runSpoof, SPOOF_COUNT } from './netpol-spoof.js';
import { applyBase, describeLoad, IPV6_CASES, removeAll, runChurn, runIpv6, runSidecarKill, type LoadResult } from './netpol-more.js';
import { runHelmLife } from './helm.js';

void describe('real node', { concurrency: 1 }, () => {
  let node: RealNode;
  const log = (m: string): void => console.log(`# node: ${m}`);

  before(
    async () => {
      node = await startNode({ log });
    },
    { timeout: 900_000 },
  );
  after(async () => {
    await node?.stop();
  });

  void test('harness: Node Ready on v1.34.4, a pod gets net1 from Multus + whereabouts, cluster DNS and the kubernetes Service work', { timeout: 300_000 }, async () => {
    const n = JSON.parse(await node.kubectl(['get', 'node', NODE.name, '-o', 'json'])) as {
      metadata: { labels: Record<string, string> };
      status: { nodeInfo: { kubeletVersion: string; containerRuntimeVersion: string }; conditions: { type: string; status: string }[] };
    };
    assert.equal(n.status.nodeInfo.kubeletVersion, 'v1.34.4');
    assert.match(n.status.nodeInfo.containerRuntimeVersion, /^containerd:\/\//);
    assert.equal(n.status.conditions.find((c) => c.type === 'Ready')?.status, 'True');
    assert.equal(n.metadata.labels['multusservicedemo'], 'true');

    const ns = 'harness-check';
    await createNamespace(node, ns, false);
    await node.apply(blogFile('net-attach.yml'), ns);
    await node.apply(blogFile('pod.yml'), ns);
    await node.wait('pod/fedora-net1', 'condition=Ready', { namespace: ns, timeoutMs: 120_000 });
    const p = await pod(node, ns, 'fedora-net1');
    const net1 = net1Addresses(p);
    assert.equal(net1.length, 1, `net1 in ${JSON.stringify(p.metadata?.annotations)}`);
    assert.match(net1[0] ?? '', /^10\.1\.1\.\d+$/, 'whereabouts allocates from the NAD range');
    assert.match(net1Addresses(p, 'eth0')[0] ?? '', /^10\.244\.0\.\d+$/, 'eth0 on the primary bridge network');
    // The address is really on the interface inside the pod.
    const ip = await node.exec(ns, 'fedora-net1', ['ip', '-4', '-o', 'addr', 'show', 'net1']);
    assert.match(ip.stdout, new RegExp(`inet ${(net1[0] ?? '').replace(/\./g, '\\.')}/24`));
    // whereabouts recorded the allocation (keyed by offset) for this pod in its IPPool.
    const pools = await node.kubectl(['get', 'ippools.whereabouts.cni.cncf.io', '-A', '-o', 'json']);
    assert.ok(pools.includes(`${ns}/fedora-net1`), `the IPPool names the pod: ${pools}`);

    const dns = await node.exec(ns, 'fedora-net1', ['getent', 'hosts', 'kubernetes.default.svc.cluster.local']);
    assert.equal(dns.code, 0, dns.stderr);
    assert.match(dns.stdout, /^10\.96\.0\.1\s/);
    // kube-proxy routes the kubernetes Service to the apiserver on the node IP.
    const healthz = await node.exec(ns, 'fedora-net1', ['curl', '-sk', '-m', '5', 'https://kubernetes.default.svc.cluster.local/healthz']);
    assert.equal(healthz.stdout.trim(), 'ok', healthz.stderr);
    // Nothing leaves the machine: an outside name does not resolve (CoreDNS has no forwarder).
    const outside = await node.exec(ns, 'fedora-net1', ['getent', 'hosts', 'example.com']);
    assert.notEqual(outside.code, 0);

    await node.kubectl(['delete', 'namespace', ns, '--wait=true', '--timeout=120s'], { timeoutMs: 130_000 });
  });

  void test(
    'install as users do: kustomize build deploy/overlays/bootstrap | kubectl apply -f -; certs Job completes, Deployments Ready, the apiserver calls the webhook through its Service',
    { timeout: 600_000 },
    async () => {
      const t0 = Date.now();
      await installBootstrap(node);
      log(`installed (bootstrap) in ${Date.now() - t0} ms`);
      const caBundle = await node.kubectl(['get', 'mutatingwebhookconfiguration', 'multus-proxy-webhook', '-o', 'jsonpath={.webhooks[0].clientConfig.caBundle}']);
      assert.ok(caBundle.length > 100, 'the certs Job patched the caBundle');
      // A Service asking for a service network without the proxy label: the mutating webhook, called
      // by the real apiserver through its Service, adds the label (server-side dry run, nothing stored).
      const out = await node.kubectl(['create', '-n', 'default', '--dry-run=server', '-o', 'json', '-f', '-'], {
        input: JSON.stringify({
          apiVersion: 'v1',
          kind: 'Service',
          metadata: { name: 'webhook-probe', annotations: { 'k8s.v1.cni.cncf.io/service-network': 'macvlan1' } },
          spec: { selector: { app: 'none' }, ports: [{ port: 80 }] },
        }),
      });
      const probed = JSON.parse(out) as { metadata: { labels?: Record<string, string> } };
      assert.equal(probed.metadata.labels?.['service.kubernetes.io/service-proxy-name'], 'multus-proxy', 'the webhook defaulted the proxy label');
    },
  );

  // MultiNetworkPolicy on the real node (test/node/netpol.ts, docs/policy.md): the upstream
  // NetworkPolicy conformance matrix on one shared secondary network, pods made once for all cases.
  let matrix: Matrix | undefined;
  void test(
    'policy: the matrix pods (a, b, c in netpol-x, -y, -z, injected) on one shared macvlan network; with no policy every pod reaches every other on TCP and UDP 80 and 81',
    { timeout: 400_000 },
    async () => {
      assert.equal(existsSync('/proc/net/sctp'), false, 'this kernel has SCTP now: add SCTP probes to the matrix (netpol-cases.ts PROBES) and to docs/policy.md');
      log('policy: no SCTP in this kernel (/proc/net/sctp absent): the matrix probes TCP and UDP');
      matrix = await setUpMatrix(node, log);
      const r = await observe(matrix, matrix.addresses);
      assert.deepEqual(differingCells(allowAll(), r.table), [], 'with no policy');
      assert.deepEqual(r.odd, [], 'answers from another pod than the one probed');
    },
  );

  void test(
    `policy: the upstream NetworkPolicy conformance matrix, ${CASES.length} mapped cases and ${UPDATE_CASES.length} that change a policy or a label between two tables, each table whole (TCP and UDP, ports 80 and 81, 72 pairs) after the sidecars synced`,
    { timeout: 900_000 },
    async () => {
      assert.ok(matrix, 'after the matrix pods');
      let run: MatrixRun | undefined;
      try {
        run = await runMatrix(node, matrix, (m) => log(`  ${m}`));
      } finally {
        if (!run || run.cases.some((c) => c.cells.length > 0)) log(await sidecarLogs(node));
      }
      const failed = run.cases.filter((c) => c.cells.length > 0);
      log(`policy matrix in ${run.ms} ms: ${run.cases.length - failed.length} of ${run.cases.length} cases pass`);
      assert.deepEqual(run.baseline, [], 'no policy, before the cases');
      assert.deepEqual(
        failed.map((c) => `${c.upstream}${c.unsynced.length ? ` (not synced: ${c.unsynced.slice(0, 2).join('; ')})` : ''}: ${c.cells.length} cells: ${c.cells.slice(0, 12).join('; ')}`),
        [],
        'cases whose observed table differs',
      );
      assert.deepEqual(run.after, [], 'every policy deleted: everything reaches everything again (upstream: should stop enforcing policies after they are deleted)');
    },
  );

  void test(
    `policy: IPv6 with neighbour discovery: ${IPV6_CASES.length} matrix cases on the pods' IPv6 net1 addresses, their first IPv6 traffic (and so their first neighbour discovery) under isolation`,
    { timeout: 400_000 },
    async () => {
      assert.ok(matrix, 'after the matrix pods');
      const r = await runIpv6(node, matrix, (m) => log(`  ${m}`));
      assert.deepEqual(
        r.filter((c) => c.cells.length > 0).map((c) => `${c.upstream}${c.behind.length ? ' (not synced)' : ''}: ${c.cells.slice(0, 12).join('; ')}`),
        [],
        'IPv6 cases whose observed table differs',
      );
    },
  );

  const forbiddenPassed = (loads: LoadResult[]): string[] => loads.filter((l) => !l.allowed && l.ok > 0).map((l) => `${describeLoad(l)}; first at ${new Date(l.okAt[0] ?? 0).toISOString()}`);
  const allowedLoads = (loads: LoadResult[]): void => {
    for (const l of loads.filter((x) => x.allowed)) assert.ok(l.ok >= 20, `the allowed loop ran: ${describeLoad(l)}`);
  };

  void test(
    'policy: another policy added and removed 3 times under load (x/a isolated to y/a): no connection from x/b or z/c succeeds at any moment, y/a keeps being answered',
    { timeout: 400_000 },
    async () => {
      assert.ok(matrix, 'after the matrix pods');
      try {
        const r = await runChurn(node, matrix, (m) => log(`  ${m}`));
        assert.deepEqual(r.base.behind, [], 'the base policy synced');
        assert.deepEqual(
          r.changes.filter((c) => c.behind.length > 0).map((c) => `${c.what}: ${c.behind.join('; ')}`),
          [],
          'each change synced on every sidecar',
        );
        assert.deepEqual(forbiddenPassed(r.loads), [], 'forbidden connections that succeeded');
        allowedLoads(r.loads);
        assert.deepEqual(r.loads.filter((l) => l.allowed && l.fail > 0).map(describeLoad), [], 'allowed connections lost across the changes (each change is one transaction)');
      } finally {
        await removeAll(node, matrix);
      }
    },
  );

  /** Runs f with x/a isolated to "from y/a only" (synced on every sidecar); every policy is removed after. */
  const underBase = async (f: (m: Matrix) => Promise<void>): Promise<void> => {
    assert.ok(matrix, 'after the matrix pods');
    try {
      const base = await applyBase(node, matrix);
      assert.deepEqual(base.behind, [], 'the base policy synced');
      await f(matrix);
    } finally {
      await removeAll(node, matrix);
    }
  };

  void test("policy: x/a's sidecar container killed under load: the kubelet restarts it, and no forbidden connection passes while it is gone or starting", { timeout: 400_000 }, () =>
    underBase(async (m) => {
      const r = await runSidecarKill(node, m, (x) => log(`  ${x}`));
      assert.ok(r.restarts >= 1 && r.readyAfterMs > 0, 'the kubelet restarted the sidecar');
      assert.deepEqual(forbiddenPassed(r.loads), [], 'forbidden connections that succeeded');
      allowedLoads(r.loads);
      log(
        `  allowed loads through the kill: ${r.loads
          .filter((l) => l.allowed)
          .map(describeLoad)
          .join('; ')}`,
      );
      assert.deepEqual(r.countersAfter, [], 'the restarted sidecar holds the policy');
    }),
  );

  void test(
    `policy: spoofing: an attacker pod in netpol-z (NET_ADMIN) adds y/a's net1 address and sends ${SPOOF_COUNT} UDP datagrams and a TCP connection to x/a, which allows only y/a: its own sidecar's source guard stops them, raw frames with y/a's MAC and address too, and with the guard deleted x/a's policy (address bound to MAC) does; 0 delivered, the real y/a gets through`,
    { timeout: 300_000 },
    () =>
      underBase(async (m) => {
        const r = await runSpoof(node, m, (x) => log(`  ${x}`));
        assert.equal(r.pairInTable, true, "x/a's rule binds y/a's address to y/a's MAC");
        assert.notEqual(r.macTaken.code, 0, "macvlan refuses y/a's MAC to another child of the same parent");
        assert.match(r.macTaken.stderr, /Address already in use/);
        for (const [name, p] of [
          ['guarded', r.guarded],
          ['guard deleted', r.unguarded],
        ] as const) {
          assert.equal(p.delivered, 0, `${name}: spoofed datagrams delivered to x/a`);
          assert.equal(p.tcp, '', `${name}: the spoofed TCP connection was answered`);
        }
        assert.ok(r.guarded.guardDrops >= SPOOF_COUNT, `the attacker's source guard dropped the spoof: ${JSON.stringify(r.guarded)}`);
        assert.equal(r.raw.delivered, 0, `raw frames with y/a's MAC and address delivered to x/a: ${JSON.stringify(r.raw)}`);
        assert.equal(r.raw.refused, SPOOF_COUNT, `every raw frame refused at the attacker's egress: ${JSON.stringify(r.raw)}`);
        assert.ok(r.raw.guardDrops >= SPOOF_COUNT, `the attacker's source guard counted the raw frames: ${JSON.stringify(r.raw)}`);
        assert.ok(r.unguarded.policyDrops >= SPOOF_COUNT, `x/a's policy dropped the spoof that left the attacker: ${JSON.stringify(r.unguarded)}`);
        assert.equal(r.realBefore, SPOOF_COUNT, 'y/a delivered before the attack');
        assert.equal(r.realAfter, SPOOF_COUNT, 'y/a delivered after the attack');
        assert.deepEqual(r.realTcp, ['x/a', 'x/a'], 'y/a connects to x/a over TCP before and after');
      }),
  );

  void test('policy: cleanup: the matrix namespaces (and the CRD, when the suite added it) go', { timeout: 400_000 }, async () => {
    await tearDownMatrix(node, matrix, log);
    matrix = undefined;
  });

  void test('no spurious probe failure: injected pods scaled 0 → 6 → 0 twice with both cores busy, 0 Unhealthy Events from the sidecars', { timeout: 900_000 }, async () => {
    let r: ProbeCycleRecord;
    try {
      r = await runProbeCycle(node, PROBE_CYCLE, log);
    } finally {
      await tearDownProbeCycle(node);
    }
    const ms = (pick: (s: SidecarStart) => number | undefined): string => {
      const xs = r.starts
        .map(pick)
        .filter((x): x is number => x !== undefined)
        .sort((a, b) => a - b);
      return `n ${xs.length}, p50 ${quantileSorted(xs, 0.5)}, p99 ${quantileSorted(xs, 0.99)}, max ${xs[xs.length - 1]} ms`;
    };
    log(`probe cycle in ${r.ms} ms, ${r.options.busyLoops} busy loops, load ${r.load.map((x) => x.toFixed(1)).join(' ')}`);
    log(`  sidecar start -> Node.js serves the health port: ${ms((s) => s.listenMs)}`);
    log(`  sidecar start -> first sync: ${ms((s) => s.readyMs)}`);
    log(`  sidecar start -> app container start: ${ms((s) => s.appMs)}`);
    for (const e of r.unhealthy) log(`  Unhealthy ${e.pod} ${e.container} x${e.count}: ${e.message}`);
    assert.ok(r.starts.filter((s) => s.readyMs !== undefined).length >= PROBE_CYCLE.replicas * PROBE_CYCLE.cycles, `sidecars started: ${r.starts.length}`);
    assert.deepEqual(r.launchers, { [HEALTH_LISTEN]: PROBE_CYCLE.replicas * PROBE_CYCLE.cycles }, 'every pod got the injected command under health-listen');
    assert.deepEqual(
      r.unhealthy.map((e) => `${e.pod} ${e.container} x${e.count}: ${e.message}`),
      [],
      'Unhealthy Events',
    );
    // A launcher that broke the start (the port refused to Node.js) would show as restarts instead.
    const perPod = new Map<string, number>();
    for (const s of r.starts) perPod.set(s.pod, (perPod.get(s.pod) ?? 0) + 1);
    assert.deepEqual(
      [...perPod].filter(([, n]) => n > 1),
      [],
      'each sidecar started once',
    );
  });

  // The quick soak (test/node/soak.ts, bench/soak.ts): run once, judged by the two tests below.
  let soak: SoakRecord | undefined;
  void test(
    `quick soak, the blog's churn for ${SOAK_SUITE.minutes} min beside kube-proxy: 0 requests lost with the README's preStop, 0 Unhealthy Events from the project's containers over every scale-up and scale-down`,
    { timeout: 900_000 },
    async () => {
      const t0 = Date.now();
      try {
        soak = await runSoak(node, SOAK_SUITE, log);
      } finally {
        await tearDown(node, SOAK_SUITE, log);
      }
      const r = soak;
      log(`quick soak in ${Date.now() - t0} ms`);
      assert.deepEqual(r.errors, [], 'every churn step and sample ran');
      for (const kind of ['scale-down', 'rollout restart', 'controller leader deleted', 'webhook pod deleted', "client's sidecar stopped"]) {
        assert.ok(
          r.churn.some((e) => e.kind === kind),
          `the churn did a ${kind}: ${r.churn.map((e) => e.kind).join(', ')}`,
        );
      }
      for (const f of r.failures) log(`  failed: ${f.path}, ${f.phase}, curl ${f.code}, ${f.afterMs ?? '?'} ms after ${f.after ?? 'nothing'}`);
      const preStopPhase = r.phases.find((p) => p.preStop);
      const preStop = preStopPhase?.name;
      const sent = r.requests.find((x) => x.path === 'multus-proxy' && x.phase === preStop)?.requests ?? 0;
      assert.ok(sent >= 300, `the multus-proxy loop ran in the preStop phase (${sent} requests)`);
      const downs = r.churn.filter((e) => e.kind === 'scale-down' && preStopPhase !== undefined && e.at >= preStopPhase.from).length;
      log(`  scale-downs under preStop: ${downs}`);
      assert.ok(downs >= 5, `scale-downs under preStop: ${downs}`);
      const lost = r.failures.filter((f) => f.path === 'multus-proxy' && f.phase === preStop);
      assert.deepEqual(
        lost.map((f) => `curl ${f.code} ${f.afterMs ?? '?'} ms after ${f.after ?? 'nothing'}`),
        [],
        `lost with the preStop, of ${sent}`,
      );
      const starts = r.sidecarStarts.filter((x) => x.readyMs !== undefined).length;
      assert.ok(starts >= 10, `sidecars started during the soak: ${starts}`);
      const race = exitRaceEvents(
        r.events.filter((e) => e.reason === 'Unhealthy'),
        r.churn,
      );
      for (const e of race.excused) log(`  excused (kubelet probed ${e.pod} after the soak deleted it and it exited): ${e.message}`);
      const unhealthy = race.counted;
      assert.deepEqual(
        unhealthy.map((e) => `${e.namespace}/${e.pod} ${e.container} ×${e.count} (${e.podState ?? '?'}): ${e.message}`),
        [],
        'Unhealthy Events',
      );
    },
  );

  // The issue's target is p99 ≤ 50 ms; on this 2-core machine the quick soak measures 181 ms at
  // best (docs/benchmarks.md, soak), so the test asserts the regression bound it can hold (1 s)
  // and logs the target's status beside kube's own endpointslice controller (docs/decisions/0039-soak.md).
  void test("in the quick soak, every listed backend is seen terminating in our slice, deletion → terminating p99 ≤ 1 s or kube's own controller's p99 for the same pods (the 50 ms target is logged, not met yet)", () => {
    assert.ok(soak, 'after the quick soak');
    const d = soak.deletion['multus-proxy'];
    assert.deepEqual(d.missing, [], 'every deleted backend our slice listed was seen terminating');
    assert.ok(d.ms.length >= 10, `deletions measured: ${d.ms.length}`);
    const p99 = quantileSorted(
      [...d.ms].sort((a, b) => a - b),
      0.99,
    );
    log(`  deletion → terminating in our slice: p99 ${p99.toFixed(1)} ms over ${d.ms.length}; load average ${soak.loadAverages.map((l) => (l.load[0] ?? 0).toFixed(1)).join(' ')}`);
    const kube = [...soak.deletion['kube-proxy'].ms].sort((a, b) => a - b);
    log(
      `  target p99 ≤ 50 ms: ${p99 <= 50 ? 'met' : 'not met'}; kube's endpointslice controller for the same pods: p99 ${kube.length > 0 ? quantileSorted(kube, 0.99).toFixed(1) : '?'} ms over ${kube.length}`,
    );
    // The bound: 1 s, or kube's endpointslice controller's p99 for the same deletions when the
    // apiserver made that slower (both write through it; docs/decisions/0039-soak.md).
    const bound = Math.max(1000, kube.length > 0 ? quantileSorted(kube, 0.99) : 0);
    const stages = stageCells(soak.deletionStages);
    log(`  where ours went (p50 / p90 / p99 ms): ${STAGE_COLUMNS.map((c, i) => `${c}: ${stages[i] ?? ''}`).join('; ')}`);
    assert.ok(
      p99 <= bound,
      `pod deletion → terminating p99 ${p99.toFixed(1)} ms, over the bound ${bound.toFixed(1)} ms (all: ${d.ms.map((x) => x.toFixed(0)).join(' ')}); the leader's own view: ${soak.controllerMetrics.filter((l) => l.includes('change_to_slice_write_seconds_bucket{le="0.05"}') || l.includes('change_to_slice_write_seconds_count')).join(', ')}`,
    );
  });

  let blog: BlogObservations | undefined;
  void test(
    'the blog scenario verbatim: whereabouts net1, the slice, the native sidecar, 20 curls by name answered by both replicas, kube-proxy ignores the Service, scale-up and deletion',
    { timeout: 600_000 },
    async () => {
      const t0 = Date.now();
      const o = await runBlog(node, { step: (t) => log(t), info: (t) => log(`  ${t}`) });
      blog = o;
      log(`blog scenario in ${Date.now() - t0} ms`);
      const backendAddrs = Object.values(o.backends);
      assert.equal(backendAddrs.length, 2);
      for (const a of [...backendAddrs, o.clientNet1]) assert.match(a, /^10\.1\.1\.\d+$/, 'whereabouts address on net1');
      assert.deepEqual(o.sliceAddresses, [...backendAddrs].sort(), "the controller's slice lists exactly the nginx net1 addresses");
      assert.ok(
        o.clientInitContainers.some((c) => c.name === SIDECAR_CONTAINER_NAME && c.restartPolicy === 'Always'),
        `native sidecar in ${JSON.stringify(o.clientInitContainers)}`,
      );
      assert.ok(o.sidecarRules.length > 0, 'the sidecar programmed nat rules');
      assert.deepEqual(o.curls, Array(20).fill('ok'));
      for (const [n, c] of Object.entries(o.answeredBy)) assert.ok(c > 0, `${n} answered none of 20: ${JSON.stringify(o.answeredBy)}`);
      assert.equal(
        Object.values(o.answeredBy).reduce((a, b) => a + b, 0),
        20,
        'every request arrived from the client net1 address',
      );
      assert.deepEqual(o.otherSources, []);
      assert.deepEqual(o.kubeProxyRules, [], 'kube-proxy wrote no rule for the Service');
      // The new replica answers once Ready; how soon is B3-real's measure (bench/b3-real-node.ts), not a bound here.
      assert.ok(o.scaled.readyToAnswerMs >= 0, `the new replica answered after Ready (${o.scaled.readyToAnswerMs} ms)`);
      assert.equal(o.deleted.inSliceAfter, false);
      assert.deepEqual(o.deleted.curls, Array(20).fill('ok'));
      assert.equal(
        Object.values(o.deleted.answeredBy).reduce((a, b) => a + b, 0),
        20,
        'all 20 answered by live pods',
      );
    },
  );

  void test(
    "after the blog's scale-up the sidecar's trigger_to_rules_seconds has values; kube-proxy's selector lists none of our slices; a slice written as before is relabelled in place",
    { timeout: 120_000 },
    async () => {
      const o = await runSliceMetadata(node, (m) => log(`  ${m}`));
      assert.ok(o.triggerCount > 0, `trigger_to_rules_seconds count ${o.triggerCount}`);
      assert.ok(o.triggerSum / o.triggerCount >= 0 && o.triggerSum / o.triggerCount < 30, `mean ${o.triggerSum / o.triggerCount} s`);
      // The slice's own trigger time is not asserted: a write whose only change is a pod leaving carries none (as upstream).
      log(`  the blog slice's trigger time: ${String(o.trigger)}`);
      assert.equal(o.labels['service.kubernetes.io/service-proxy-name'], 'multus-proxy');
      assert.deepEqual(o.kubeProxyOurs, [], "kube-proxy's selector lists none of ours");
      assert.equal(o.upgrade.proxyLabel, 'multus-proxy', `relabelled within 30 s: ${JSON.stringify(o.upgrade)}`);
      assert.equal(o.upgrade.after, o.upgrade.before, 'same slice names and uids: updated in place');
      assert.equal(o.upgrade.fewestAddresses, o.upgrade.addressesBefore, 'no endpoint dropped meanwhile');
      assert.equal(o.upgrade.addressesAfter, o.upgrade.addressesBefore);
    },
  );

  void test(
    "monitoring: the chart's monitors, rules and dashboard install; the targets they select are scraped, every alert expression and dashboard query returns data on the real series (promtool), MultusProxyWebhookErrors fires for each webhook answering a wrong-kind review, and MultusProxySlicesNotWritten while the controller cannot write slices",
    { timeout: 600_000 },
    async () => {
      assert.ok(blog, 'runs after the blog scenario, with its client sidecar and backends in place');
      const t0 = Date.now();
      const o = await runMonitoring(node, (m) => log(`  ${m}`));
      log(`monitoring in ${Date.now() - t0} ms`);
      assert.equal(o.installed.filter((x) => x.startsWith('ServiceMonitor/')).length, 3, o.installed.join(', '));
      assert.equal(o.installed.filter((x) => x.startsWith('PodMonitor/')).length, 1, o.installed.join(', '));
      const jobs = new Set(o.targets.map((t) => t.labels['job']));
      for (const job of ['multus-proxy-controller-metrics', 'multus-proxy-webhook', 'multus-proxy-node-metrics', `${INSTALL_NAMESPACE}/multus-proxy-sidecars`])
        assert.ok(jobs.has(job), `a target of ${job}: ${[...jobs].join(', ')}`);
      assert.ok(
        o.targets.some((t) => t.labels['job']?.endsWith('/multus-proxy-sidecars') && t.labels['pod'] === CLIENT),
        `the PodMonitor selects the blog client's sidecar`,
      );
      log(`  ${o.evaluated.length} expressions (${o.evaluated.filter((e) => e.kind === 'alert').length} alerts), ${o.evaluated.filter((e) => e.found === 'data').length} return data`);
      // Without data: `series` (its selection is empty), `declared` (a labelled metric with no series yet) or `none` (no target serves it).
      assert.deepEqual(
        o.evaluated.filter((e) => e.found !== 'data').map((e) => `${e.where} (${e.found}): ${e.expr}`),
        [],
        'every alert expression and dashboard query returns data on a healthy node',
      );
      const panels = new Set(o.evaluated.filter((e) => e.kind === 'panel').map((e) => e.panel));
      for (const p of panels)
        assert.ok(
          o.evaluated.some((e) => e.panel === p && e.found === 'data'),
          `panel "${p}" shows data`,
        );
      log(`  ${o.webhookFired.alert}: error answers ${o.webhookFired.errors.map((e) => `${e.pod} ${e.before} → ${e.after}`).join(', ')}`);
      assert.equal(o.webhookFired.errors.length, 2, 'both webhook replicas were sent a wrong-kind review');
      for (const e of o.webhookFired.errors) assert.ok(e.after > e.before, `webhook ${e.pod} counted its error answer: ${e.before} → ${e.after}`);
      assert.match(o.webhookFired.promtool, /SUCCESS/, `${o.webhookFired.alert} fires for each webhook replica:\n${o.webhookFired.promtool}`);
      log(`  ${o.fired.alert}: the leader ${o.fired.leader}'s reconcile errors ${o.fired.errorsBefore} → ${o.fired.errorsAfter} while its role could not write EndpointSlices`);
      assert.ok(o.fired.errorsAfter > o.fired.errorsBefore, `reconcile errors on the leader ${o.fired.leader}: ${o.fired.errorsBefore} → ${o.fired.errorsAfter}`);
      assert.match(o.fired.promtool, /SUCCESS/, `${o.fired.alert} fires for ${o.fired.leader}:\n${o.fired.promtool}`);
      assert.equal(o.sliceRestored, true);
    },
  );

  void test(
    "diagnose names the cause on the blog: a replica's network-status on another network, the Service naming a NAD that does not exist; from the README command and from the controller's image in the cluster",
    { timeout: 300_000 },
    async () => {
      const o = await runDiagnoseOnNode(node, (m) => log(`  ${m}`));
      const n = o.before.length;
      assert.ok(n >= 2, `the blog's replicas in the slice (3 after its scale-up), so one can be broken while another serves: ${o.before.join(' ')}`);
      assert.equal(o.service.code, 0, `healthy Service: exit 0: ${o.service.stderr}`);
      assert.equal(o.service.report?.verdict, 'ok');
      assert.deepEqual(
        o.service.report?.pods.map((p) => p.state),
        Array(n).fill('ready'),
      );
      assert.equal(o.client.code, 0, `healthy client: exit 0: ${o.client.stderr}`);
      assert.deepEqual(o.client.report?.sidecar && [o.client.report.sidecar.mode, o.client.report.sidecar.ready, o.client.report.sidecar.synced], ['native', true, true]);
      const served = o.client.report?.networks.flatMap((x) => x.services.map((s) => `${x.network} ${s.service} ${s.readyEndpoints}`));
      assert.deepEqual(served, [`default/macvlan1 default/multus-nginx-macvlan ${n}`]);
      log(
        `  in the cluster (controller's ServiceAccount): exit ${o.inCluster.code}, ${
          o.inCluster.report?.findings
            .filter((f) => f.severity !== 'ok')
            .map((f) => `${f.code}: ${f.message}`)
            .join(' | ') ?? o.inCluster.stderr
        }`,
      );
      assert.equal(o.inCluster.code, 0, `kubectl exec deploy/multus-proxy-controller -- node /app/dist/controller.js diagnose: ${o.inCluster.stderr}`);
      assert.equal(o.inCluster.report?.readyEndpoints, n);

      const row = o.podBroken.report?.pods.find((p) => p.pod === o.brokenPod);
      assert.deepEqual(row && [row.state, row.reasons.map((r) => r.code)], ['missing', ['NetworkNotAttached']], JSON.stringify(o.podBroken.report?.findings));
      assert.equal(o.podBroken.code, 0, 'the other replica still serves');
      assert.equal(o.annotationBroken.code, 1, JSON.stringify(o.annotationBroken.report?.findings ?? o.annotationBroken.stderr));
      assert.deepEqual(
        o.annotationBroken.report?.findings.filter((f) => f.severity === 'error').map((f) => f.code),
        ['NadMissing', 'NoReadyEndpoints'],
      );
      assert.deepEqual(o.annotationBroken.report?.networks, [{ network: 'default/macvlan-typo', nad: 'missing', shared: true }]);
      assert.deepEqual(o.after, o.before, 'both repairs restored the blog slice');
    },
  );

  // The tenant suite (test/node/tenant.ts, docs/security.md): beside the blog's pods and traffic.
  let tenant: Tenant | undefined;
  /** What every attack shares: no request of the blog's client lost, the host unchanged, the blog's slice followed its pods. */
  const guarded = (name: string, r: GuardReport): void => {
    assert.deepEqual(r.failures, [], `${name}: the blog client lost requests (${r.failures.length} of ${r.requests})`);
    assert.ok(r.requests >= 5, `${name}: the blog traffic ran (${r.requests} requests)`);
    assert.deepEqual(r.hostAfter, r.hostBefore, `${name}: the host's links, addresses and routes changed`);
    assert.ok(r.followUpMs >= 0 && r.followDownMs >= 0, `${name}: the blog's slice followed its pods`);
    assert.deepEqual(r.costs.restarted, [], `${name}: containers of the project restarted`);
    assert.deepEqual(r.costs.lostReadiness, [], `${name}: injected pods of other namespaces lost readiness`);
    assert.deepEqual(r.costs.overBudget, [], `${name}: containers reached their memory limit`);
    for (const c of ['sidecar', 'controller', 'webhook']) assert.ok(r.costs.peaks[c] !== undefined, `${name}: no memory read for the ${c} (${JSON.stringify(r.costs.peaks)})`);
  };

  void test(`tenant: setup: "${TENANT_USER}" has admin (plus NADs) in ${TENANT_NS} only, through a client certificate signed by the cluster CA`, { timeout: 120_000 }, async () => {
    assert.ok(blog, 'runs after the blog scenario, beside its pods');
    const t = await setupTenant(node);
    tenant = t;
    const can = async (args: string[]): Promise<string> => (await t.kubectl(['auth', 'can-i', ...args])).stdout.trim();
    assert.equal((await t.kubectl(['auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}'])).stdout, TENANT_USER, 'authenticated by its certificate');
    assert.equal(await can(['create', 'pods', '-n', TENANT_NS]), 'yes');
    assert.equal(await can(['patch', 'pods', '-n', TENANT_NS]), 'yes', 'a pod owner may annotate its pods');
    assert.equal(await can(['create', 'network-attachment-definitions.k8s.cni.cncf.io', '-n', TENANT_NS]), 'yes');
    assert.equal(await can(['create', 'rolebindings', '-n', TENANT_NS]), 'yes');
    assert.equal(await can(['get', 'pods', '-n', 'default']), 'no');
    assert.equal(await can(['create', 'network-attachment-definitions.k8s.cni.cncf.io', '-n', 'default']), 'no');
    assert.equal(await can(['get', 'nodes']), 'no');
  });

  void test('tenant: namespace labels and EndpointSlices are out of reach (RBAC denies with the verb and resource)', { timeout: 300_000 }, async () => {
    assert.ok(tenant, 'after the tenant setup');
    const o: OutOfReach = { attempts: [] };
    const r = await guard(node, log, outOfReach(tenant, o));
    for (const a of o.attempts) assert.ok(a.denied, `${a.what}: ${a.code === 0 ? 'ALLOWED' : `refused, but not by RBAC: ${a.stderr}`}`);
    assert.equal(o.attempts.length, 8);
    guarded('out of reach', r);
  });

  void test(
    `tenant: a stray RoleBinding named like the controller's blocks only its own namespace: ${OTHER_NS} is bound, the tenant gets an Event, and its binding follows once the stray one is gone`,
    { timeout: 400_000 },
    async () => {
      assert.ok(tenant, 'after the tenant setup');
      const o: StrayBinding = { events: [], otherBound: false, recoveredMs: -1 };
      const r = await guard(node, log, strayRoleBinding(node, tenant, o));
      log(`  events: ${o.events.join(' | ')}; recovered in ${o.recoveredMs} ms`);
      assert.ok(o.otherBound, `the controller bound ${OTHER_NS} despite the stray binding in ${TENANT_NS}`);
      // Naming the fix needs the controller's get on that RoleBinding (deploy/base/controller-rbac.yaml).
      assert.ok(
        o.events.some((e) => e.includes('multus-proxy-sidecar-pods') && e.includes('not managed by multus-proxy') && e.includes('delete or rename it')),
        `an Event in ${TENANT_NS} names the binding in the way and the fix: ${o.events.join(' | ')}`,
      );
      assert.ok(o.recoveredMs >= 0, "the controller's binding replaced the stray one once it was deleted");
      guarded('stray RoleBinding', r);
    },
  );

  void test(`tenant: the tenant runs the blog's four files in ${TENANT_NS} as itself; the sidecar is injected and its client reaches its Service`, { timeout: 400_000 }, async () => {
    assert.ok(tenant, 'after the tenant setup');
    await tenantBlog(node, tenant);
  });

  void test(
    'tenant: malformed annotations on its own client: the sidecar keeps the last good values, says so (Event and metric, pod stays Ready), and follows its Service once they are fixed',
    { timeout: 400_000 },
    async () => {
      assert.ok(tenant, 'after the tenant setup');
      const o: MalformedAnnotations = { annotated: undefined, events: [], invalidWhileBad: {}, invalidAfter: {}, curlsWhileBad: [], readyWhileBad: false, followsAfterMs: -1 };
      const r = await guard(node, log, malformedAnnotations(node, tenant, o));
      log(
        `  events: ${o.events.join(' | ')}; metric while bad ${JSON.stringify(o.invalidWhileBad)}, after ${JSON.stringify(o.invalidAfter)}; new replica answered ${o.followsAfterMs} ms after reaching the slice`,
      );
      assert.equal(o.annotated?.code, 0, `a pod owner may annotate its pod (no optional policy installed): ${o.annotated?.stderr}`);
      assert.ok(
        o.events.some((e) => e.includes('service-network')),
        `a ${REASON_INVALID_ANNOTATION} Event names service-network: ${o.events.join(' | ')}`,
      );
      assert.ok(
        o.events.some((e) => e.includes('network-status')),
        `a ${REASON_INVALID_ANNOTATION} Event names network-status: ${o.events.join(' | ')}`,
      );
      assert.deepEqual(o.invalidWhileBad, { '{annotation="service-network"}': 1, '{annotation="network-status"}': 1 });
      assert.deepEqual(o.curlsWhileBad, Array(10).fill('ok'), 'the last good values keep serving the Service');
      assert.ok(o.readyWhileBad, 'the pod stays Ready (docs/decisions/0019-pod-ready-while-sidecar-cannot-sync.md)');
      assert.deepEqual(o.invalidAfter, { '{annotation="service-network"}': 0, '{annotation="network-status"}': 0 });
      assert.ok(o.followsAfterMs >= 0, 'after the fix the sidecar follows the Service: a new replica answers');
      guarded('malformed annotations', r);
    },
  );

  void test('tenant: bad addresses in network-status are dropped with an Event naming pod and address; the Service keeps following its pods', { timeout: 400_000 }, async () => {
    assert.ok(tenant, 'after the tenant setup');
    const o: BadAddresses = { pod: '', annotated: undefined, events: [], slice: [], newReplicaMs: -1, recoveredMs: -1 };
    const r = await guard(node, log, badAddresses(node, tenant, o));
    log(`  events: ${o.events.join(' | ')}; slice ${o.slice.join(', ')}; new replica in the slice after ${o.newReplicaMs} ms; recovered ${o.recoveredMs} ms`);
    assert.equal(o.annotated?.code, 0, `without the optional policy a pod owner may annotate its pod: ${o.annotated?.stderr}`);
    for (const a of BAD_ADDRESSES) {
      assert.ok(!o.slice.includes(a), `${a} published in ${o.slice.join(', ')}`);
      assert.ok(
        o.events.some((e) => e.includes(a) && e.includes(o.pod)),
        `no Event names ${o.pod} and ${a}: ${o.events.join(' | ')}`,
      );
    }
    assert.ok(o.newReplicaMs >= 0, 'a replica added while the bad pod is in place reached the slice');
    assert.ok(o.recoveredMs >= 0);
    guarded('bad addresses', r);
  });

  void test("tenant: a newline in network-status' interface never reaches ip; the sidecar says so and follows its Service once it is restored", { timeout: 400_000 }, async () => {
    assert.ok(tenant, 'after the tenant setup');
    const o: SmuggledInterface = { annotated: undefined, events: [], smuggled: [], metrics: [], ready: false, sidecarRestarts: -1, followsAfterMs: -1 };
    const r = await guard(node, log, smuggledInterface(node, tenant, o));
    log(`  events: ${o.events.join(' | ')}; smuggled routes: ${o.smuggled.join('; ')}; metrics: ${o.metrics.filter((l) => /invalid|failures/.test(l)).join('; ')}`);
    assert.equal(o.annotated?.code, 0, o.annotated?.stderr);
    assert.deepEqual(o.smuggled, [], `${SMUGGLED_ROUTE} appeared in the pod`);
    assert.ok(
      o.events.some((e) => /interface/.test(e)),
      `an Event says the interface name is bad: ${o.events.join(' | ')}`,
    );
    assert.ok(o.metrics.includes('multus_proxy_sidecar_invalid_pod_annotation{annotation="network-status"} 1'), o.metrics.join('\n'));
    assert.ok(o.ready, 'the pod stays Ready (docs/decisions/0019-pod-ready-while-sidecar-cannot-sync.md)');
    assert.equal(o.sidecarRestarts, 0, 'the sidecar kept running with the bad value');
    assert.ok(o.followsAfterMs >= 0, 'once restored the sidecar follows the Service');
    guarded('smuggled interface', r);
  });

  void test('tenant: an app container gets 403 on list pods, and so does any workload of the enabled namespace', { timeout: 400_000 }, async () => {
    assert.ok(tenant, 'after the tenant setup');
    const o: TokenReach = { statuses: {} };
    const r = await guard(node, log, tokenReach(node, tenant, o));
    log(`  ${JSON.stringify(o.statuses)}`);
    assert.equal(o.statuses['injected app container: list pods'], 403);
    assert.equal(o.statuses['plain pod: list pods'], 403);
    guarded('token reach', r);
  });

  void test('tenant: a workload without the sidecar reads no Services or EndpointSlices', { timeout: 400_000 }, async () => {
    assert.ok(tenant, 'after the tenant setup');
    const o: TokenReach = { statuses: {} };
    const r = await guard(node, log, tokenReach(node, tenant, o));
    assert.equal(o.statuses['plain pod: list services'], 403, 'only the ServiceAccounts of injected pods are bound');
    assert.equal(o.statuses['plain pod: list endpointslices'], 403);
    guarded('token reach', r);
  });

  void test("tenant: a Service naming another namespace's NAD is refused unless its owner allowed it; the other namespace's clients get no rule", { timeout: 400_000 }, async () => {
    assert.ok(tenant, 'after the tenant setup');
    const o: BorrowedNetwork = { created: undefined, events: [], clientRules: [] };
    const r = await guard(node, log, borrowedNetwork(node, tenant, o));
    log(`  created: ${o.created?.code} ${o.created?.stderr.trim()}; events: ${o.events.join(' | ')}; blog client rules: ${o.clientRules.join(' | ')}`);
    assert.deepEqual(o.clientRules, [], "the blog's client programmed the tenant's Service");
    const said = o.created?.code !== 0 ? (o.created?.stderr ?? '') : o.events.join(' | ');
    assert.match(said, /default\/macvlan1/, `a denial or an Event names the NAD it may not use: ${said}`);
    guarded('borrowed network', r);
  });

  void test("tenant: a Service being deleted, kept by the tenant's own finalizer, cannot be re-annotated to the blog's NAD; the blog's client gets no rule", { timeout: 400_000 }, async () => {
    assert.ok(tenant, 'after the tenant setup');
    const o: DeletedReannotated = { patched: undefined, stored: '', clientRules: [] };
    const r = await guard(node, log, deletedServiceReannotated(node, tenant, o));
    log(`  re-annotation: ${o.patched?.code} ${o.patched?.stderr.trim()}; stored ${o.stored}; blog client rules: ${o.clientRules.join(' | ')}`);
    assert.notEqual(o.patched?.code, 0, 'the re-annotation was admitted');
    assert.match(o.patched?.stderr ?? '', /NetworkAttachmentDefinition default\/macvlan1 belongs to another namespace and is not shared/);
    assert.equal(o.stored, 'macvlan1');
    assert.deepEqual(o.clientRules, []);
    guarded('deleted Service re-annotated', r);
  });

  void test('tenant: 3,000 names in one annotation are denied at once with the fix (server-side dry run)', { timeout: 400_000 }, async () => {
    assert.ok(tenant, 'after the tenant setup');
    const o: ManyNames = { dryRun: undefined };
    const r = await guard(node, log, manyNames(tenant, o));
    log(`  dry run: ${o.dryRun?.code} ${o.dryRun?.stderr.slice(-300).trim()}`);
    assert.notEqual(o.dryRun?.code, 0);
    assert.match(o.dryRun?.stderr ?? '', /names 3000 networks, more than the 32 one object may name; name at most 32/);
    guarded('3,000 names', r);
  });

  void test("tenant: an Event forged with escape sequences and a verdict line is printed escaped by the admin's diagnose", { timeout: 400_000 }, async () => {
    assert.ok(tenant, 'after the tenant setup');
    const o: ForgedEvent = { text: '' };
    const r = await guard(node, log, forgedEvent(node, tenant, 'multus-nginx-macvlan', o));
    assert.ok(!o.text.includes('\x1b'), 'an ESC byte reached the terminal');
    assert.equal(o.text.split('\n').filter((l) => l.startsWith('verdict:')).length, 1, o.text);
    assert.match(o.text, /\\x1b\]0;owned\\x07/);
    guarded('forged Event', r);
  });

  // The two attacks under a lowered per-network cap share it: one webhook rollout to lower it, one
  // (in the fair share's undo) to restore it; each attack keeps its own guard.
  let lowered: LoweredCap | undefined;
  const lowerCap = (): LoweredCap => (lowered ??= loweredCap(node, 3));
  void test('tenant: Services beyond the per-network cap are not served, with an Event and a metric; all are served again once they go', { timeout: 600_000 }, async () => {
    assert.ok(tenant, 'after the tenant setup');
    const o: ServiceFlood = { events: [], dropped: {}, droppedAfter: {} };
    const r = await guard(node, log, serviceFlood(node, tenant, o, lowerCap()));
    log(`  events: ${o.events.join(' | ')}; dropped ${JSON.stringify(o.dropped)}, after ${JSON.stringify(o.droppedAfter)}`);
    // The tenant's blog Service and 5 more on tenant-a/macvlan1, 3 served.
    assert.equal(o.dropped[`{network="${TENANT_NS}/macvlan1"}`], 3, JSON.stringify(o.dropped));
    assert.ok(
      o.events.some((e) => e.includes(`${TENANT_NS}/macvlan1`) && e.includes('maxServicesPerNetwork')),
      `a ServiceCapReached Event names the network and the setting: ${o.events.join(' | ')}`,
    );
    assert.equal(o.droppedAfter[`{network="${TENANT_NS}/macvlan1"}`], 0);
    guarded('Service flood', r);
  });

  void test(
    `tenant: fair share: ${AAA_NS} (sorting first) fills the blog network's lowered cap and loses only its own Services; ServiceCapReached names ${AAA_NS}; the blog client is served`,
    { timeout: 600_000 },
    async () => {
      assert.ok(tenant, 'after the tenant setup');
      const aaa = await tenantNamespace(node, AAA_NS);
      const o: FairShare = { events: [], dropped: {}, served: [] };
      const r = await guard(node, log, fairShare(node, aaa, o, lowerCap()));
      log(`  events: ${o.events.join(' | ').slice(0, 800)}; dropped ${JSON.stringify(o.dropped)}; served of ${AAA_NS}: ${o.served.join(', ')}`);
      const net = '{network="default/macvlan1"}';
      // The blog's own Service (1 port) and five of aaa-tenant's on a cap of 3: aaa-tenant keeps 2.
      assert.equal(o.dropped[net], 3, JSON.stringify(o.dropped));
      assert.equal(o.served.length, 2, `the blog client serves two of ${AAA_NS}'s Services: ${o.served.join(', ')}`);
      assert.ok(
        o.events.some((e) => e.includes(`namespace ${AAA_NS} asks for 5, over its fair share of 2`)),
        `ServiceCapReached names ${AAA_NS}: ${o.events.join(' | ')}`,
      );
      assert.ok(!o.events.some((e) => e.includes('namespace default asks')), 'the blog namespace was named as over its share');
      guarded('fair share', r);
    },
  );

  void test(
    'tenant: with the optional policies installed, a privileged container and a forged network-status are refused; the injected client is admitted and its app gets 403 on list pods',
    { timeout: 600_000 },
    async () => {
      assert.ok(tenant, 'after the tenant setup');
      const o: OptionalPolicies = { privileged: '', forgedStatus: '', clientReady: false, listPods: 0 };
      const r = await guard(node, log, optionalPolicies(node, tenant, o));
      log(`  privileged: ${o.privileged.trim()}; forged status: ${o.forgedStatus.trim()}; client Ready ${String(o.clientReady)}; list pods ${o.listPods}`);
      assert.match(o.privileged, /multus-proxy-sidecar-pod-security/, 'the refusal names the policy');
      assert.match(o.privileged, /privileged/i);
      assert.match(o.forgedStatus, /k8s\.v1\.cni\.cncf\.io\/network-status/);
      assert.match(o.forgedStatus, new RegExp(`not by ${TENANT_USER}\\b`), 'the refusal names who tried');
      assert.equal(o.clientReady, true, 'the injected sidecar is admitted and Multus may still write the status');
      assert.equal(o.listPods, 403);
      guarded('optional policies', r);
    },
  );

  // Objects over a budget per object, with the node agent serving the blog's network beside the sidecars.
  let agentUp = false;
  const overBudget = (name: string, o: OverBudgetService, denial: RegExp, budget: string): void => {
    log(
      `  annotated: ${o.annotated?.code} ${o.annotated?.stderr.slice(0, 300).trim()}; label only: ${o.labelOnly?.code}; client events: ${o.clientEvents.join(' | ').slice(0, 600)}; Service events: ${o.serviceEvents.join(' | ').slice(0, 600)}; refused ${JSON.stringify(o.refused)}`,
    );
    assert.notEqual(o.annotated?.code, 0, 'the webhook admitted the annotated Service');
    assert.match(o.annotated?.stderr ?? '', denial);
    assert.ok(
      o.clientEvents.some((e) => e.startsWith(`Pod/${CLIENT}: `) && e.includes(`Service ${TENANT_NS}/${name} `)),
      `a ServiceOverBudget Event on the blog's client names ${name}: ${o.clientEvents.join(' | ')}`,
    );
    assert.ok((o.refused[`{budget="${budget}"}`] ?? 0) >= 1, `services_refused{budget="${budget}"}: ${JSON.stringify(o.refused)}`);
    assert.ok(
      o.serviceEvents.some((e) => e.startsWith('ServiceOverBudget: ') && e.includes(`${TENANT_NS}/${name}`)),
      `the node agent's ServiceOverBudget Event on the Service: ${o.serviceEvents.join(' | ')}`,
    );
    assert.deepEqual(o.clientRules, [], "the blog's client programmed the Service");
  };

  void test('tenant: the admin installs the node agent on the blog network, so that it meets the objects below too', { timeout: 400_000 }, async () => {
    assert.ok(tenant, 'after the tenant setup');
    log(`  node agent installed, ${await installAgent(node)} holds the admin's node address`);
    agentUp = true;
  });

  // With the agent the test above installed, serving the blog's network for the admin.
  void test("tenant: a NAD's node-address-range never reaches the host: another namespace's address, a /15, the node's bridge as master", { timeout: 600_000 }, async () => {
    assert.ok(tenant && agentUp, 'after the tenant setup, with the agent');
    const o: AgentAttack = { victim: '', routeGet: [], events: [], annotated: [] };
    const r = await guard(node, log, nadReachesHost(node, tenant, o));
    log(`  victim ${o.victim}; ip route get: ${o.routeGet.join(' | ')}; events: ${o.events.join(' | ')}`);
    for (const a of o.annotated) assert.equal(a.code, 0, `the NAD's owner may write it: ${a.stderr}`);
    for (const g of o.routeGet) assert.doesNotMatch(g, /^local /, `the host took ${o.victim} as its own`);
    assert.ok(
      o.events.some((e) => e.includes('node-address-range')),
      `an Event says the NAD's node-address-range is not used: ${o.events.join(' | ')}`,
    );
    guarded('NAD reaches the host', r);
  });

  void test(
    'tenant: a Service of 5,000 ports is denied by the webhook, and label only refused whole by every sidecar and the node agent (Event, metric); no OOM, blog client served',
    { timeout: 400_000 },
    async () => {
      assert.ok(tenant && agentUp, 'after the tenant setup, with the agent');
      const o = emptyOverBudget();
      const r = await guard(node, log, manyPorts(node, tenant, o));
      overBudget('ports5k', o, /lists 5000 ports, more than the 256/, 'ports');
      guarded('5,000 ports', r);
    },
  );

  void test('tenant: a LoadBalancer with 40,000 source ranges is denied by the webhook, and label only refused whole by every sidecar and the node agent', { timeout: 400_000 }, async () => {
    assert.ok(tenant && agentUp, 'after the tenant setup, with the agent');
    const o = emptyOverBudget();
    const r = await guard(node, log, manySourceRanges(node, tenant, o));
    overBudget('ranges40k', o, /loadBalancerSourceRanges.*lists more than 256 ranges/, 'source-ranges');
    guarded('40,000 source ranges', r);
  });

  void test('tenant: a Service of about 1 MiB of labels with only the proxy-name label (never sent to the webhook) is slimmed on entry and served by nobody', { timeout: 400_000 }, async () => {
    assert.ok(tenant && agentUp, 'after the tenant setup, with the agent');
    const o: BigLabels = { created: undefined, bytes: 0, clientRules: [] };
    const r = await guard(node, log, bigLabels(node, tenant, o));
    log(`  ${o.bytes} bytes created: ${o.created?.code}; blog client rules: ${o.clientRules.join(' | ')}`);
    assert.ok(o.bytes > 900_000, `${o.bytes} bytes`);
    assert.deepEqual(o.clientRules, []);
    guarded('1 MiB of labels', r);
  });

  void test('tenant: a NAD of 1.4 MiB named by its Service: an Event names the NAD, nobody keeps it whole', { timeout: 400_000 }, async () => {
    assert.ok(tenant && agentUp, 'after the tenant setup, with the agent');
    const o: BigNad = { created: undefined, bytes: 0, events: [] };
    const r = await guard(node, log, bigNad(tenant, o));
    log(`  ${o.bytes} bytes of config; events: ${o.events.join(' | ').slice(0, 800)}`);
    assert.ok(o.bytes > 1_400_000);
    assert.ok(
      o.events.some((e) => e.includes(`${TENANT_NS}/big`) && /65536|64 KiB/.test(e)),
      `a Warning Event names the NAD and its bound: ${o.events.join(' | ').slice(0, 800)}`,
    );
    guarded('1.4 MiB NAD', r);
  });

  void test('tenant: the node agent goes as the documented uninstall says', { timeout: 400_000 }, async () => {
    if (agentUp) await uninstallAgent(node, log);
    agentUp = false;
  });

  void test(
    "tenant: ten pods with a 250 KiB network-status do not stall the controller: its lease is renewed by the same holder, other namespaces' slices follow, an Event names the pods",
    { timeout: 400_000 },
    async () => {
      assert.ok(tenant, 'after the tenant setup');
      const o: BigNetworkStatus = { leaseBefore: undefined, leaseAfter: undefined, events: [], bytes: 0 };
      const r = await guard(node, log, bigNetworkStatus(node, tenant, o));
      log(`  ${o.bytes} bytes each; lease ${JSON.stringify(o.leaseBefore)} -> ${JSON.stringify(o.leaseAfter)}; events: ${o.events.join(' | ').slice(0, 600)}`);
      assert.ok(o.leaseBefore && o.leaseAfter, 'the controller holds its Lease');
      assert.equal(o.leaseAfter.holder, o.leaseBefore.holder, 'the lease changed hands');
      assert.equal(o.leaseAfter.transitions, o.leaseBefore.transitions, 'the lease changed hands');
      assert.ok(Date.parse(o.leaseAfter.renewTime) > Date.parse(o.leaseBefore.renewTime), 'the lease was renewed meanwhile');
      assert.ok(
        o.events.some((e) => e.startsWith('NetworkStatusInvalid: ') && e.includes(`Pod ${TENANT_NS}/bigstatus-`)),
        `NetworkStatusInvalid names a pod: ${o.events.join(' | ').slice(0, 600)}`,
      );
      guarded('250 KiB network-status', r);
    },
  );

  void test('tenant: cleanup: its namespaces go', { timeout: 400_000 }, async () => {
    // A no-op when the fair share restored the cap; not when it failed or was not selected.
    await lowered?.restore();
    await cleanupTenant(node);
  });

  void test(
    'node agent as a DaemonSet from the image: a client on the far end of ens4 reaches the blog pods through the node port (Cluster masquerades, Local keeps the client address); a hostNetwork pod reaches the blog Service by name; the documented uninstall leaves nothing on the host',
    { timeout: 600_000 },
    async () => {
      assert.ok(blog, 'runs after the blog scenario, with its pods in place');
      const o = await runNodePort(node, log, 30);
      assert.ok(o.backends.length >= 2, `backends: ${o.backends.join(', ')}`);
      assert.match(o.agentInterface, /^mpxh/);
      assert.ok(o.nodePorts.cluster >= 30000 && o.nodePorts.local >= 30000, JSON.stringify(o.nodePorts));
      assert.deepEqual(o.cluster.curls, Array(30).fill('ok'));
      for (const [p, c] of Object.entries(o.cluster.answeredBy)) assert.ok(c > 0, `${p} answered none of 30 (Cluster): ${JSON.stringify(o.cluster.answeredBy)}`);
      assert.equal(
        Object.values(o.cluster.answeredBy).reduce((a, b) => a + b, 0),
        30,
      );
      assert.deepEqual(o.cluster.sources, [NODE_ADDRESS], 'Cluster masquerades to the node address on the network');
      assert.deepEqual(o.local.curls, Array(30).fill('ok'));
      for (const [p, c] of Object.entries(o.local.answeredBy)) assert.ok(c > 0, `${p} answered none of 30 (Local): ${JSON.stringify(o.local.answeredBy)}`);
      assert.equal(
        Object.values(o.local.answeredBy).reduce((a, b) => a + b, 0),
        30,
      );
      assert.deepEqual(o.local.sources, [CLIENT_ADDRESS], "Local keeps the client's address");
      assert.deepEqual(o.hostNetwork.curls, Array(10).fill('ok'), 'a hostNetwork pod reaches the Service by name through the agent');
      assert.deepEqual(o.hostNetwork.sources, [NODE_ADDRESS], "its requests leave from the node's address on the network");
      assert.deepEqual(o.leftAfterCleanup, [], 'the documented uninstall (--cleanup, then delete) leaves no agent link, rule or route');
    },
  );

  void test(
    "MetalLB built from its Go module and installed from its own manifest: it assigns from the pool on the blog's network to a Service labelled for multus-proxy, announces it on ens4 only (ARP answered with ens4's MAC) and withdraws it with the Service; kube-proxy writes no rule for the address",
    { timeout: 600_000 },
    async () => {
      assert.ok(blog, 'runs after the blog scenario, with its pods in place');
      const o = await runMetalLB(node, log);
      const last = (ip: string): number => Number(ip.split('.')[3]);
      const { pool } = o.install;
      assert.ok(last(o.assign.vip) >= last(pool.first) && last(o.assign.vip) <= last(pool.last) && o.assign.vip.startsWith('10.1.1.'), `${o.assign.vip} is from the pool ${pool.first}-${pool.last}`);
      assert.deepEqual(o.assign.announcers, [{ node: NODE.name, interfaces: [NODE.parent] }], "MetalLB's ServiceL2Status: this node, on ens4 only");
      assert.equal(o.assign.arpMac, o.assign.ens4Mac, "a host on ens4's segment resolves the address to ens4");
      assert.deepEqual(o.assign.kubeProxyRules, [], 'kube-proxy wrote no rule for the address of a Service labelled for multus-proxy');
      assert.deepEqual(o.assign.afterDelete, { announcers: 0, arpMac: undefined }, 'the Service deleted: no announcement, no ARP answer');
      assert.deepEqual(o.leftAfterUninstall, [], 'MetalLB uninstalled: no CRD, no namespace');
    },
  );

  void test(
    "LoadBalancer with MetalLB and the node agent: from ens4's segment the address answers with equal shares (chi-square), Local keeps the client's address and its health check answers the local count, loadBalancerSourceRanges refuses another source, the blog's client reaches the address through its sidecar; MetalLB announces a Local Service only while it has a local backend",
    { timeout: 900_000 },
    async () => {
      assert.ok(blog, 'runs after the blog scenario, with its pods in place');
      const o = await runLoadBalancer(node, log, 100);
      const names = Object.keys(o.backends);
      assert.ok(names.length >= 2, `backends: ${JSON.stringify(o.backends)}`);
      assert.deepEqual(o.cluster.curls, Array(100).fill('ok'), 'every request through the Cluster address answered');
      assert.equal(
        Object.values(o.cluster.answeredBy).reduce((a, b) => a + b, 0),
        100,
      );
      assert.ok(
        o.cluster.chiSquare.uniform,
        `equal shares: ${JSON.stringify(o.cluster.answeredBy)}, chi-square ${o.cluster.chiSquare.statistic.toFixed(2)} > ${o.cluster.chiSquare.critical} (α 0.001)`,
      );
      assert.deepEqual(o.cluster.sources, [NODE_ADDRESS], 'Cluster masquerades to the node address on the network');
      assert.deepEqual(o.local.curls, Array(30).fill('ok'));
      assert.deepEqual(o.local.sources, [LB_CLIENT], "Local keeps the client's address");
      assert.equal(o.health.status, 200, `health check: ${o.health.body}`);
      assert.equal((JSON.parse(o.health.body) as { localEndpoints: number }).localEndpoints, names.length, `the local count: ${o.health.body}`);
      assert.deepEqual(o.ranges.admitted, Array(10).fill('ok'), 'the source inside loadBalancerSourceRanges is served');
      assert.ok(
        o.ranges.outsider.every((c) => c !== 'ok'),
        `a source outside loadBalancerSourceRanges is refused: ${o.ranges.outsider.join(' ')}`,
      );
      assert.deepEqual(o.sidecar.curls, Array(20).fill('ok'), 'the blog client reaches the address');
      assert.deepEqual(o.sidecar.sources, [o.sidecar.clientNet1], "through its sidecar, straight to a backend: the backends see the client's own net1 address");
      assert.deepEqual(o.announced, { local: [`${NODE.name}/${NODE.parent}`], nobody: [] }, "MetalLB's Local choice follows our slices");
    },
  );

  void test(
    "LoadBalancer over IPv6: an IPv6 network on ens4, MetalLB's IPv6 pool announced by NDP on ens4, Services with ipFamilies [IPv6]; from ens4's segment the IPv6 address answers through the node agent with equal shares (chi-square), Local keeps the client's IPv6 address and its health check answers on the node's IPv6 address; a client pod reaches the IPv6 address through its sidecar",
    { timeout: 900_000 },
    async () => {
      checkLoadBalancerV6(await runLoadBalancerV6(node, log, 100));
    },
  );

  void test(
    "native sidecar under a real kubelet: the app's first request at start succeeds; crictl stop restarts only the sidecar; zero failures through three graceful stops; deletion is quick",
    { timeout: 900_000 },
    async () => {
      const o = await runSidecar(node, log);
      assert.equal(o.firstTry, 'FIRST-TRY-OK', "the app started after the sidecar's first sync");
      assert.equal(o.restarts.length, 3);
      o.restarts.forEach((r, i) => {
        assert.equal(r.sidecar, i + 1, 'the kubelet restarted the sidecar');
        assert.equal(r.app, 0, 'the app container was never restarted');
      });
      log(`client loop through 3 sidecar stops: ${o.loop.ok} ok, ${o.loop.failed} failed ${o.loop.failures.join(' ')}`);
      assert.ok(o.loop.ok > 50, `the loop ran (${o.loop.ok} ok)`);
      assert.equal(o.loop.failed, 0, `failed requests: ${o.loop.failures.join(', ')}`);
      assert.ok(o.deleteMs < 30_000, `pod deletion took ${o.deleteMs} ms: the sidecar did not exit within the grace period`);
    },
  );

  void test('headless Service over a StatefulSet with real CoreDNS: the name answers only net1 addresses, web-0.<svc> its own, SRV for the named port', { timeout: 600_000 }, async () => {
    const o = await runHeadless(node);
    const net1 = Object.values(o.net1).sort();
    assert.equal(net1.length, 2);
    assert.deepEqual(o.slice, net1);
    assert.deepEqual(o.serviceA, net1, `A records of the Service (eth0 addresses are ${o.eth0.join(', ')})`);
    for (const a of o.eth0) assert.ok(!o.serviceA.includes(a));
    assert.deepEqual(o.web0A, [o.net1['web-0']]);
    assert.equal(o.srv.length, 2, o.srv.join('\n'));
    for (const line of o.srv) assert.match(line, /^\d+ \d+ 80 web-[01]\.web\.headless-check\.svc\.cluster\.local\.$/);
  });

  void test(
    "net-service-controller's sample: a NetService with netAttachDef core over a Deployment attaching networks/core as interface core resolves by name through CoreDNS to the core addresses",
    { timeout: 600_000 },
    async () => {
      const o = await runNetService(node);
      assert.equal(o.core.length, 2);
      for (const a of o.core) assert.match(a, /^10\.3\.3\.\d+$/);
      assert.deepEqual(o.answer, o.core, `corens answers the core addresses (eth0: ${o.eth0.join(', ')})`);
      assert.equal(o.ready, 'True');
    },
  );

  void test('uninstall as the README says leaves nothing of the project: webhook configurations, RBAC, slices, CRDs, labelled objects', { timeout: 600_000 }, async () => {
    assert.ok(blog, 'runs after the blog scenario, with its Service and slices in place');
    assert.ok((await sliceAddresses(node, 'default', 'multus-nginx-macvlan')).length > 0);
    // Installed last as the bootstrap overlay plus the NetService component (test above).
    await uninstall(node, { deleteInstall: `${buildOverlay(netServiceOverlay(node))} | kubectl delete --ignore-not-found -f -` });
    assert.deepEqual(await projectLeftovers(node), []);
    assert.equal((await node.kubectlResult(['get', 'crd', 'netservices.svcctl.metaswitch.com'], { allowFail: true })).code, 1, 'the NetService CRD is gone');
    await cleanupBlog(node);
  });

  void test(
    'default install with a real cert-manager: kubectl apply -k deploy/, the webhook serves the issued certificate, a forced renewal is picked up with no failed admission',
    { timeout: 900_000 },
    async () => {
      const o = await runCertManager(node, log);
      assert.equal(o.servedBefore, o.secretBefore, 'the webhook serves the certificate cert-manager issued');
      assert.notEqual(o.secretAfter, o.secretBefore, 'cert-manager issued a new certificate');
      assert.equal(o.servedAfter, o.secretAfter, 'the webhook serves the renewed certificate');
      assert.ok(o.pickedUpMs > 0, 'picked up within 240 s');
      assert.equal(o.admissions.failed, 0, o.admissions.failures.join('\n'));
      assert.ok(o.admissions.ok >= 5, `admissions ran across the renewal (${o.admissions.ok})`);
      await uninstall(node, 'default');
      assert.deepEqual(await projectLeftovers(node), []);
    },
  );

  void test('helm: OCI install, blog scenario, upgrade under 10 req/s without a lost request, uninstall leaves nothing', { timeout: 1_200_000 }, async () => {
    await runHelmLife(node, (m) => log(`helm: ${m}`));
  });

  void test('teardown leaves no process, interface, mount, iptables rule, cgroup, path or sysctl behind', { timeout: 300_000 }, async () => {
    const t0 = Date.now();
    const left = await node.stop();
    log(`teardown took ${Date.now() - t0} ms`);
    assert.deepEqual(left, []);
  });
});
