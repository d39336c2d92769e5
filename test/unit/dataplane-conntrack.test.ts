/**
 * Conntrack reconciliation, pure (src/dataplane/conntrack.ts): the parser of `conntrack -L`, the
 * decision from entries + current endpoints to deletions, and that reconciling reaches the same
 * table as the incremental flushes would have. The same with real conntrack in a network
 * namespace: test/sidecar/conntrack.test.ts.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { conntrackArgs, conntrackServices, goneTargets, parseConntrackList, planConntrack, reconcileConntrack, type ConntrackEntry, type ConntrackFlush } from '../../src/dataplane/core/conntrack.js';
import type { IpFamily, Protocol, ResolvedTarget } from '../../src/dataplane/core/model.js';

/** What of a ResolvedTarget conntrack reads; the rest is irrelevant here. */
function rt(family: IpFamily, protocol: Protocol, clusterIP: string, port: number, endpoints: readonly string[], chain = `${family}|${protocol}|${clusterIP}|${port}`): ResolvedTarget {
  return { target: { family, protocol, port }, clusterIP, chain, endpoints: endpoints.map((ip) => ({ ip, port: 5353 })) } as unknown as ResolvedTarget;
}

/** An entry as `conntrack -L` prints it (default format). */
function line(e: ConntrackEntry & { origSrc: string; sport: number; replyDport?: number }, extra: { unreplied?: boolean; assured?: boolean; state?: string } = {}): string {
  const num = { UDP: 17, TCP: 6, SCTP: 132 }[e.protocol];
  const words = [e.protocol.toLowerCase(), String(num), '29'];
  if (extra.state !== undefined) words.push(extra.state);
  words.push(`src=${e.origSrc}`, `dst=${e.origDst}`, `sport=${e.sport}`, `dport=${e.origDport}`);
  if (extra.unreplied === true) words.push('[UNREPLIED]');
  words.push(`src=${e.replySrc}`, `dst=${e.origSrc}`, `sport=${e.replyDport ?? 5353}`, `dport=${e.sport}`);
  if (extra.assured === true) words.push('[ASSURED]');
  words.push('mark=0', 'use=1');
  return words.join(' ');
}

/** What `conntrack -D` with these filters deletes (the tool's semantics, for the equivalence below). */
function deletes(f: ConntrackFlush, e: ConntrackEntry): boolean {
  if (f.family !== e.family || f.protocol !== e.protocol || f.clusterIP !== e.origDst || f.port !== e.origDport) return false;
  if (f.endpoint !== undefined && !(e.replySrc === f.endpoint && e.replySrc !== e.origDst)) return false;
  if (f.replySrc !== undefined && e.replySrc !== f.replySrc) return false;
  return true;
}
const survivors = (entries: readonly ConntrackEntry[], flushes: readonly ConntrackFlush[]): ConntrackEntry[] => entries.filter((e) => !flushes.some((f) => deletes(f, e)));

void describe('conntrack reconciliation', () => {
  void test('parses conntrack -L lines: original destination and port, reply source; IPv6 normalised; other lines skipped', () => {
    const text = [
      'udp      17 29 src=192.168.101.2 dst=10.96.0.53 sport=40000 dport=53 [UNREPLIED] src=192.168.101.3 dst=192.168.101.2 sport=5353 dport=40000 mark=0 use=1',
      'sctp     132 3 ESTABLISHED src=192.168.101.2 dst=10.96.0.40 sport=5000 dport=9999 src=192.168.101.4 dst=192.168.101.2 sport=9999 dport=5000 [ASSURED] mark=0 use=1',
      'conntrack v1.4.7 (conntrack-tools): 2 flow entries have been shown.',
      'udp 17 29 src=1.2.3.4 dst=5.6.7.8 sport=1',
      '',
    ].join('\n');
    assert.deepEqual(parseConntrackList(text, 4), [
      { family: 4, protocol: 'UDP', origDst: '10.96.0.53', origDport: 53, replySrc: '192.168.101.3' },
      { family: 4, protocol: 'SCTP', origDst: '10.96.0.40', origDport: 9999, replySrc: '192.168.101.4' },
    ]);
    assert.deepEqual(parseConntrackList('udp 17 29 src=fd00:101::2 dst=FD00:10:96:0:0:0:0:35 sport=1 dport=53 src=fd00:101:0::3 dst=fd00:101::2 sport=53 dport=1 mark=0 use=1', 6), [
      { family: 6, protocol: 'UDP', origDst: 'fd00:10:96::35', origDport: 53, replySrc: 'fd00:101::3' },
    ]);
  });

  void test('deletes entries to a served UDP/SCTP IP:port whose reply source is not a current endpoint; never TCP, never other destinations', () => {
    const services = conntrackServices([rt(4, 'UDP', '10.96.0.53', 53, ['10.0.0.3', '10.0.0.4']), rt(4, 'TCP', '10.96.0.10', 80, []), rt(4, 'SCTP', '10.96.0.40', 9999, [])]);
    assert.deepEqual(
      services.map((s) => `${s.protocol} ${s.ip}:${s.port}`),
      ['UDP 10.96.0.53:53', 'SCTP 10.96.0.40:9999'],
      'TCP needs no reconciliation',
    );
    const e = (protocol: Protocol, origDst: string, origDport: number, replySrc: string): ConntrackEntry => ({ family: 4, protocol, origDst, origDport, replySrc });
    const entries = [
      e('UDP', '10.96.0.53', 53, '10.0.0.3'), // a current endpoint: kept
      e('UDP', '10.96.0.53', 53, '10.0.0.9'), // an endpoint that left
      e('UDP', '10.96.0.53', 53, '10.0.0.9'), // another flow to it: one deletion covers both
      e('UDP', '10.96.0.53', 53, '10.96.0.53'), // un-NATed (made while there were no rules)
      e('UDP', '10.96.0.53', 5353, '10.0.0.9'), // another port: not a Service
      e('UDP', '8.8.8.8', 53, '8.8.8.8'), // not a Service
      e('TCP', '10.96.0.10', 80, '10.0.0.9'),
      e('SCTP', '10.96.0.40', 9999, '10.0.0.5'), // no endpoints now
    ];
    const flushes = reconcileConntrack(entries, services);
    assert.deepEqual(
      flushes.map((f) => conntrackArgs(f).join(' ')),
      [
        '-D -f ipv4 -p udp --orig-dst 10.96.0.53 --orig-port-dst 53 --reply-src 10.0.0.9',
        '-D -f ipv4 -p udp --orig-dst 10.96.0.53 --orig-port-dst 53 --reply-src 10.96.0.53',
        '-D -f ipv4 -p sctp --orig-dst 10.96.0.40 --orig-port-dst 9999 --reply-src 10.0.0.5',
      ],
    );
    assert.deepEqual(reconcileConntrack(survivors(entries, flushes), services), [], 'nothing left to delete');
  });

  void test('a Service port gone since the last successful sync counts with no endpoints; one on two networks shares its endpoints', () => {
    const last = [rt(4, 'UDP', '10.96.0.53', 53, ['10.0.0.3']), rt(4, 'UDP', '10.96.0.60', 53, ['10.0.0.3'])];
    const now = [rt(4, 'UDP', '10.96.0.53', 53, ['10.0.0.3']), rt(4, 'UDP', '10.96.0.53', 53, ['10.0.1.3'], 'other-network-chain')];
    const gone = goneTargets(last, now);
    assert.deepEqual(
      gone.map((g) => g.clusterIP),
      ['10.96.0.60'],
    );
    const services = conntrackServices(now, gone);
    assert.deepEqual(
      services.map((s) => [s.ip, [...s.endpoints]]),
      [
        ['10.96.0.53', ['10.0.0.3', '10.0.1.3']],
        ['10.96.0.60', []],
      ],
    );
    assert.deepEqual(goneTargets(undefined, now), [], 'after a restart nothing is known of before');
  });

  // Random worlds: a few UDP/SCTP/TCP Service ports on a few IPs, endpoints from a small pool.
  const family: fc.Arbitrary<IpFamily> = fc.constant(4);
  const arbTarget = fc.record({
    family,
    protocol: fc.constantFrom<Protocol>('UDP', 'SCTP', 'TCP'),
    ip: fc.constantFrom('10.96.0.1', '10.96.0.2', '10.96.0.3'),
    port: fc.constantFrom(53, 54),
    endpoints: fc.uniqueArray(fc.constantFrom('10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4'), { maxLength: 3 }),
  });
  const targets = fc.uniqueArray(arbTarget, { selector: (t) => `${t.protocol}|${t.ip}|${t.port}`, maxLength: 6 }).map((ts) => ts.map((t) => rt(t.family, t.protocol, t.ip, t.port, t.endpoints)));

  void test('property: deletions are exactly the entries to served ports with a reply source that is not an endpoint now, and reconciling twice deletes nothing more', () => {
    const entry = fc.record({
      family,
      protocol: fc.constantFrom<Protocol>('UDP', 'SCTP', 'TCP'),
      origDst: fc.constantFrom('10.96.0.1', '10.96.0.2', '10.96.0.3', '10.96.0.9'),
      origDport: fc.constantFrom(53, 54, 55),
      replySrc: fc.constantFrom('10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4', '10.96.0.1', '10.96.0.2'),
    });
    fc.assert(
      fc.property(targets, fc.array(entry, { maxLength: 20 }), (now, entries) => {
        const services = conntrackServices(now);
        const flushes = reconcileConntrack(entries, services);
        const left = survivors(entries, flushes);
        const served = (e: ConntrackEntry): ResolvedTarget | undefined =>
          now.find((t) => t.target.protocol !== 'TCP' && t.target.protocol === e.protocol && t.clusterIP === e.origDst && t.target.port === e.origDport);
        for (const e of entries) {
          const t = served(e);
          const stale = t !== undefined && !t.endpoints.some((x) => x.ip === e.replySrc);
          assert.equal(!left.includes(e), stale, JSON.stringify(e));
        }
        assert.equal(new Set(flushes.map((f) => conntrackArgs(f).join(' '))).size, flushes.length, 'no deletion twice');
        assert.deepEqual(reconcileConntrack(left, services), []);
      }),
      { numRuns: 500 },
    );
  });

  void test('property: reconciling leaves the table the incremental flushes leave (but for un-NATed entries to ports with no endpoints, which it also deletes)', () => {
    fc.assert(
      fc.property(targets, targets, fc.array(fc.nat(), { maxLength: 20 }), (prev, next, picks) => {
        // Entries as the rules of `prev` made them: NATed to one of its endpoints, or un-NATed where it had none.
        const flushed = prev.filter((t) => t.target.protocol !== 'TCP');
        const entries: ConntrackEntry[] =
          flushed.length === 0
            ? []
            : picks.map((n, i) => {
                const t = flushed[n % flushed.length]!;
                const replySrc = t.endpoints.length === 0 ? t.clusterIP : t.endpoints[i % t.endpoints.length]!.ip;
                return { family: t.target.family, protocol: t.target.protocol, origDst: t.clusterIP, origDport: t.target.port, replySrc };
              });
        const incremental = survivors(entries, planConntrack(prev, next));
        const reconciled = survivors(entries, reconcileConntrack(entries, conntrackServices(next, goneTargets(prev, next))));
        const noEndpointsNow = (e: ConntrackEntry): boolean =>
          e.replySrc === e.origDst && !next.some((t) => t.target.protocol === e.protocol && t.clusterIP === e.origDst && t.target.port === e.origDport && t.endpoints.length > 0);
        assert.deepEqual(
          reconciled,
          incremental.filter((e) => !noEndpointsNow(e)),
        );
      }),
      { numRuns: 500 },
    );
  });

  void test('property: the parser reads back what conntrack prints, whatever the flags around it', () => {
    const v4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((o) => o.join('.'));
    const arb = fc.record({
      family: fc.constant<IpFamily>(4),
      protocol: fc.constantFrom<Protocol>('UDP', 'SCTP', 'TCP'),
      origSrc: v4,
      origDst: v4,
      origDport: fc.integer({ min: 1, max: 65535 }),
      sport: fc.integer({ min: 1, max: 65535 }),
      replySrc: v4,
    });
    fc.assert(
      fc.property(fc.array(fc.tuple(arb, fc.boolean(), fc.boolean()), { maxLength: 10 }), (rows) => {
        const text = rows.map(([e, unreplied, assured]) => line(e, { unreplied, assured, ...(e.protocol === 'UDP' ? {} : { state: 'ESTABLISHED' }) })).join('\n');
        assert.deepEqual(
          parseConntrackList(text, 4),
          rows.map(([e]) => ({ family: e.family, protocol: e.protocol, origDst: e.origDst, origDport: e.origDport, replySrc: e.replySrc })),
        );
      }),
      { numRuns: 300 },
    );
  });
});
