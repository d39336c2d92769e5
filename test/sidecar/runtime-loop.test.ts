/**
 * The sync loop's discipline with a scripted dataplane: coalescing, one sync at a time, skipping
 * unchanged states, drift checks, retries with backoff after failures, liveness, metrics.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { stat } from 'node:fs';
import fc from 'fast-check';
import { createSyncLoop, startSoon, backoffMs, budgetAt, budgetDelayMs, fullBudget, spendBudget, SYNC_BURST, type SyncLoopOptions } from '../../src/dataplane/core/scheduler.js';
import { createSidecarMetrics } from '../../cmd/sidecar/metrics.js';
import { prom } from '../../src/metrics.js';
import { createLogger } from '../../src/log.js';
import type { DesiredState } from '../../src/dataplane/core/model.js';
import { sameState, stateSize } from '../../src/dataplane/core/state.js';

const log = createLogger('test', 'silent');

const FAST: SyncLoopOptions = { minSyncIntervalMs: 30, driftCheckIntervalMs: 60_000, retryMinMs: 40, retryMaxMs: 200, stuckAfterMs: 60_000 };

function stateWith(n: number): DesiredState {
  return {
    interfaces: [],
    targets: Array.from({ length: n }, (_, i) => ({
      service: `ns/s${i}`,
      portName: '',
      protocol: 'TCP' as const,
      clusterIP: `10.96.0.${i + 1}`,
      port: 80,
      family: 4 as const,
      network: { namespace: 'net', name: 'a' },
      endpoints: [],
    })),
  };
}

interface Call {
  full: boolean;
  targets: number;
  start: number;
  end: number;
}

/** A loop whose dataplane records calls; `behaviour` decides per call (throw, delay). */
function harness(opts: Partial<SyncLoopOptions> = {}, behaviour: (n: number) => Promise<void> = async () => {}, drift?: (deep: boolean) => string | undefined) {
  const checks: boolean[] = [];
  const registry = new prom.Registry();
  const metrics = createSidecarMetrics(registry);
  const calls: Call[] = [];
  let current = stateWith(1);
  let active = 0;
  let maxActive = 0;
  const loop = createSyncLoop(
    { ...FAST, ...opts },
    {
      compute: () => current,
      same: sameState,
      size: stateSize,
      apply: async (state, { full }) => {
        active += 1;
        maxActive = Math.max(maxActive, active);
        const start = Date.now();
        try {
          await behaviour(calls.length);
        } finally {
          active -= 1;
          calls.push({ full, targets: state.targets.length, start, end: Date.now() });
        }
        return { rules: state.targets.length * 3 };
      },
      ...(drift !== undefined
        ? {
            checkDrift: ({ deep }: { deep: boolean }) => {
              checks.push(deep);
              return Promise.resolve(drift(deep));
            },
          }
        : {}),
      metrics,
      log,
    },
  );
  const value = async (name: string, labels: Record<string, string> = {}): Promise<number> => {
    const m = registry.getSingleMetric(`multus_proxy_sidecar_${name}`);
    assert.ok(m, `metric ${name} exists`);
    const got = await m.get();
    const entry = got.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l));
    return entry?.value ?? NaN;
  };
  return {
    loop,
    calls,
    checks,
    registry,
    value,
    maxActive: () => maxActive,
    active: () => active,
    setState: (s: DesiredState) => (current = s),
  };
}

async function histogram(registry: prom.Registry, name: string): Promise<{ count: number; sum: number }> {
  const m = registry.getSingleMetric(`multus_proxy_sidecar_${name}`);
  assert.ok(m, `metric ${name} exists`);
  const values = (await m.get()).values as { metricName?: string; value: number }[];
  const pick = (suffix: string): number => values.find((v) => v.metricName?.endsWith(suffix) === true)?.value ?? NaN;
  return { count: pick('_count'), sum: pick('_sum') };
}

async function until(cond: () => boolean, what: string, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

void describe('sync loop', () => {
  void test('the first sync is full and resolves firstSync; nothing runs before start()', async () => {
    const h = harness();
    h.loop.markDirty();
    await sleep(80);
    assert.equal(h.calls.length, 0, 'no sync before start');
    assert.equal(h.loop.synced(), false);
    h.loop.start();
    await h.loop.firstSync;
    assert.equal(h.loop.synced(), true);
    assert.deepEqual(
      h.calls.map((c) => c.full),
      [true],
    );
    assert.equal(await h.value('syncs_total', { kind: 'full', result: 'success' }), 1);
    assert.equal(await h.value('rules'), 3);
    assert.equal(await h.value('targets'), 1);
    await h.loop.stop();
  });

  void test('a burst of events is coalesced into few partial syncs, at most one at a time; past the burst allowance, one per minimum interval', async () => {
    const h = harness({ minSyncIntervalMs: 50 }, () => sleep(20));
    h.loop.start();
    await h.loop.firstSync;
    const burstStart = Date.now();
    for (let i = 0; i < 200; i++) {
      h.setState(stateWith(2 + i));
      h.loop.markDirty();
      if (i % 20 === 0) await sleep(10);
    }
    const burstMs = Date.now() - burstStart;
    await until(() => h.calls.at(-1)?.targets === 201, 'the last state applied');
    await sleep(120);
    const partial = h.calls.slice(1);
    // At most the burst allowance, then one sync per minimum interval while events kept coming, plus the one that follows.
    const bound = SYNC_BURST + Math.ceil(burstMs / 50) + 1;
    assert.ok(partial.length >= 1 && partial.length <= bound && partial.length < 20, `200 events over ${burstMs} ms gave ${partial.length} syncs`);
    assert.ok(
      partial.every((c) => !c.full),
      'later syncs are partial',
    );
    assert.equal(h.maxActive(), 1, 'never two syncs at once');
    // Token bucket: within any window, at most SYNC_BURST + window/interval syncs start.
    for (let i = 0; i < h.calls.length; i++) {
      for (let j = i + 1; j < h.calls.length; j++) {
        const window = h.calls[j]!.start - h.calls[i]!.start;
        assert.ok(j - i + 1 <= SYNC_BURST + (window + 5) / 50, `syncs ${i}..${j} (${j - i + 1}) started within ${window} ms`);
      }
    }
    await h.loop.stop();
  });

  void test('a lone change, and one right after it, start a sync at once even with a long minimum interval; a third waits for the interval', async () => {
    const h = harness({ minSyncIntervalMs: 400 }, () => sleep(5));
    h.loop.start();
    await h.loop.firstSync;
    // The full sync spent one token; a second of the burst of 2 refills within the interval.
    await sleep(450);
    const t0 = Date.now();
    h.setState(stateWith(2));
    h.loop.markDirty();
    await until(() => h.calls.length === 2, 'the lone change applied');
    // "At once" is an order: before the 400 ms minimum interval would have let it through.
    assert.ok(h.calls[1]!.start - t0 < 400, `the lone change waited ${h.calls[1]!.start - t0} ms, as long as the interval`);
    h.setState(stateWith(3));
    h.loop.markDirty();
    await until(() => h.calls.length === 3, 'the change right after applied');
    assert.ok(h.calls[2]!.start - h.calls[1]!.end < 400, `the change right after waited ${h.calls[2]!.start - h.calls[1]!.end} ms, as long as the interval`);
    h.setState(stateWith(4));
    h.loop.markDirty();
    await until(() => h.calls.length === 4, 'the third change applied', 3000);
    const gap = h.calls[3]!.start - h.calls[1]!.start;
    assert.ok(gap >= 390, `the third sync started ${gap} ms after the first of the burst`);
    await h.loop.stop();
  });

  void test('syncBurst 1 restores strict spacing by the minimum interval', async () => {
    const h = harness({ minSyncIntervalMs: 60, syncBurst: 1 }, () => sleep(2));
    h.loop.start();
    await h.loop.firstSync;
    for (let i = 0; i < 4; i++) {
      h.setState(stateWith(2 + i));
      h.loop.markDirty();
      await until(() => h.calls.length === 2 + i, `change ${i} applied`);
    }
    for (let i = 1; i < h.calls.length; i++) {
      const gap = h.calls[i]!.start - h.calls[i - 1]!.start;
      assert.ok(gap >= 55, `sync ${i} started ${gap} ms after the previous one`);
    }
    await h.loop.stop();
  });

  void test('an unchanged state is skipped without calling the dataplane', async () => {
    const h = harness();
    h.loop.start();
    await h.loop.firstSync;
    h.loop.markDirty();
    await until(() => h.loop.synced(), 'synced');
    await sleep(100);
    assert.equal(h.calls.length, 1);
    assert.equal(await h.value('syncs_total', { kind: 'skipped', result: 'success' }), 1);
    h.setState(stateWith(2));
    h.loop.markDirty();
    await until(() => h.calls.length === 2, 'a partial sync for the changed state');
    assert.equal(h.calls[1]!.full, false);
    await h.loop.stop();
  });

  void test('a failed sync is retried with backoff, and the retry is full', async () => {
    const h = harness({ retryMinMs: 150, retryMaxMs: 1000 }, async (n) => {
      if (n === 1 || n === 2) throw new Error('iptables-restore: line 3 failed');
    });
    h.loop.start();
    await h.loop.firstSync;
    h.setState(stateWith(2));
    h.loop.markDirty();
    await until(() => h.calls.length === 4, 'two failures and a success', 5000);
    assert.deepEqual(
      h.calls.map((c) => c.full),
      [true, false, true, true],
    );
    const gap1 = h.calls[2]!.start - h.calls[1]!.end;
    const gap2 = h.calls[3]!.start - h.calls[2]!.end;
    assert.ok(gap1 >= 140, `first retry after ${gap1} ms, expected >= 150`);
    assert.ok(gap2 >= 290, `second retry after ${gap2} ms, expected >= 300 (doubled)`);
    assert.equal(await h.value('restore_failures_total'), 2);
    assert.equal(await h.value('syncs_total', { kind: 'partial', result: 'error' }), 1);
    assert.equal(await h.value('syncs_total', { kind: 'full', result: 'error' }), 1);
    // After the failure the same state is applied again (not skipped as unchanged).
    assert.equal(h.calls[3]!.targets, 2);
    await h.loop.stop();
  });

  void test('drift checks run periodically without any event; a full sync follows only the one that finds drift; every 10th is deep', async () => {
    let driftAt = 3;
    const h = harness({ driftCheckIntervalMs: 20 }, undefined, () => (h.checks.length === driftAt ? 'nat/MPX-SERVICES: 0 rules of ours, 1 written' : undefined));
    h.loop.start();
    await until(() => h.checks.length >= 12, 'twelve drift checks', 5000);
    assert.deepEqual(
      h.calls.map((c) => c.full),
      [true, true],
      'the first sync, and one full sync after the check that found drift; none for the checks that found none',
    );
    assert.deepEqual(
      h.checks
        .slice(0, 10)
        .map((d, i) => (d ? i + 1 : 0))
        .filter((x) => x > 0),
      [10],
      'the tenth check is deep',
    );
    assert.equal(await h.value('drift_checks_total', { kind: 'quick', result: 'drift' }), 1);
    assert.ok((await h.value('drift_checks_total', { kind: 'quick', result: 'ok' })) >= 10);
    driftAt = -1;
    await h.loop.stop();
    const n = h.checks.length;
    await sleep(100);
    assert.equal(h.checks.length, n, 'no check after stop()');
  });

  void test('drift checks stay due by time under steady churn: one at least every interval while changes keep coming, never during a sync', async () => {
    const INTERVAL = 100;
    let overlapped = 0;
    let n = 1;
    const h = harness(
      { driftCheckIntervalMs: INTERVAL },
      () => sleep(5),
      () => {
        if (h.active() > 0) overlapped += 1;
        return undefined;
      },
    );
    h.loop.start();
    await h.loop.firstSync;
    // A change every 10 ms for 1.5 s: a sync is always running, due or waiting for its budget.
    const checkTimes: number[] = [];
    const seen = (): void => {
      while (checkTimes.length < h.checks.length) checkTimes.push(Date.now());
    };
    const t0 = Date.now();
    while (Date.now() - t0 < 1500) {
      h.setState(stateWith((n = (n % 5) + 1)));
      h.loop.markDirty();
      await sleep(10);
      seen();
    }
    const partials = h.calls.filter((c) => !c.full).length;
    await h.loop.stop();
    assert.ok(partials >= 20, `the churn kept the loop busy (${partials} partial syncs)`);
    assert.ok(h.checks.length >= 1500 / INTERVAL - 4, `${h.checks.length} drift checks in 1.5 s of churn with a ${INTERVAL} ms interval`);
    const gaps = checkTimes.slice(1).map((t, i) => t - checkTimes[i]!);
    assert.ok(Math.max(...gaps) < 3 * INTERVAL, `longest gap between drift checks ${Math.max(...gaps)} ms`);
    assert.equal(overlapped, 0, 'no drift check ran while a sync was applying');
  });

  void test('fullResyncIntervalMs: a full sync that long after the last full one, without any event; none after stop()', async () => {
    const h = harness({ fullResyncIntervalMs: 60 });
    h.loop.start();
    await until(() => h.calls.length >= 3, 'two periodic full syncs', 3000);
    assert.deepEqual(
      h.calls.slice(0, 3).map((c) => c.full),
      [true, true, true],
    );
    const gap = h.calls[1]!.start - h.calls[0]!.end;
    assert.ok(gap >= 55, `the resync came ${gap} ms after the first sync, expected >= 60`);
    assert.equal(h.checks.length, 0, 'no drift check without checkDrift');
    await h.loop.stop();
    const n = h.calls.length;
    await sleep(150);
    assert.equal(h.calls.length, n, 'no resync after stop()');
  });

  void test('liveness turns false while one sync hangs longer than the limit, and stop() waits for it', async () => {
    let release: () => void = () => {};
    const h = harness({ stuckAfterMs: 400 }, (n) => (n === 0 ? new Promise<void>((r) => (release = r)) : Promise.resolve()));
    h.loop.start();
    await sleep(30);
    assert.equal(h.loop.live(), true, 'live while the sync is young');
    await sleep(500);
    assert.equal(h.loop.live(), false, 'not live once the sync is stuck');
    let stopped = false;
    const stopping = h.loop.stop().then(() => (stopped = true));
    await sleep(20);
    assert.equal(stopped, false, 'stop() waits for the running sync');
    release();
    await stopping;
    assert.equal(h.loop.live(), true);
  });

  void test('slice-change latency is observed once the rules are applied', async () => {
    const h = harness();
    h.loop.start();
    await h.loop.firstSync;
    const before = Date.now();
    h.loop.noteSliceChange('ns/s-1', before - 2000, before - 5000);
    h.loop.noteSliceChange('ns/s-1', before, before); // a second change of the same slice: the first counts
    h.setState(stateWith(3));
    h.loop.markDirty();
    await until(() => h.calls.length === 2, 'partial sync');
    await sleep(10);
    const slice = await histogram(h.registry, 'slice_change_to_rules_seconds');
    assert.equal(slice.count, 1);
    assert.ok(slice.sum >= 2 && slice.sum < 3, `latency ${slice.sum} s for a change observed 2 s earlier`);
    const trigger = await histogram(h.registry, 'trigger_to_rules_seconds');
    assert.equal(trigger.count, 1);
    assert.ok(trigger.sum >= 5 && trigger.sum < 6, `trigger latency ${trigger.sum} s`);
    await h.loop.stop();
  });

  void test('backoff doubles from min and stops at max', () => {
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6, 100].map((f) => backoffMs(f, 100, 1000)),
      [100, 200, 400, 800, 1000, 1000, 1000],
    );
  });

  void test('sync budget: a full bucket starts at once, an empty one waits for a refill, interval 0 never waits', () => {
    let b = fullBudget(2);
    assert.equal(budgetDelayMs(b, 0, 100, 2), 0);
    b = spendBudget(b, 0, 100, 2);
    assert.equal(budgetDelayMs(b, 0, 100, 2), 0, 'the second of the burst');
    b = spendBudget(b, 0, 100, 2);
    assert.equal(budgetDelayMs(b, 0, 100, 2), 100, 'the third waits one interval');
    assert.equal(budgetDelayMs(b, 50, 100, 2), 50);
    assert.equal(budgetDelayMs(b, 100, 100, 2), 0);
    assert.equal(budgetAt(b, 10_000, 100, 2), 2, 'never more than the burst');
    assert.equal(budgetDelayMs(spendBudget(spendBudget(fullBudget(1), 0, 0, 1), 0, 0, 1), 0, 0, 1), 0);
  });

  void test('property: syncs started when the budget allows never exceed burst + window / interval in any window', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 500 }), fc.array(fc.integer({ min: 0, max: 300 }), { maxLength: 60 }), (burst, interval, gaps) => {
        // Wants arrive after each gap; each starts when the budget allows (as the loop does).
        let b = fullBudget(burst);
        let t = 0;
        const starts: number[] = [];
        for (const g of gaps) {
          t = Math.max(t + g, starts.at(-1) ?? -Infinity);
          t += budgetDelayMs(b, t, interval, burst);
          b = spendBudget(b, t, interval, burst);
          starts.push(t);
        }
        for (let i = 0; i < starts.length; i++) {
          for (let j = i; j < starts.length; j++) if (j - i + 1 > burst + (starts[j]! - starts[i]!) / interval + 1e-9) return false;
        }
        return true;
      }),
    );
  });
});

void describe('sync loop: starting a sync with no wait due', () => {
  void test('runs in the same turn (setImmediate), ahead of a 0 ms timer armed first, which Node clamps to 1 ms; a cancelled start never runs', async () => {
    const order: string[] = [];
    await new Promise<void>((resolve) => {
      // Inside an I/O callback the check phase (setImmediate) always comes before the next timers phase.
      stat('.', () => {
        setTimeout(() => {
          order.push('timer armed first');
          resolve();
        }, 0);
        startSoon(() => order.push('sync'), 0);
        const cancel = startSoon(() => order.push('cancelled'), 0);
        cancel();
        const later = startSoon(() => order.push('cancelled timer'), 5);
        later();
      });
    });
    await sleep(20);
    assert.deepEqual(order, ['sync', 'timer armed first']);
  });
});
