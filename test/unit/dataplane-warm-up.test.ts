/**
 * The first nftables sync's render warm-up (src/dataplane/nft/warm-up.ts, with-warm-up.ts):
 * when it is due (warmUpDue), that its synthetic state is valid, that it leaves nothing behind that
 * changes a real sync's text, and that it runs on the next turn of the event loop only if no sync
 * started before.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { render, RenderCache } from '../../src/dataplane/core/incremental.js';
import { NftStage } from '../../src/dataplane/nftables/stage.js';
import { planNft } from '../../src/dataplane/nftables/render.js';
import { warmUpDue, warmUpRender, warmUpState, WARM_UP_SERVICES } from '../../src/dataplane/nftables/tuning/warm-up.js';
import { sidecarDataplaneOptions } from '../../cmd/sidecar/dataplane-options.js';
import type { Dataplane, SyncResult } from '../../src/dataplane/index.js';
import { withWarmUp } from '../../src/dataplane/tuning/with-warm-up.js';
import { sampleState, SHAPE_STATES } from '../sidecar/render-fixtures.js';
import type { DesiredState } from '../../src/dataplane/core/model.js';

void test('warmUpDue: only when asked and for nftables; the sidecar asks in its run mode, not with --cleanup', () => {
  assert.equal(warmUpDue({ asked: true, rules: 'nftables' }), true);
  assert.equal(warmUpDue({ asked: false, rules: 'nftables' }), false, 'not asked (the node agent, --cleanup)');
  assert.equal(warmUpDue({ asked: true, rules: 'iptables' }), false, 'an iptables first sync renders no nftables stage');
  const settings = { iptablesBackend: 'auto', elementWriter: '/usr/local/bin/nfnl-batch' } as const;
  assert.equal(sidecarDataplaneOptions({ ...settings, cleanup: false }, 'nftables').warmUp, true);
  assert.equal(sidecarDataplaneOptions({ ...settings, cleanup: true }, 'nftables').warmUp, undefined, '--cleanup: no warm-up');
});

const fullText = (state: DesiredState): string => planNft(new NftStage().step(render(state, new RenderCache())), undefined, true, []).text;

void test('warmUpState: every Service port is served, without warnings, with the rarer shapes among them', () => {
  const state = warmUpState();
  assert.equal(state.targets.length, WARM_UP_SERVICES);
  const r = render(state, new RenderCache());
  assert.deepEqual(r.resolution.warnings, []);
  assert.deepEqual(r.resolution.skipped, []);
  assert.equal(r.resolution.targets.length, WARM_UP_SERVICES);
  assert.ok(state.targets.some((t) => t.protocol === 'UDP') && state.targets.some((t) => t.affinityTimeoutSeconds !== undefined));
  assert.ok(r.resolution.targets.every((t) => t.choice === 'ready'));
  assert.ok(
    state.targets.some((t) => t.endpoints.some((e) => e.terminating)),
    'a terminating endpoint beside ready ones',
  );
  assert.ok(warmUpRender() > 0, 'the warm-up renders a table');
  assert.deepEqual(warmUpState(), state, 'pure: the same state each time');
});

void test('a real full sync text is byte-identical with and without a warm-up before it', () => {
  const states = [sampleState(), ...Object.values(SHAPE_STATES)];
  // Without: the first full texts in this process's fresh caches (the warm-up shares no cache).
  const without = states.map(fullText);
  warmUpRender();
  warmUpRender({ maxEndpointMaps: 0 });
  assert.deepEqual(states.map(fullText), without);
});

function fakeDataplane(log: string[]): Dataplane {
  const result = {} as SyncResult;
  return {
    sync: () => (log.push('sync'), Promise.resolve(result)),
    checkDrift: () => Promise.resolve(undefined),
    cleanup: () => Promise.reject(new Error('not here')),
    backend: () => Promise.resolve('nftables'),
    close: () => log.push('close'),
  };
}

void test('withWarmUp: runs once on the next turn when no sync came first', async () => {
  const log: string[] = [];
  const dp = withWarmUp(fakeDataplane(log), () => log.push('warm'));
  assert.deepEqual(log, [], 'not synchronously: the dataplane is made first');
  await nextTurn();
  await nextTurn();
  await dp.sync({} as never, { full: true });
  await nextTurn();
  assert.deepEqual(log, ['warm', 'sync']);
});

void test('withWarmUp: skipped when the first sync starts before it ran, or the dataplane closed', async () => {
  const log: string[] = [];
  const dp = withWarmUp(fakeDataplane(log), () => log.push('warm'));
  await dp.sync({} as never, { full: true });
  await nextTurn();
  await nextTurn();
  assert.deepEqual(log, ['sync'], 'a real sync is never delayed nor followed by a warm-up');
  const closed: string[] = [];
  withWarmUp(fakeDataplane(closed), () => closed.push('warm')).close();
  await nextTurn();
  assert.deepEqual(closed, ['close']);
});

void test('withWarmUp: a failing warm-up is logged, not thrown', async () => {
  const warned: unknown[] = [];
  const logger = { warn: (...a: unknown[]) => warned.push(a) } as never;
  withWarmUp(
    fakeDataplane([]),
    () => {
      throw new Error('bug');
    },
    logger,
  );
  await nextTurn();
  assert.equal(warned.length, 1);
});
