/**
 * The B3-real method's pure parts: the nft table model (listing + monitor lines, judged at
 * transaction ends), the slice tracker and the pod Ready tracker. The lines here are real output of
 * nft 1.0.6 for rules that iptables-nft 1.8.9 wrote (kube-proxy's layout and the sidecar's iptables
 * one); nft-model-inet.test.ts has the sidecar's nftables table.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { NftTable, parseMonitorLine, saveHasDnat } from '../lib/nft-model.js';
import { appliedSyncs, breakdown, SliceTracker } from '../lib/slice-events.js';
import { order } from '../lib/report.js';
import { PodReadyTracker, podIsReady, readyTransitionMs } from '../lib/pod-ready.js';
import type { V1EndpointSlice, V1Pod } from '../../src/kube/types.js';

const LISTING = `table ip nat { # handle 1
	chain MPX-SVC-X { # handle 1
		meta l4proto tcp meta random & 2147483647 < 1073741824 counter packets 0 bytes 0 dnat to 10.1.1.5:80 # handle 6
	}

	chain KUBE-SEP-ABC { # handle 2
		meta l4proto tcp   counter packets 0 bytes 0 dnat to 10.244.0.7:80 # handle 7
	}

	chain OUTPUT { # handle 4
		type nat hook output priority -100; policy accept;
		 counter packets 0 bytes 0 jump MPX-SVC-X # handle 5
	}
}# Warning: table ip nat is managed by iptables-nft, do not touch!`;

function feed(t: NftTable, lines: string[]): void {
  for (const l of lines) t.apply(parseMonitorLine(l, 'ip nat'));
}

void describe('nft table model', () => {
  void test('a listing: only DNAT targets of chains something jumps to are in place', () => {
    const t = new NftTable();
    t.load(LISTING);
    assert.equal(t.size(), 3);
    assert.deepEqual([...t.inPlaceTargets()], ['10.1.1.5:80']);
    assert.equal(t.dnatInPlace('10.244.0.7', 80), false, 'KUBE-SEP-ABC holds the DNAT but nothing jumps to it');
    assert.equal(t.dnatInPlace('10.1.1.5', 8080), false);
  });

  void test('monitor lines: a jump added puts the endpoint in place; a rewrite (deletes then adds) keeps it; deleting the jump removes it', () => {
    const t = new NftTable();
    t.load(LISTING);
    feed(t, ['create chain ip nat KUBE-SVC-S # handle 9', 'add rule ip nat KUBE-SVC-S  counter packets 0 bytes 0 jump KUBE-SEP-ABC # handle 10', '# new generation 3 by process 1 (iptables-restor)']);
    assert.ok(t.dnatInPlace('10.244.0.7', 80));
    // A rewrite of the service chain: the jump is deleted and added again under a new handle.
    feed(t, ['delete rule ip nat KUBE-SVC-S handle 10']);
    assert.equal(t.dnatInPlace('10.244.0.7', 80), false, 'mid-transaction the state is transiently without it (why the caller judges at generation lines)');
    feed(t, ['add rule ip nat KUBE-SVC-S  counter packets 0 bytes 0 jump KUBE-SEP-ABC # handle 11']);
    assert.ok(t.dnatInPlace('10.244.0.7', 80));
    feed(t, ['delete rule ip nat KUBE-SVC-S handle 11', 'delete rule ip nat KUBE-SEP-ABC handle 7', 'delete chain ip nat KUBE-SEP-ABC']);
    assert.equal(t.dnatInPlace('10.244.0.7', 80), false);
    feed(t, ['delete chain ip nat MPX-SVC-X']);
    assert.equal(t.dnatInPlace('10.1.1.5', 80), false, 'a deleted chain takes its rules along');
  });

  void test('lines of other tables and families are ignored', () => {
    const t = new NftTable();
    t.load(LISTING);
    feed(t, ['delete rule ip filter OUTPUT handle 5', 'delete rule ip6 nat OUTPUT handle 5', 'delete chain ip6 nat MPX-SVC-X', 'add rule ip filter X counter jump KUBE-SEP-ABC # handle 99']);
    assert.deepEqual([...t.inPlaceTargets()], ['10.1.1.5:80']);
  });

  void test('parseMonitorLine', () => {
    assert.deepEqual(parseMonitorLine('# new generation 12 by process 9248 (iptables-restor)', 'ip nat'), { kind: 'generation', generation: 12, by: 'iptables-restor' });
    assert.deepEqual(parseMonitorLine('add rule ip nat MPX-SVC-X meta l4proto tcp counter packets 0 bytes 0 dnat to 10.1.1.7:80 # handle 9', 'ip nat'), {
      kind: 'add-rule',
      chain: 'MPX-SVC-X',
      handle: 9,
      text: 'meta l4proto tcp counter packets 0 bytes 0 dnat to 10.1.1.7:80',
    });
    assert.deepEqual(parseMonitorLine('delete rule ip nat MPX-SVC-X handle 6', 'ip nat'), { kind: 'delete-rule', chain: 'MPX-SVC-X', handle: 6 });
    assert.deepEqual(parseMonitorLine('flush chain ip nat KUBE-SVC-S', 'ip nat'), { kind: 'flush-chain', chain: 'KUBE-SVC-S' });
    assert.equal(parseMonitorLine('add table ip nat # handle 1', 'ip nat').kind, 'other');
    assert.throws(() => parseMonitorLine('x', 'nat'), /"<family> <name>"/);
  });

  void test('property: any line never throws and lines of another table never change the model', () => {
    fc.assert(
      fc.property(fc.array(fc.string()), (lines) => {
        const t = new NftTable();
        t.load(LISTING);
        for (const l of lines) t.apply(parseMonitorLine(l.replace(/ ip nat /g, ' ip6 nat '), 'ip nat'));
        return t.size() === 3 || lines.some((l) => l.includes('ip nat'));
      }),
    );
  });

  void test('iptables-save cross-check', () => {
    const save = '*nat\n-A MPX-SVC-X -p tcp -j DNAT --to-destination 10.1.1.5:80\n-A KUBE-SEP-A -p tcp -m tcp -j DNAT --to-destination 10.244.0.17:8080\nCOMMIT\n';
    assert.ok(saveHasDnat(save, '10.1.1.5', 80));
    assert.equal(saveHasDnat(save, '10.244.0.1', 80), false);
    assert.equal(saveHasDnat(save, '10.244.0.17', 80), false);
  });
});

const slice = (name: string, service: string, manager: string, eps: [string, boolean | undefined][]): V1EndpointSlice => ({
  addressType: 'IPv4',
  metadata: { name, namespace: 'n', labels: { 'kubernetes.io/service-name': service, 'endpointslice.kubernetes.io/managed-by': manager } },
  endpoints: eps.map(([a, ready]) => ({ addresses: [a], conditions: ready === undefined ? {} : { ready } })),
});

void describe('slice tracker', () => {
  void test('an address counts once ready (absent condition = ready), per Service and manager, across slices', () => {
    const t = new SliceTracker();
    assert.equal(t.event('ADDED', slice('a', 's', 'k', [['1.1.1.1', true]]))?.added[0], '1.1.1.1');
    assert.equal(
      t.event(
        'MODIFIED',
        slice('a', 's', 'k', [
          ['1.1.1.1', true],
          ['1.1.1.2', false],
        ]),
      ),
      undefined,
      'a not-ready endpoint is no change',
    );
    assert.deepEqual(
      t.event(
        'MODIFIED',
        slice('a', 's', 'k', [
          ['1.1.1.1', true],
          ['1.1.1.2', undefined],
        ]),
      ),
      { service: 's', manager: 'k', added: ['1.1.1.2'], removed: [] },
    );
    assert.equal(t.event('ADDED', slice('b', 's', 'k', [['1.1.1.2', true]])), undefined, 'the same address in a second slice');
    assert.equal(t.event('ADDED', slice('c', 's', 'ours', [['1.1.1.9', true]]))?.manager, 'ours');
    assert.deepEqual(t.event('MODIFIED', slice('a', 's', 'k', [['1.1.1.1', false]])), { service: 's', manager: 'k', added: [], removed: ['1.1.1.1'] });
    assert.deepEqual(t.event('DELETED', slice('b', 's', 'k', [])), { service: 's', manager: 'k', added: [], removed: ['1.1.1.2'] });
    assert.deepEqual(t.ready('s', 'ours'), ['1.1.1.9']);
  });
});

void describe('benchmarks page', () => {
  void test('a variant section (b3real) sits after its number’s own sections and before the next number', () => {
    const keys = ['b4', 'b3real-quick', 'b3-quick', 'b3real', 'b3', 'b2-quick'];
    assert.deepEqual(
      [...keys].sort((a, b) => order(a) - order(b)),
      ['b2-quick', 'b3', 'b3-quick', 'b3real', 'b3real-quick', 'b4'],
    );
  });
});

void describe("the sidecar's log, lined up with the bench's times", () => {
  const log = [
    '{"level":30,"time":1000,"msg":"rules applied","full":true,"ms":300}',
    'not json "rules applied"',
    '{"level":30,"time":2020,"msg":"rules applied","full":false,"ms":18,"backend":"nftables"}',
    '{"level":30,"time":3000,"msg":"rules applied","full":false,"ms":9,"backend":"nftables","cpuWaitBeforeMs":1.25,"cpuWaitMs":"x"}',
    '{"level":20,"time":2030,"msg":"rules synced","ms":30}',
  ].join('\n');
  void test('appliedSyncs reads the end time, duration and kind of each sync', () => {
    assert.deepEqual(appliedSyncs(log), [
      { end: 1000, ms: 300, full: true },
      { end: 2020, ms: 18, full: false, backend: 'nftables' },
      { end: 3000, ms: 9, full: false, backend: 'nftables', cpuWaitBeforeMs: 1.25 },
    ]);
  });
  void test('breakdown splits event → rule at the start of the sync whose span holds the rule time', () => {
    const syncs = appliedSyncs(log);
    assert.deepEqual(breakdown(1995, 2006, syncs), { waiting: 7, toRule: 4, afterRule: 14 });
    assert.equal(breakdown(1995, 2500, syncs), undefined, 'the rule came too long after any sync');
    assert.deepEqual(breakdown(1995, 2030, syncs), { waiting: 7, toRule: 28, afterRule: -10 }, "within the monitor's lag after the sync's end");
    assert.equal(breakdown(1995, 2030, syncs, 2, 5), undefined);
    assert.deepEqual(breakdown(1995, 2006, [...syncs, { end: 2100, ms: 50, full: false }]), { waiting: 7, toRule: 4, afterRule: 14 }, 'a later sync started after the rule is not it');
  });
});

const podAt = (name: string, ready: boolean | undefined, at = '2026-11-27T02:00:05Z'): V1Pod => ({
  metadata: { name, namespace: 'n' },
  status: { conditions: ready === undefined ? [] : [{ type: 'Ready', status: ready ? 'True' : 'False', lastTransitionTime: at as unknown as Date }] },
});

void describe('pod Ready transitions (the SLI start)', () => {
  void test('reported once, in the event where Ready becomes True, with the condition time', () => {
    const t = new PodReadyTracker();
    assert.equal(t.event('ADDED', podAt('a', undefined)), undefined, 'no condition yet');
    assert.equal(t.event('MODIFIED', podAt('a', false)), undefined);
    assert.deepEqual(t.event('MODIFIED', podAt('a', true)), { pod: 'n/a', transitionMs: Date.parse('2026-11-27T02:00:05Z') });
    assert.equal(t.event('MODIFIED', podAt('a', true)), undefined, 'still Ready: not a transition');
    assert.equal(t.event('MODIFIED', podAt('a', false, 'x')), undefined);
    assert.deepEqual(t.event('MODIFIED', podAt('a', true, 'not a time')), { pod: 'n/a', transitionMs: undefined });
    t.event('DELETED', podAt('a', true));
    assert.equal(t.event('BOOKMARK', podAt('a', true)), undefined);
    assert.equal(t.event('ADDED', podAt('a', true))?.pod, 'n/a', 'a pod seen again after its deletion starts over');
  });
  void test('readyTransitionMs and podIsReady', () => {
    assert.equal(readyTransitionMs(podAt('a', true, '2026-11-27T02:00:05Z')), Date.parse('2026-11-27T02:00:05Z'));
    assert.equal(readyTransitionMs(podAt('a', undefined)), undefined);
    assert.equal(podIsReady(podAt('a', false)), false);
    assert.equal(podIsReady(podAt('a', true)), true);
  });
});
