/**
 * The demo's scenario as a test: the same module `npm run demo` runs (test/e2e/scenario.ts),
 * with every printed observation asserted.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GREETING, runScenario, type Answer } from './scenario.js';
import { PROXY_NAME } from '../../src/keys.js';

function counts(as: readonly Answer[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const a of as) m.set(a.backend ?? 'failed', (m.get(a.backend ?? 'failed') ?? 0) + 1);
  return m;
}

void test('classic demo: webhook injects, controller publishes secondary IPs, sidecar load-balances ClusterIP over net1', { timeout: 300_000 }, async () => {
  const steps: string[] = [];
  const lines: string[] = [];
  const o = await runScenario({ step: (t) => steps.push(t), info: (t) => lines.push(t) });

  // The webhook defaulted the Service's proxy-name label and injected a least-privilege native sidecar.
  assert.equal(o.serviceLabel, PROXY_NAME);
  assert.equal(o.sidecar.native, true, 'kube-apiserver 1.34 supports native sidecars; mode auto must pick them');
  assert.deepEqual([...o.sidecar.capabilities].sort(), ['NET_ADMIN', 'NET_RAW']);
  assert.equal(o.sidecar.privileged, false);
  assert.match(o.clusterIP, /^10\.96\./);

  // Two backends: all 20 requests answered by the real backends, both used, client's net1 address seen.
  const all = [...o.initial, ...o.scaled, ...o.afterUnready];
  for (const a of all) {
    assert.equal(a.error, undefined, `a request failed: ${a.error ?? ''}`);
    assert.equal(a.body, GREETING);
    assert.equal(a.seenSource, o.clientNet1, "the backend must see the client pod's secondary address");
  }
  assert.equal(o.initial.length, 20);
  assert.deepEqual([...counts(o.initial).keys()].sort(), ['backend1', 'backend2']);

  // Scaled to three: backend3 joins (20 requests over 3 backends miss one with p ≈ 3·(2/3)^20 ≈ 0.1%).
  assert.ok(counts(o.scaled).has('backend3'), `backend3 never answered: ${JSON.stringify([...counts(o.scaled)])}`);

  // backend1 unready: it leaves the rotation, the other two serve.
  assert.equal(counts(o.afterUnready).get(o.unreadyBackend), undefined);
  assert.deepEqual([...counts(o.afterUnready).keys()].sort(), ['backend2', 'backend3']);
  assert.deepEqual(o.sliceAddresses, [o.backendNet1['backend2'], o.backendNet1['backend3']].sort());

  // The rules, from the default back end (nftables, which this machine supports): the nat output
  // hook's one verdict-map lookup, clusterIP . tcp . 80 in the map, its endpoint map holding the two backends ready when the client started.
  const table = o.natRules.join('\n');
  assert.match(table, /type nat hook output priority -100;[^]*ip daddr \. meta l4proto \. th dport vmap @services-v4/, table);
  assert.ok(
    o.natRules.some((l) => l.includes(`${o.clusterIP} . tcp . 80 : goto MPX-SVC-`)),
    table,
  );
  assert.match(table, /dnat ip to numgen random mod 4294967295 map @MPX-EPS-/, table);
  for (const b of ['backend1', 'backend2'])
    assert.ok(
      o.natRules.some((l) => l.includes(` : ${o.backendNet1[b]} . 80`)),
      `${b}: ${table}`,
    );
  // The denial names the object, the key, the bad value and the fix.
  assert.match(o.denial, /Pod default\/bad-client/);
  assert.match(o.denial, /k8s\.v1\.cni\.cncf\.io\/service-network/);
  assert.match(o.denial, /macvlan2/);
  assert.match(o.denial, /k8s\.v1\.cni\.cncf\.io\/networks/);

  // What the demo prints is what happened: one line per request, and the per-round tallies.
  const requestLines = lines.filter((l) => /^\s+#\s?\d+\s/.test(l));
  assert.equal(requestLines.length, 60);
  all.forEach((a, i) => assert.ok(requestLines[i]?.includes(a.backend ?? 'failed'), `line ${i + 1} does not name ${a.backend ?? ''}: ${requestLines[i] ?? ''}`));
  const tallies = lines.filter((l) => l.includes('answers by backend:'));
  assert.equal(tallies.length, 3);
  assert.ok(steps.some((s) => s.startsWith('Cleaning up')));
});
