import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { abortAt, fenceWrites, leaseDecision, leaseSpec, mayWriteAt, microTime, observe, type WriteFence } from '../../../cmd/controller/leader.js';
import type { KubeClient } from '../../../src/kube/client.js';
import type { V1Lease } from '../../../src/kube/types.js';

const lease = (holder: string, renew: string, transitions = 0): V1Lease => ({
  metadata: { name: 'l', namespace: 'ns', resourceVersion: '1' },
  spec: { holderIdentity: holder, renewTime: renew as unknown as Date, leaseDurationSeconds: 15, leaseTransitions: transitions },
});

void describe('leader election decisions', () => {
  void test('no lease: create; our lease: renew; empty holder: acquire', () => {
    assert.equal(leaseDecision(undefined, undefined, 0, 'me', 15_000), 'create');
    assert.equal(leaseDecision(lease('me', 't1'), undefined, 0, 'me', 15_000), 'renew');
    assert.equal(leaseDecision(lease('', 't1'), undefined, 0, 'me', 15_000), 'acquire');
  });

  void test("another holder's lease expires a full duration after its record last changed, by our clock", () => {
    let obs = observe(undefined, lease('other', 't1'), 1000);
    assert.equal(leaseDecision(lease('other', 't1'), obs, 1000, 'me', 15_000), 'wait');
    // The holder renews: the clock restarts.
    obs = observe(obs, lease('other', 't2'), 10_000);
    assert.equal(leaseDecision(lease('other', 't2'), obs, 24_999, 'me', 15_000), 'wait');
    // Nothing changes any more (the holder died): free after 15 s.
    obs = observe(obs, lease('other', 't2'), 20_000);
    assert.equal(obs.at, 10_000, 'an unchanged record keeps its first observation time');
    assert.equal(leaseDecision(lease('other', 't2'), obs, 25_000, 'me', 15_000), 'acquire');
  });

  void test('lease spec: acquire bumps transitions and acquireTime; renew keeps them', () => {
    const taken = leaseSpec(lease('other', 't', 3), 'me', 15_000, Date.UTC(2026, 0, 1));
    assert.equal(taken.holderIdentity, 'me');
    assert.equal(taken.leaseTransitions, 4);
    assert.equal(taken.leaseDurationSeconds, 15);
    assert.equal(String(taken.renewTime), '2026-01-01T00:00:00.000000Z');
    const mine = { ...lease('me', 't', 4), spec: { ...taken } };
    const renewed = leaseSpec(mine, 'me', 15_000, Date.UTC(2026, 0, 1, 0, 0, 2));
    assert.equal(renewed.leaseTransitions, 4);
    assert.equal(String(renewed.acquireTime), String(taken.acquireTime));
    assert.equal(String(renewed.renewTime), '2026-01-01T00:00:02.000000Z');
    assert.equal(leaseSpec(undefined, 'me', 1500, 0).leaseDurationSeconds, 2, 'whole seconds, rounded up');
    assert.equal(microTime(Date.UTC(2026, 5, 7, 8, 9, 10, 123)), '2026-06-07T08:09:10.123000Z');
  });
});

void describe('write fence', () => {
  void test('a renew sent at t allows writes strictly before t + renewDeadline', () => {
    assert.equal(mayWriteAt(1000, 1000, 2000), true);
    assert.equal(mayWriteAt(1000, 2999, 2000), true);
    assert.equal(mayWriteAt(1000, 3000, 2000), false);
    assert.equal(mayWriteAt(1000, 60_000, 2000), false);
  });

  void test('abortAt: aborted at once for a past instant, later for a future one', async () => {
    assert.equal(abortAt(100, 'x', 200).aborted, true);
    const s = abortAt(Date.now() + 30, 'deadline');
    assert.equal(s.aborted, false);
    await new Promise((r) => setTimeout(r, 60));
    assert.equal(s.aborted, true);
    assert.match(String((s.reason as Error).message), /deadline/);
  });

  void test('fenced client: reads pass; writes are refused without permission and carry the fence signal', async () => {
    const seen: { verb: string; signal?: AbortSignal }[] = [];
    const rec =
      (verb: string) =>
      (...args: unknown[]): Promise<never> => {
        const opts = args.find((a) => typeof a === 'object' && a !== null && 'signal' in a) as { signal?: AbortSignal } | undefined;
        seen.push({ verb, ...(opts?.signal ? { signal: opts.signal } : {}) });
        return Promise.resolve(undefined as never);
      };
    const inner = {
      get: rec('get'),
      list: rec('list'),
      create: rec('create'),
      replace: rec('replace'),
      patch: rec('patch'),
      delete: rec('delete'),
      watch: rec('watch'),
      requestCount: () => ({}),
    } as unknown as KubeClient;
    let allowed = true;
    const ctl = new AbortController();
    const fence: WriteFence = { mayWrite: () => allowed, writeSignal: () => ctl.signal };
    const c = fenceWrites(inner, fence);
    await c.get('/x');
    await c.create('/x', {});
    await c.replace('/x', {}, { fieldManager: 'm' });
    await c.patch('/x', [], 'json');
    await c.delete('/x');
    assert.deepEqual(
      seen.map((s) => s.verb),
      ['get', 'create', 'replace', 'patch', 'delete'],
    );
    for (const s of seen.slice(1)) assert.ok(s.signal, `${s.verb} carries a signal`);
    ctl.abort(new Error('deadline'));
    assert.equal(seen[1]?.signal?.aborted, true, 'the write signal is the fence signal');
    allowed = false;
    await assert.rejects(c.replace('/y', {}), /replace \/y: refused, this replica is not the leader/);
    await assert.rejects(c.delete('/y'), /refused/);
    await c.list('/y');
    assert.deepEqual(seen.map((s) => s.verb).slice(5), ['list'], 'refused writes never reach the client');
  });
});
