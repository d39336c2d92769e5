/**
 * Pure rendering and planning: golden files for the full restore text, and the partial-vs-full
 * decisions. Regenerate the golden files with UPDATE_GOLDEN=1 (review the diff before committing).
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { golden as sharedGolden } from '../harness/golden.js';
import { DISPATCH_CHAIN, JUMP_SPEC, MAX_CHAIN_NAME, REJECT_CHAIN, SIDECAR_LAYOUT, base32, recentListName, serviceChainName } from '../../src/dataplane/core/names.js';
import { NOTHING_EXISTING, editSetChain, existingFromApplied, parseExisting, planCleanup, planRestore } from '../../src/dataplane/iptables/restore.js';
import { RenderCache, render as renderShared } from '../../src/dataplane/core/incremental.js';
import { withIptables } from '../harness/property.js';
import { chooseEndpoints } from '../../src/dataplane/core/endpoints.js';
import { probability } from '../../src/dataplane/iptables/render.js';
import { diffRoutes, parseRoutes, routeBatch } from '../../src/dataplane/core/routes.js';
import { conntrackArgs, planConntrack } from '../../src/dataplane/core/conntrack.js';
import { failedLine } from '../../src/dataplane/tuning/spare-exec.js';
import { lineContext, summarize } from '../../src/dataplane/core/exec.js';
import type { DesiredState } from '../../src/dataplane/core/model.js';
import type { IptablesRules } from '../../src/dataplane/iptables/rulesets.js';
import { IptablesStage } from '../../src/dataplane/iptables/stage.js';
import { BLUE, CLIENT_BLUE, RED, SHAPE_STATES, ep, sampleState, target } from './render-fixtures.js';

/** The sidecar's golden files live in test/golden/sidecar. */
const golden = (name: string, actual: string): void => sharedGolden('sidecar', name, actual);

/** The shared render with the iptables back end's rulesets beside it (this file tests their text). */
const render = (state: DesiredState, cache?: RenderCache): ReturnType<typeof withIptables> => withIptables(renderShared(state, cache));

function withTargets(state: DesiredState, targets: DesiredState['targets']): DesiredState {
  return { ...state, targets };
}

void describe('sidecar render: golden files', () => {
  const r = render(sampleState());
  void test('full restore text into a fresh namespace, IPv4 and IPv6', () => {
    golden('sample.v4.rules', planRestore(r.v4, undefined, NOTHING_EXISTING, true).text);
    golden('sample.v6.rules', planRestore(r.v6, undefined, NOTHING_EXISTING, true).text);
  });
  void test('routes', () => {
    golden('sample.routes', routeBatch(r.routes, 'replace'));
  });
  void test('partial text after one endpoint left demo/web (v4)', () => {
    const s = sampleState();
    const changed = withTargets(
      s,
      s.targets.map((t) => (t.service === 'demo/web' && t.family === 4 ? { ...t, endpoints: t.endpoints.filter((e) => e.ip !== '192.168.101.5') } : t)),
    );
    const next = render(changed);
    golden('sample-endpoint-removed.v4.rules', planRestore(next.v4, r.v4, undefined, false).text);
  });
  void test('the sample is deterministic whatever the input order', () => {
    const s = sampleState();
    const shuffled = render(
      withTargets(
        s,
        [...s.targets].reverse().map((t) => ({ ...t, endpoints: [...t.endpoints].reverse() })),
      ),
    );
    assert.equal(planRestore(shuffled.v4, undefined, NOTHING_EXISTING, true).text, planRestore(r.v4, undefined, NOTHING_EXISTING, true).text);
    assert.equal(planRestore(shuffled.v6, undefined, NOTHING_EXISTING, true).text, planRestore(r.v6, undefined, NOTHING_EXISTING, true).text);
  });
});

/** One golden file per rule shape the renderer writes, each from the smallest state that shows it. */
void describe('sidecar render: golden files per rule shape', () => {
  const full = (state: DesiredState, family: 4 | 6): string => planRestore(render(state)[family === 4 ? 'v4' : 'v6'], undefined, NOTHING_EXISTING, true).text;
  void test('session affinity on a Service with several ports', () => {
    const eps = (port: number) => [ep('192.168.101.3', port), ep('192.168.101.4', port), ep('192.168.101.5', port)];
    const state: DesiredState = {
      interfaces: [CLIENT_BLUE],
      targets: [
        target('demo/sticky', '10.96.1.10', 80, eps(8080), { portName: 'http', affinityTimeoutSeconds: 600 }),
        target('demo/sticky', '10.96.1.10', 443, eps(8443), { portName: 'https', affinityTimeoutSeconds: 600 }),
        target('demo/sticky', '10.96.1.10', 53, eps(5353), { portName: 'dns', protocol: 'UDP', affinityTimeoutSeconds: 600 }),
      ],
    };
    golden('shape-affinity-ports.v4.rules', full(state, 4));
  });
  void test('a dual-stack Service: one chain and one route per family', () => {
    const state = SHAPE_STATES['shape-dual-stack'];
    golden('shape-dual-stack.v4.rules', full(state, 4));
    golden('shape-dual-stack.v6.rules', full(state, 6));
    golden('shape-dual-stack.routes', routeBatch(render(state).routes, 'replace'));
  });
  void test('LoadBalancer ingress IPs: matched like a cluster IP, each with its own chain and route, comment names them', () => {
    const state = SHAPE_STATES['shape-load-balancer'];
    golden('shape-load-balancer.v4.rules', full(state, 4));
    golden('shape-load-balancer.v6.rules', full(state, 6));
    golden('shape-load-balancer.routes', routeBatch(render(state).routes, 'replace'));
  });
  void test('SCTP, with and without endpoints, both families', () => {
    const state = SHAPE_STATES['shape-sctp'];
    golden('shape-sctp.v4.rules', full(state, 4));
    golden('shape-sctp.v6.rules', full(state, 6));
  });
  void test('terminating-only endpoints: serving ones get traffic; none serving: reject', () => {
    const state = SHAPE_STATES['shape-terminating-only'];
    golden('shape-terminating-only.v4.rules', full(state, 4));
  });
  void test('several networks: each Service leaves through its own interface; a cluster IP on two networks is served once', () => {
    const state = SHAPE_STATES['shape-networks'];
    const r = render(state);
    golden('shape-networks.v4.rules', full(state, 4));
    golden('shape-networks.routes', routeBatch(r.routes, 'replace'));
    assert.deepEqual(
      r.resolution.skipped.map((s) => s.target),
      ['demo/both:80/TCP (10.96.1.52)'],
      'the second network of a cluster IP is skipped',
    );
  });
  void test('partial sync: a Service added, one removed, one endpoint changed, one Service lost its last endpoint', () => {
    const before = sampleState();
    const after = withTargets(before, [
      ...before.targets
        .filter((t) => t.service !== 'demo/sig')
        .map((t) => (t.service === 'demo/web' && t.family === 4 ? { ...t, endpoints: [...t.endpoints, ep('192.168.101.9', 8080)] } : t.service === 'demo/dns' ? { ...t, endpoints: [] } : t)),
      target('demo/new', '10.96.0.60', 8080, [ep('192.168.101.3', 8080)]),
    ]);
    const plan = planRestore(render(after).v4, render(before).v4, undefined, false);
    assert.equal(plan.full, false);
    golden('shape-partial-sync.v4.rules', plan.text);
  });
});

void describe('sidecar render: cache', () => {
  void test('a cached render equals an uncached one, reuses unchanged chains and redoes changed ones', () => {
    const cache = new RenderCache();
    // The iptables back end's stage, as it runs: its memo of each resolved target's lines.
    const stage = new IptablesStage(SIDECAR_LAYOUT);
    const renderCached = (state: DesiredState): IptablesRules => stage.step(renderShared(state, cache));
    const s = sampleState();
    const first = renderCached(s);
    const changed = withTargets(
      s,
      s.targets.map((t) => (t.service === 'demo/web' && t.family === 4 ? { ...t, endpoints: t.endpoints.map((e) => ({ ...e, ready: !e.ready })) } : { ...t })),
    );
    const second = renderCached(changed);
    const fresh = render(changed);
    assert.deepEqual([...second.v4.nat.entries()], [...fresh.v4.nat.entries()]);
    assert.deepEqual([...second.v6.nat.entries()], [...fresh.v6.nat.entries()]);
    assert.deepEqual([...second.v4.filter.entries()], [...fresh.v4.filter.entries()]);
    const web = serviceChainName({ service: 'demo/web', portName: 'http', protocol: 'TCP', family: 4, clusterIP: '10.96.0.10' });
    const dns = serviceChainName({ service: 'demo/dns', portName: 'dns', protocol: 'UDP', family: 4, clusterIP: '10.96.0.53' });
    assert.notEqual(second.v4.nat.get(web), first.v4.nat.get(web));
    assert.deepEqual(second.v4.nat.get(web), ['-A ' + web + ' -p tcp -j DNAT --to-destination 192.168.101.6:8080']);
    assert.equal(second.v4.nat.get(dns), first.v4.nat.get(dns), 'an unchanged target (a new but equal object) is not re-rendered');
    // Entries of targets that disappeared are dropped after one more render.
    render(withTargets(s, []), cache);
    render(withTargets(s, []), cache);
    assert.equal(cache.size, 0);
  });
});

void describe('sidecar render: names', () => {
  void test('chain names: own prefix, at most 28 characters, deterministic, distinct per input', () => {
    const base = { service: 'ns/svc', portName: 'http', protocol: 'TCP' as const, family: 4 as const, clusterIP: '10.96.0.1' };
    const a = serviceChainName(base);
    assert.match(a, /^MPX-SVC-[A-Z2-7]{16}$/);
    assert.ok(a.length <= MAX_CHAIN_NAME);
    assert.equal(serviceChainName({ ...base }), a);
    const variants = [
      { ...base, service: 'ns/svc2' },
      { ...base, portName: 'https' },
      { ...base, protocol: 'UDP' as const },
      { ...base, family: 6 as const },
      { ...base, clusterIP: '10.96.0.2' },
    ].map((t) => serviceChainName(t));
    assert.equal(new Set([a, ...variants]).size, 6);
    for (const n of [DISPATCH_CHAIN, REJECT_CHAIN]) assert.ok(n.length <= MAX_CHAIN_NAME && !n.startsWith('KUBE-') && !n.startsWith('MULTUS-'));
  });
  void test('base32 is RFC 4648', () => {
    assert.equal(base32(Buffer.from('foobar'), 9), 'MZXW6YTBO'); // whole 5-bit groups only; names never need padding
    assert.equal(base32(Buffer.from('fooba'), 8), 'MZXW6YTB');
  });
  void test('recent list names are valid and unique per endpoint', () => {
    const names = new Set<string>();
    for (const chain of ['MPX-SVC-A', 'MPX-SVC-B']) {
      for (const e of [ep('10.0.0.1', 80), ep('10.0.0.1', 81), ep('10.0.0.2', 80)]) names.add(recentListName(chain, e));
    }
    assert.equal(names.size, 6);
    for (const n of names) assert.match(n, /^[A-Z0-9-]{1,28}$/);
  });
});

void describe('sidecar render: endpoint choice and load balancing', () => {
  const none = (): void => undefined;
  void test('ready endpoints win; else serving+terminating; else none', () => {
    const mixed = [ep('10.0.0.2', 80, 'unready'), ep('10.0.0.3', 80, 'terminating'), ep('10.0.0.1', 80)];
    assert.deepEqual(chooseEndpoints(mixed, 4, none, 'x'), { endpoints: [{ ip: '10.0.0.1', port: 80 }], choice: 'ready' });
    assert.deepEqual(chooseEndpoints(mixed.slice(0, 2), 4, none, 'x'), { endpoints: [{ ip: '10.0.0.3', port: 80 }], choice: 'terminating' });
    assert.deepEqual(chooseEndpoints([ep('10.0.0.2', 80, 'unready')], 4, none, 'x'), { endpoints: [], choice: 'none' });
  });
  void test('duplicates merge, bad and wrong-family endpoints are dropped with a message', () => {
    const warnings: string[] = [];
    const got = chooseEndpoints([ep('10.0.0.1', 80, 'unready'), ep('10.0.0.1', 80), ep('fd00::1', 80), ep('10.0.0.300', 80), ep('10.0.0.2', 0)], 4, (m) => warnings.push(m), 'demo/web:80/TCP');
    // Merged to one ready entry: the merged list itself is chosen (conditions and all).
    assert.deepEqual(
      got.endpoints.map(({ ip, port }) => ({ ip, port })),
      [{ ip: '10.0.0.1', port: 80 }],
    );
    assert.equal(warnings.length, 3);
    assert.match(warnings[0] ?? '', /demo\/web:80\/TCP: endpoint "fd00::1" port 80 dropped: not an IPv4 address/);
  });
  void test('every endpoint ready and clean: the chosen list is the input list itself (no copy per target)', () => {
    const input = [ep('10.0.0.1', 80), ep('10.0.0.2', 80)];
    assert.equal(chooseEndpoints(input, 4, () => undefined, 'x').endpoints, input);
    const one = [ep('10.0.0.1', 80), ep('10.0.0.2', 80, 'unready')];
    assert.deepEqual(chooseEndpoints(one, 4, () => undefined, 'x').endpoints, [{ ip: '10.0.0.1', port: 80 }], 'some unready: a list of the chosen');
  });
  void test('clean but out of text order: the same endpoint objects, sorted; a repeat still merges; the description is made only for a message', () => {
    // Numeric order is not text order ("10.0.0.10" < "10.0.0.9"), as bench/lib/services.ts builds them.
    const input = [ep('10.0.0.9', 80), ep('10.0.0.10', 81), ep('10.0.0.10', 80)];
    let described = 0;
    const what = (): string => ((described += 1), 'demo/web:80/TCP');
    const got = chooseEndpoints(input, 4, () => undefined, what).endpoints;
    assert.deepEqual(
      got.map(({ ip, port }) => `${ip}:${port}`),
      ['10.0.0.10:80', '10.0.0.10:81', '10.0.0.9:80'],
    );
    assert.deepEqual(got, [input[2], input[1], input[0]]);
    assert.ok(
      got.every((e, i) => e === input[2 - i]),
      'no copy of an endpoint',
    );
    assert.equal(described, 0);
    const warnings: string[] = [];
    const repeated = chooseEndpoints([ep('10.0.0.9', 80, 'unready'), ep('10.0.0.10', 80), ep('10.0.0.9', 80), ep('bad', 80)], 4, (m) => warnings.push(m), what);
    assert.deepEqual(
      repeated.endpoints.map(({ ip, port }) => `${ip}:${port}`),
      ['10.0.0.10:80', '10.0.0.9:80'],
    );
    assert.equal(described, 1);
    assert.match(warnings[0] ?? '', /^demo\/web:80\/TCP: endpoint "bad" port 80 dropped/);
  });
  void test('probabilities 1/(n-i) give every endpoint an equal share, printed with 10 digits', () => {
    for (const n of [2, 3, 7, 10]) {
      let remaining = 1;
      for (let i = 0; i < n; i += 1) {
        const p = i === n - 1 ? 1 : Number(probability(n, i));
        assert.ok(Math.abs(remaining * p - 1 / n) < 1e-9, `n=${n} i=${i}`);
        remaining *= 1 - p;
      }
    }
    assert.equal(probability(3, 0), '0.3333333333');
  });
  void test('the last DNAT rule is unconditional; affinity adds rcheck rules first and --set on each pick', () => {
    const r = render(sampleState());
    const web = [...r.v4.nat.entries()].find(([, l]) => l.some((x) => x.includes('192.168.101.5:8080')))?.[1] ?? [];
    assert.equal(web.length, 3);
    assert.match(web[0] ?? '', /--probability 0\.3333333333 -j DNAT --to-destination 192\.168\.101\.3:8080$/);
    assert.match(web[1] ?? '', /--probability 0\.5000000000 -j DNAT --to-destination 192\.168\.101\.4:8080$/);
    assert.doesNotMatch(web[2] ?? '', /statistic/);
    const dns = [...r.v4.nat.entries()].find(([, l]) => l.some((x) => x.includes('--rcheck')))?.[1] ?? [];
    assert.equal(dns.length, 4);
    assert.match(dns[0] ?? '', /-m recent --name MPX-\S+ --rcheck --seconds 10800 --reap -j DNAT --to-destination 192\.168\.101\.3:5353/);
    assert.match(dns[2] ?? '', /--probability 0\.5000000000 -m recent --name MPX-\S+ --set -j DNAT/);
    assert.match(dns[3] ?? '', /^-A \S+ -p udp -m recent --name MPX-\S+ --set -j DNAT --to-destination 192\.168\.101\.4:5353$/);
  });
  void test('IPv6 DNAT destinations are bracketed', () => {
    const r = render(sampleState());
    assert.ok([...r.v6.nat.values()].flat().some((l) => l.endsWith('--to-destination [fd00:101::4]:8080')));
  });
});

void describe('sidecar render: which targets are served', () => {
  void test('a Service on a network the pod lacks gets no rules and no route', () => {
    const r = render(sampleState());
    const all = [...r.v4.nat.values(), ...r.v4.filter.values()].flat().join('\n');
    assert.doesNotMatch(all, /10\.96\.0\.50/);
    assert.ok(!r.routes.some((x) => x.dst === '10.96.0.50'));
    assert.deepEqual(
      r.resolution.skipped.map((s) => [s.target, s.level]),
      [['demo/elsewhere:80/TCP (10.96.0.50)', 'info']],
    );
    assert.match(r.resolution.skipped[0]?.reason ?? '', /no interface on network demo\/red/);
  });
  void test('no interface address of the family: skipped', () => {
    const r = render({ interfaces: [{ ...CLIENT_BLUE, ipv6: [] }], targets: [target('demo/a', 'fd00:10:96::5', 80, [ep('fd00:101::3', 80)])] });
    assert.equal(r.resolution.targets.length, 0);
    assert.match(r.resolution.skipped[0]?.reason ?? '', /net1 on network demo\/blue has no IPv6 address/);
  });
  void test('bad targets are skipped with a message naming the value and the fix', () => {
    const r = render({
      interfaces: [CLIENT_BLUE],
      targets: [
        target('demo/a', '10.96.0.300', 80, []),
        target('demo/b', '10.96.0.2', 0, []),
        target('demo/c', '10.96.0.3', 80, [], { affinityTimeoutSeconds: 0 }),
        target('demo/d', '10.96.0.4', 80, [], { protocol: 'ICMP' as never }),
      ],
    });
    assert.equal(r.resolution.targets.length, 0);
    const reasons = r.resolution.skipped.map((s) => s.reason).join('\n');
    assert.match(reasons, /cluster IP "10\.96\.0\.300" is not an IPv4 address/);
    assert.match(reasons, /port 0 is not a number from 1 to 65535/);
    assert.match(reasons, /timeoutSeconds 0 is not a whole number from 1 to 86400/);
    assert.match(reasons, /protocol "ICMP" is not one of TCP, UDP, SCTP/);
  });
  void test('one cluster IP on two networks the pod has: the first network wins, one route', () => {
    const red = { network: RED, interface: 'net2', ipv4: ['192.168.102.2'], ipv6: [] };
    const r = render({
      interfaces: [CLIENT_BLUE, red],
      targets: [target('demo/x', '10.96.0.9', 80, [ep('192.168.102.3', 80)], { network: RED }), target('demo/x', '10.96.0.9', 80, [ep('192.168.101.3', 80)], { network: BLUE })],
    });
    assert.equal(r.resolution.targets.length, 1);
    assert.deepEqual(r.routes, [{ family: 4, dst: '10.96.0.9', dev: 'net1', src: '192.168.101.2' }]);
    assert.match(r.resolution.skipped[0]?.reason ?? '', /already served through network demo\/blue/);
  });
  void test('IPv6 spellings are normalised, so the chain name does not depend on them', () => {
    const a = render({ interfaces: [CLIENT_BLUE], targets: [target('demo/a', 'fd00:10:96:0:0::a', 80, [ep('FD00:101::3', 80)])] });
    const b = render({ interfaces: [CLIENT_BLUE], targets: [target('demo/a', 'fd00:10:96::a', 80, [ep('fd00:101::3', 80)])] });
    assert.deepEqual([...a.v6.nat.entries()], [...b.v6.nat.entries()]);
  });
});

void describe('sidecar render: partial versus full', () => {
  const s = sampleState();
  const base = render(s);
  const full = (state: DesiredState) => render(state);

  void test('nothing changed: empty text', () => {
    const p = planRestore(full(sampleState()).v4, base.v4, undefined, false);
    assert.deepEqual([p.text, p.full, p.changedChains], ['', false, []]);
  });
  void test('one endpoint change rewrites only that Service chain, no dispatch, no filter', () => {
    const next = full(
      withTargets(
        s,
        s.targets.map((t) => (t.service === 'demo/web' && t.family === 4 ? { ...t, endpoints: t.endpoints.slice(1) } : t)),
      ),
    );
    const p = planRestore(next.v4, base.v4, undefined, false);
    assert.equal(p.changedChains.length, 1);
    assert.match(p.changedChains[0] ?? '', /^nat\/MPX-SVC-/);
    assert.doesNotMatch(p.text, /\*filter|MPX-SERVICES|OUTPUT/);
    assert.deepEqual(planRestore(next.v6, base.v6, undefined, false).text, '');
  });
  void test('all endpoints gone: the Service chain empties and a reject rule is added, filter first', () => {
    const next = full(
      withTargets(
        s,
        s.targets.map((t) => (t.service === 'demo/web' && t.family === 4 ? { ...t, endpoints: [] } : t)),
      ),
    );
    const p = planRestore(next.v4, base.v4, undefined, false);
    const web = serviceChainName({ service: 'demo/web', portName: 'http', protocol: 'TCP', family: 4, clusterIP: '10.96.0.10' });
    assert.deepEqual(p.changedChains, ['filter/MPX-REJECT', `nat/${web}`]);
    assert.equal(
      p.text,
      // Inserted at its place, ahead of the cluster IPs' refusals (a port's own rule goes first).
      '*filter\n-I MPX-REJECT 2 -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -m comment --comment "demo/web:http has no endpoints" -j REJECT --reject-with tcp-reset\nCOMMIT\n' +
        `*nat\n:${web} - [0:0]\nCOMMIT\n`,
    );
    // And back: the reject rule is deleted by its spec, the chain refilled.
    const back = planRestore(base.v4, next.v4, undefined, false);
    assert.equal(back.changedChains.length, 2);
    assert.match(back.text, /^\*filter\n-D MPX-REJECT -d 10\.96\.0\.10\/32 .* -j REJECT --reject-with tcp-reset\nCOMMIT\n\*nat\n/);
  });
  void test('a new Service with endpoints: its chain, the dispatch chain and its cluster IP in the reject chain only', () => {
    const next = full(withTargets(s, [...s.targets, target('demo/new', '10.96.0.99', 80, [ep('192.168.101.9', 80)])]));
    const p = planRestore(next.v4, base.v4, undefined, false);
    assert.deepEqual(
      p.changedChains.filter((c) => !c.startsWith('nat/MPX-SVC-')),
      ['filter/MPX-REJECT', 'nat/MPX-SERVICES'],
    );
    assert.equal(p.changedChains.length, 3);
  });
  void test('a new Service without endpoints: its chain, the dispatch chain and the reject chain, filter first', () => {
    const next = full(withTargets(s, [...s.targets, target('demo/new', '10.96.0.99', 80, [])]));
    const p = planRestore(next.v4, base.v4, undefined, false);
    assert.deepEqual(
      p.changedChains.filter((c) => !c.startsWith('nat/MPX-SVC-')),
      ['filter/MPX-REJECT', 'nat/MPX-SERVICES'],
    );
    assert.ok(p.text.indexOf('*filter') < p.text.indexOf('*nat'));
  });
  void test('a removed Service: the refusal of its cluster IP and its dispatch rule are deleted, then its chain flushed and deleted; nothing else', () => {
    const next = full(
      withTargets(
        s,
        s.targets.filter((t) => t.service !== 'demo/sig'),
      ),
    );
    const p = planRestore(next.v4, base.v4, undefined, false);
    const sig = serviceChainName({ service: 'demo/sig', portName: '', protocol: 'SCTP', family: 4, clusterIP: '10.96.0.40' });
    assert.deepEqual(p.deletedChains, [`nat/${sig}`]);
    const unserved = '-D MPX-REJECT -d 10.96.0.40/32 -m comment --comment "cluster IP: a port or protocol it does not serve" -j MPX-UNSERVED';
    assert.equal(
      p.text,
      `*filter\n${unserved}\nCOMMIT\n*nat\n:${sig} - [0:0]\n-D MPX-SERVICES -d 10.96.0.40/32 -p sctp -m sctp --dport 9999 -m comment --comment "demo/sig:9999" -j ${sig}\n-X ${sig}\nCOMMIT\n`,
    );
  });
  void test('a new Service is one appended dispatch rule after its new chain, not a dispatch rewrite', () => {
    const next = full(withTargets(s, [...s.targets, target('demo/new', '10.96.0.99', 80, [ep('192.168.101.9', 80)])]));
    const p = planRestore(next.v4, base.v4, undefined, false);
    const chain = serviceChainName({ service: 'demo/new', portName: '', protocol: 'TCP', family: 4, clusterIP: '10.96.0.99' });
    assert.equal(
      p.text,
      '*filter\n-I MPX-REJECT 5 -d 10.96.0.99/32 -m comment --comment "cluster IP: a port or protocol it does not serve" -j MPX-UNSERVED\nCOMMIT\n' +
        `*nat\n:${chain} - [0:0]\n-A ${chain} -p tcp -j DNAT --to-destination 192.168.101.9:80\n` +
        `-A MPX-SERVICES -d 10.96.0.99/32 -p tcp -m tcp --dport 80 -m comment --comment "demo/new:80" -j ${chain}\nCOMMIT\n`,
    );
    assert.deepEqual(editSetChain(['-A X a', '-A X b'], ['-A X b', '-A X c']), { remove: ['-D X a'], append: ['-A X c'] });
    // Ordered (the reject chain): a new rule before a kept one goes to its place, the rest is appended.
    assert.deepEqual(editSetChain(['-A X a', '-A X ip1'], ['-A X b', '-A X a', '-A X c', '-A X ip1', '-A X ip2'], true), {
      remove: [],
      append: ['-I X 1 b', '-I X 3 c', '-A X ip2'],
    });
  });
  void test('full: every chain declared, stale chains of ours deleted, jumps repaired to exactly one', () => {
    const existing = parseExisting(
      [
        '*nat',
        ':OUTPUT ACCEPT [0:0]',
        ':MPX-SERVICES - [0:0]',
        ':MPX-SVC-OLDOLDOLDOLDOLDO - [0:0]',
        ':KUBE-SERVICES - [0:0]',
        `-A OUTPUT ${JUMP_SPEC.nat}`,
        `-A OUTPUT ${JUMP_SPEC.nat}`,
        '-A OUTPUT -j KUBE-SERVICES',
        'COMMIT',
        '*filter',
        ':OUTPUT ACCEPT [0:0]',
        '-A OUTPUT -j MPX-REJECT',
        'COMMIT',
      ].join('\n'),
    );
    assert.deepEqual(existing.nat.chains, ['MPX-SERVICES', 'MPX-SVC-OLDOLDOLDOLDOLDO']);
    assert.deepEqual(existing.nat.jumps, [`OUTPUT ${JUMP_SPEC.nat}`, `OUTPUT ${JUMP_SPEC.nat}`]);
    const p = planRestore(base.v4, base.v4, existing, true);
    const lines = p.text.split('\n');
    assert.ok(lines.includes(`-D OUTPUT ${JUMP_SPEC.nat}`));
    assert.ok(!lines.some((l) => l.startsWith('-I OUTPUT 1 -m comment --comment multus-proxy -j MPX-SERVICES')));
    assert.ok(lines.includes('-D OUTPUT -j MPX-REJECT'));
    assert.ok(lines.includes(`-I OUTPUT 1 ${JUMP_SPEC.filter}`));
    assert.ok(lines.includes('-X MPX-SVC-OLDOLDOLDOLDOLDO'));
    assert.ok(!p.text.includes('KUBE-'));
    assert.equal(p.changedChains.length, base.v4.nat.size + base.v4.filter.size);
  });
  void test('full resync with a known previous state: chains from memory, jumps from -S OUTPUT', () => {
    const existing = existingFromApplied(base.v4, {
      nat: `-P OUTPUT ACCEPT\n-A OUTPUT -d 10.200.0.1/32 -j FOREIGN\n-A OUTPUT ${JUMP_SPEC.nat}\n-A OUTPUT ${JUMP_SPEC.nat}\n`,
      filter: '-P OUTPUT ACCEPT\n',
    });
    assert.deepEqual(existing.nat.chains, [...base.v4.nat.keys()]);
    assert.deepEqual(existing.nat.jumps, [`OUTPUT ${JUMP_SPEC.nat}`, `OUTPUT ${JUMP_SPEC.nat}`]);
    assert.deepEqual(existing.filter.jumps, []);
    const p = planRestore(base.v4, base.v4, existing, true);
    assert.deepEqual(p.deletedChains, []);
    assert.ok(p.text.includes(`-D OUTPUT ${JUMP_SPEC.nat}\n`));
    assert.ok(p.text.includes(`-I OUTPUT 1 ${JUMP_SPEC.filter}\n`));
    assert.ok(!p.text.includes('FOREIGN'));
  });
  void test('cleanup text: flush, jumps out, chains deleted; nothing when nothing is ours', () => {
    const t = planCleanup({ nat: { chains: ['MPX-SERVICES', 'MPX-SVC-A'], jumps: [`OUTPUT ${JUMP_SPEC.nat}`] }, filter: { chains: [], jumps: [] } });
    assert.equal(t, `*nat\n:MPX-SERVICES - [0:0]\n:MPX-SVC-A - [0:0]\n-D OUTPUT ${JUMP_SPEC.nat}\n-X MPX-SERVICES\n-X MPX-SVC-A\nCOMMIT\n`);
    assert.equal(planCleanup(NOTHING_EXISTING), '');
  });
});

void describe('sidecar routes, conntrack and error mapping', () => {
  void test('route diff: add, correct, remove only ours', () => {
    const cur = [
      { family: 4 as const, dst: '10.96.0.1', dev: 'net1', src: '192.168.101.2' },
      { family: 4 as const, dst: '10.96.0.2', dev: 'net1', src: '192.168.101.9' },
      { family: 6 as const, dst: 'fd00:10:96::1', dev: 'net1', src: 'fd00:101::2' },
    ];
    const want = [
      { family: 4 as const, dst: '10.96.0.2', dev: 'net1', src: '192.168.101.2' },
      { family: 6 as const, dst: 'fd00:10:96::1', dev: 'net1', src: 'fd00:101::2' },
      { family: 4 as const, dst: '10.96.0.3', dev: 'net1', src: '192.168.101.2' },
    ];
    const d = diffRoutes(cur, want);
    assert.deepEqual(
      d.replace.map((r) => r.dst),
      ['10.96.0.2', '10.96.0.3'],
    );
    assert.deepEqual(
      d.remove.map((r) => r.dst),
      ['10.96.0.1'],
    );
    assert.equal(routeBatch(d.remove, 'remove'), 'route del 10.96.0.1/32 proto 241\n');
    assert.deepEqual(parseRoutes('[{"dst":"fd00:10:96::1","dev":"net1","prefsrc":"fd00:101::2","metric":1024}]', 6), [cur[2]]);
    assert.deepEqual(parseRoutes('not json', 4), []);
  });
  void test('routes: one listing of both families (`table all`) gives each row its family and keeps only the main table', () => {
    // As `ip -j route show table all proto 241` prints them (iproute2 6.1): IPv6 rows carry `pref`, other tables `table`.
    const listing = JSON.stringify([
      { dst: '10.96.0.11', dev: 'net1', table: '100', scope: 'link', flags: [] },
      { dst: '10.96.0.10', dev: 'net1', scope: 'link', prefsrc: '192.168.101.2', flags: [] },
      { dst: 'fd00:10:96::1', dev: 'net1', prefsrc: 'fd00:101::2', metric: 1024, flags: [], pref: 'medium' },
      { dst: 'default', dev: 'net1', metric: 1024, flags: [], pref: 'medium' },
      { dst: 'default', dev: 'net1', scope: 'link', flags: [] },
    ]);
    assert.deepEqual(parseRoutes(listing), [
      { family: 4, dst: '10.96.0.10', dev: 'net1', src: '192.168.101.2' },
      { family: 6, dst: 'fd00:10:96::1', dev: 'net1', src: 'fd00:101::2' },
      { family: 6, dst: 'default', dev: 'net1', src: '' },
      { family: 4, dst: 'default', dev: 'net1', src: '' },
    ]);
  });
  void test('routes: a foreign route with our protocol keeps its prefix and is deleted as read; a value that would split a batch line throws', () => {
    const read = parseRoutes('[{"dst":"203.0.113.0/24","dev":"lo","protocol":"241"},{"dst":"default","dev":"lo"},{"dst":"10.96.0.1","dev":"net1","prefsrc":"192.168.101.2"}]', 4);
    assert.deepEqual(
      read.map((r) => r.dst),
      ['203.0.113.0/24', 'default', '10.96.0.1'],
    );
    const d = diffRoutes(read, [{ family: 4, dst: '10.96.0.1', dev: 'net1', src: '192.168.101.2' }]);
    assert.deepEqual(d.replace, []);
    assert.equal(routeBatch(d.remove, 'remove'), 'route del 203.0.113.0/24 proto 241\nroute del default proto 241\n');
    assert.throws(() => routeBatch([{ family: 4, dst: '10.96.0.1', dev: 'n1\nflush', src: '192.168.101.2' }], 'replace'), /the device .* contains/);
    assert.throws(() => routeBatch([{ family: 4, dst: '10.96.0.1', dev: 'net1', src: '192.168.101.2 dev lo' }], 'replace'), /the source .* is not an address/);
    assert.throws(() => routeBatch([{ family: 4, dst: '10.96.0.1\nroute flush', dev: 'net1', src: '192.168.101.2' }], 'remove'), /not an address/);
  });
  void test('conntrack: removed UDP endpoint, UDP Service from none to some, removed UDP Service; TCP never', () => {
    const s = sampleState();
    const prev = render(s).resolution.targets;
    const next = render(
      withTargets(
        s,
        s.targets
          .filter((t) => t.service !== 'demo/sig')
          .map((t) => {
            if (t.service === 'demo/dns') return { ...t, endpoints: t.endpoints.slice(1) };
            if (t.service === 'demo/empty' && t.protocol === 'UDP') return { ...t, endpoints: [ep('fd00:101::9', 5000)] };
            if (t.service === 'demo/web') return { ...t, endpoints: [] };
            return t;
          }),
      ),
    ).resolution.targets;
    const plan = planConntrack(prev, next);
    assert.deepEqual(
      plan
        .map(conntrackArgs)
        .map((a) => a.join(' '))
        .sort(),
      [
        '-D -f ipv4 -p sctp --orig-dst 10.96.0.40 --orig-port-dst 9999',
        '-D -f ipv4 -p udp --orig-dst 10.96.0.53 --orig-port-dst 53 --dst-nat 192.168.101.3',
        '-D -f ipv6 -p udp --orig-dst fd00:10:96::1e --orig-port-dst 5000',
      ],
    );
    assert.deepEqual(planConntrack(undefined, next), []);
  });
  void test('a failed restore line is mapped back to the input text', () => {
    const stderr = "iptables-nft-restore v1.8.9 (nf_tables): Chain 'NOPE' does not exist\nError occurred at line: 3\nTry `iptables-nft-restore -h'";
    assert.equal(failedLine(stderr), 3);
    assert.deepEqual(lineContext('*nat\n:A - [0:0]\n-A A -j NOPE\nCOMMIT\n', 3), ['2: :A - [0:0]', '3> -A A -j NOPE', '4: COMMIT']);
    assert.equal(failedLine('something else'), undefined);
    assert.equal(summarize(stderr), "Chain 'NOPE' does not exist; Error occurred at line: 3");
  });
});
