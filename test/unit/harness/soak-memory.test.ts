/** The soak's memory judgement (test/node/soak-memory.ts) on the 2-hour soak's recorded samples and on made-up series. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { load, loadAll } from 'js-yaml';
import { judgeMemory, MEMORY_LIMITS_MIB, MEMORY_RULE, slopes, type Component, type MemorySample } from '../../node/soak-memory.js';

const ROOT = join(import.meta.dirname, '..', '..', '..');
/** The soak of 2026-11-26 22:57 (npm run bench -- soak, 2 hours): 600 samples, one a minute per container followed. */
const RECORD = join(ROOT, 'bench', 'records', 'soak-2026-11-26T22-57-08Z.json');
const recorded = JSON.parse(readFileSync(RECORD, 'utf8')) as { memory: MemorySample[]; options: { warmupMinutes: number } };

const byComponent = (samples: readonly MemorySample[]) =>
  new Map(judgeMemory(samples, MEMORY_LIMITS_MIB, { ...MEMORY_RULE, warmupMinutes: recorded.options.warmupMinutes }).map((v) => [v.component, v]));

void test('the recorded 2-hour soak: node agent flat (0.41 MiB/h); webhook not flat (2.37 MiB/h) but settles at 36.5 MiB; controller and client sidecar, restarted every 20 min, settle', () => {
  const v = byComponent(recorded.memory);
  const agent = v.get('node agent');
  assert.equal(agent?.verdict, 'flat', agent?.why);
  assert.ok(Math.abs((agent?.longLived[0]?.mibPerHour ?? NaN) - 0.408) < 0.01, agent?.why);

  const webhook = v.get('webhook');
  assert.equal(webhook?.verdict, 'settles', webhook?.why);
  assert.equal(webhook?.longLived[0]?.pod, 'multus-proxy-webhook-566b564b67-xr89m', 'the webhook pod that lived the whole run');
  assert.ok(Math.abs((webhook?.longLived[0]?.mibPerHour ?? NaN) - 2.37) < 0.01, webhook?.why);
  assert.ok(Math.abs((webhook?.ceiling?.maxMiB ?? NaN) - 36.54) < 0.01, webhook?.why);
  // It rose 35.5 → 36.5 between the thirds, within the 1.14 MiB that 1 MiB/h allows over ~69 min.
  assert.ok(Math.abs((webhook?.ceiling?.firstThirdMaxMiB ?? NaN) - 35.52) < 0.01 && Math.abs((webhook?.ceiling?.lastThirdMaxMiB ?? NaN) - 36.54) < 0.01, webhook?.why);

  const controller = v.get('controller leader');
  assert.equal(controller?.instances, 7, 'seven leader terms');
  assert.deepEqual(controller?.longLived, [], 'no leader lived 30 min after its warm-up');
  assert.equal(controller?.verdict, 'settles', controller?.why);
  assert.ok((controller?.ceiling?.maxMiB ?? NaN) < 25.1, controller?.why);

  const client = v.get('sidecar (client)');
  assert.equal(client?.verdict, 'settles', client?.why);
  assert.equal(v.get('sidecar (witness)'), undefined, 'no witness in that run');
});

void test('the recorded soak, per instance: warm-up from each instance’s own first sample (a leader elected at minute 11 is judged from minute 26)', () => {
  const s = slopes(recorded.memory, 15).find((x) => x.instance === 'e5b6c951ca6a');
  assert.equal(s?.component, 'controller leader');
  assert.equal(s?.n, 5);
  assert.ok(Math.abs((s?.spanMinutes ?? NaN) - 4) < 0.01);
});

/** One sample a minute for each instance: `mib(minuteOfRun, minuteOfInstance)`. */
function series(component: Component, terms: readonly { from: number; to: number }[], mib: (minute: number, age: number) => number): MemorySample[] {
  return terms.flatMap((t, i) =>
    Array.from({ length: t.to - t.from }, (_, k) => ({
      at: (t.from + k) * 60_000,
      minute: t.from + k,
      load1: 1,
      component,
      pod: `${component}-${i}`,
      instance: `i${i}`,
      privateMiB: mib(t.from + k, k),
      rssMiB: 0,
    })),
  );
}
const TERMS = Array.from({ length: 6 }, (_, i) => ({ from: i * 20, to: i * 20 + 20 }));

void test('a leader restarted every 20 min whose every term warms up the same way settles; one whose ceiling rises 1 MiB a term (3 MiB/h across restarts) grows', () => {
  // Warm-up growth in each term (2 MiB over its first 10 min, then flat), the same every term.
  const same = series('controller leader', TERMS, (_m, age) => 22 + Math.min(age, 10) * 0.2);
  const rule = { ...MEMORY_RULE, warmupMinutes: 5 };
  assert.equal(judgeMemory(same, MEMORY_LIMITS_MIB, rule)[0]?.verdict, 'settles');
  const leaking = series('controller leader', TERMS, (m, age) => 22 + Math.min(age, 10) * 0.2 + Math.floor(m / 20));
  const v = judgeMemory(leaking, MEMORY_LIMITS_MIB, rule)[0];
  assert.equal(v?.verdict, 'grows', v?.why);
  assert.match(v?.why ?? '', /last third's max 29\.0 MiB vs first third's 25\.0/);
});

void test('one instance for the whole run: ≤ 1 MiB/h is flat; 3 MiB/h steadily is neither flat nor settled; leveling off after a rise in the first third settles', () => {
  const whole = [{ from: 0, to: 120 }];
  assert.equal(
    judgeMemory(
      series('sidecar (witness)', whole, (m) => 20 + m / 120),
      MEMORY_LIMITS_MIB,
    )[0]?.verdict,
    'flat',
  );
  const steady = judgeMemory(
    series('sidecar (witness)', whole, (m) => 20 + m / 20),
    MEMORY_LIMITS_MIB,
  )[0];
  assert.equal(steady?.verdict, 'grows', steady?.why);
  assert.match(steady?.why ?? '', /not flat: sidecar \(witness\)-0 3\.00 MiB\/h/);
  const levels = judgeMemory(
    series('webhook', whole, (m) => 30 + 6 * (1 - Math.exp(-(m - 15) / 10))),
    MEMORY_LIMITS_MIB,
  )[0];
  assert.equal(levels?.verdict, 'settles', levels?.why);
});

void test('a flat series over half its limit is flat by slope, but a settled one over half its limit is not "well under" it; too little time is not judged', () => {
  const whole = [{ from: 0, to: 120 }];
  const high = judgeMemory(
    series('sidecar (client)', TERMS, () => 70),
    MEMORY_LIMITS_MIB,
  )[0];
  assert.equal(high?.verdict, 'grows', high?.why);
  assert.match(high?.why ?? '', /over 50 % of its limit.*ceiling 70\.0 MiB of a 128 MiB limit/);
  assert.equal(
    judgeMemory(
      series('webhook', whole, () => 30),
      MEMORY_LIMITS_MIB,
    )[0]?.verdict,
    'flat',
  );
  const short = judgeMemory(
    series('webhook', [{ from: 0, to: 5 }], () => 30),
    MEMORY_LIMITS_MIB,
    { ...MEMORY_RULE, warmupMinutes: 1 },
  )[0];
  assert.equal(short?.verdict, 'not judged');
});

void test('MEMORY_LIMITS_MIB are the limits deploy/ sets', () => {
  type Doc = { kind?: string; spec?: { template?: { spec?: { containers?: { resources?: { limits?: { memory?: string } } }[] } } }; data?: Record<string, string> };
  const limit = (file: string, kind: string): string | undefined =>
    (loadAll(readFileSync(join(ROOT, file), 'utf8')) as Doc[]).find((d) => d.kind === kind)?.spec?.template?.spec?.containers?.[0]?.resources?.limits?.memory;
  assert.equal(limit('deploy/base/webhook-deployment.yaml', 'Deployment'), `${MEMORY_LIMITS_MIB.webhook}Mi`);
  assert.equal(limit('deploy/base/controller-deployment.yaml', 'Deployment'), `${MEMORY_LIMITS_MIB['controller leader']}Mi`);
  assert.equal(limit('deploy/components/node-agent/daemonset.yaml', 'DaemonSet'), `${MEMORY_LIMITS_MIB['node agent']}Mi`);
  const config = (loadAll(readFileSync(join(ROOT, 'deploy/base/webhook-config.yaml'), 'utf8')) as Doc[]).find((d) => d.data?.['config.yaml'])?.data?.['config.yaml'] ?? '';
  const sidecar = (load(config) as { sidecar?: { resources?: { limits?: { memory?: string } } } }).sidecar?.resources?.limits?.memory;
  assert.equal(sidecar, `${MEMORY_LIMITS_MIB['sidecar (client)']}Mi`);
  assert.equal(MEMORY_LIMITS_MIB['sidecar (witness)'], MEMORY_LIMITS_MIB['sidecar (client)']);
});
