/**
 * The soak's judgement of memory ("every component's private memory is flat after
 * warm-up (slope ≤ 1 MiB per hour), or settles at a stated ceiling well under its limit"). Pure:
 * test/node/soak.ts samples, bench/soak.ts reports, the unit test feeds it recorded samples.
 *
 * The soak restarts the controller leader, a webhook pod and the client's sidecar every 20 min, so
 * one instance's slope cannot judge those: no leader lives 30 min after its warm-up. Two rules:
 * - flat: every instance followed at least `spanMinutes` after its warm-up grows ≤ `slopeMiBPerHour`
 *   (least squares). The witness sidecar (a client pod the soak never disrupts) and the node agent
 *   are judged so, and the webhook pod that survives the run.
 * - settles: the component's samples after each instance's warm-up, pooled across instances
 *   (every leader term, every webhook pod), split by time into thirds: the highest of the last
 *   third is at most the highest of the first third plus what the slope target allows between the
 *   thirds' middles (`slopeMiBPerHour` × hours between them). A leak that survives restarts (in
 *   the apiserver's objects a new leader lists, say) raises every term's ceiling and fails it; a
 *   term's own warm-up growth, repeated after each restart, does not. The ceiling (the highest
 *   sample judged) must also be at most `ceilingShareOfLimit` of the container's memory limit.
 */
import { slope } from './soak-analysis.js';

export type Component = 'sidecar (client)' | 'sidecar (witness)' | 'controller leader' | 'webhook' | 'node agent';

export interface MemorySample {
  readonly at: number;
  /** Minutes since the churn started. */
  readonly minute: number;
  readonly load1: number;
  readonly component: Component;
  readonly pod: string;
  /** The container's id (12 characters): a restart is a new instance. */
  readonly instance: string;
  readonly privateMiB: number;
  readonly rssMiB: number;
}

export interface InstanceSlope {
  readonly component: string;
  readonly instance: string;
  readonly pod: string;
  /** Samples after the warm-up. */
  readonly n: number;
  readonly firstMiB: number;
  readonly lastMiB: number;
  readonly maxMiB: number;
  /** MiB per hour over the samples after the warm-up (NaN with fewer than two). */
  readonly mibPerHour: number;
  /** Minutes from the first to the last sample after the warm-up. */
  readonly spanMinutes: number;
}

export interface MemoryRule {
  /** From each instance's first sample: a restarted container warms up again. */
  readonly warmupMinutes: number;
  readonly slopeMiBPerHour: number;
  /** An instance's slope counts only over at least this long after its warm-up. */
  readonly spanMinutes: number;
  /** The pooled samples must cover at least this long for the thirds (each a third of it). */
  readonly settleSpanMinutes: number;
  /** "Well under its limit": the ceiling at most this share of the memory limit. */
  readonly ceilingShareOfLimit: number;
}

/**
 * The containers' memory limits as deploy/ sets them (the controller's and webhook's Deployments,
 * the node agent's DaemonSet, the sidecar's resources in the webhook's config.yaml), MiB; the unit
 * test reads them back from those files.
 */
export const MEMORY_LIMITS_MIB: Readonly<Record<Component, number>> = { 'sidecar (client)': 128, 'sidecar (witness)': 128, 'controller leader': 256, webhook: 256, 'node agent': 256 };

export const MEMORY_RULE: MemoryRule = { warmupMinutes: 15, slopeMiBPerHour: 1, spanMinutes: 30, settleSpanMinutes: 60, ceilingShareOfLimit: 0.5 };

export interface Ceiling {
  /** Minutes the pooled samples after warm-up cover (first to last). */
  readonly spanMinutes: number;
  readonly n: number;
  readonly firstThirdMaxMiB: number;
  readonly lastThirdMaxMiB: number;
  /** What the slope target allows between the thirds' middles. */
  readonly marginMiB: number;
  /** The highest sample judged. */
  readonly maxMiB: number;
}

export type Verdict = 'flat' | 'settles' | 'grows' | 'not judged';

export interface ComponentMemory {
  readonly component: string;
  readonly limitMiB: number | undefined;
  readonly instances: number;
  /** Instances followed long enough for a slope, worst first. */
  readonly longLived: readonly InstanceSlope[];
  readonly ceiling: Ceiling | undefined;
  readonly verdict: Verdict;
  /** One sentence with the numbers behind the verdict. */
  readonly why: string;
}

/** Each instance's samples in order, keyed by component and instance. */
function byInstance(samples: readonly MemorySample[]): MemorySample[][] {
  const by = new Map<string, MemorySample[]>();
  for (const s of samples) {
    const key = `${s.component}|${s.instance}`;
    const list = by.get(key) ?? [];
    list.push(s);
    by.set(key, list);
  }
  return [...by.values()].map((l) => [...l].sort((a, b) => a.minute - b.minute));
}

/** The samples after their instance's warm-up (from its own first sample). */
export function afterWarmup(samples: readonly MemorySample[], warmupMinutes: number): MemorySample[] {
  return byInstance(samples).flatMap((all) => all.filter((s) => s.minute - (all[0]?.minute ?? 0) >= warmupMinutes));
}

export function slopes(samples: readonly MemorySample[], warmupMinutes: number): InstanceSlope[] {
  return byInstance(samples).map((all) => {
    const first = all[0];
    const after = afterWarmup(all, warmupMinutes);
    const ys = after.map((s) => s.privateMiB);
    return {
      component: first?.component ?? '',
      instance: first?.instance ?? '',
      pod: first?.pod ?? '',
      n: after.length,
      firstMiB: ys[0] ?? NaN,
      lastMiB: ys[ys.length - 1] ?? NaN,
      maxMiB: ys.length > 0 ? Math.max(...ys) : NaN,
      mibPerHour: slope(after.map((s) => ({ x: s.minute / 60, y: s.privateMiB }))),
      spanMinutes: after.length > 0 ? (after[after.length - 1]?.minute ?? 0) - (after[0]?.minute ?? 0) : 0,
    };
  });
}

/** The thirds rule over one component's samples after warm-up (all instances pooled); undefined when they cover too little time. */
export function ceiling(judged: readonly MemorySample[], rule: Pick<MemoryRule, 'slopeMiBPerHour' | 'settleSpanMinutes'>): Ceiling | undefined {
  if (judged.length === 0) return undefined;
  const from = Math.min(...judged.map((s) => s.minute));
  const to = Math.max(...judged.map((s) => s.minute));
  const span = to - from;
  if (span < rule.settleSpanMinutes) return undefined;
  const third = span / 3;
  const first = judged.filter((s) => s.minute <= from + third).map((s) => s.privateMiB);
  const last = judged.filter((s) => s.minute >= to - third).map((s) => s.privateMiB);
  if (first.length === 0 || last.length === 0) return undefined;
  // The thirds' middles are two thirds of the span apart.
  const marginMiB = rule.slopeMiBPerHour * ((2 * third) / 60);
  return { spanMinutes: span, n: judged.length, firstThirdMaxMiB: Math.max(...first), lastThirdMaxMiB: Math.max(...last), marginMiB, maxMiB: Math.max(...judged.map((s) => s.privateMiB)) };
}

const f1 = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : String(x));
const f2 = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : String(x));

/** The verdict for each component sampled, in the order first seen. */
export function judgeMemory(samples: readonly MemorySample[], limitsMiB: Readonly<Partial<Record<string, number>>>, rule: MemoryRule = MEMORY_RULE): ComponentMemory[] {
  const components = [...new Set(samples.map((s) => s.component))];
  return components.map((component) => {
    const own = samples.filter((s) => s.component === component);
    const inst = slopes(own, rule.warmupMinutes);
    const longLived = inst.filter((s) => s.spanMinutes >= rule.spanMinutes && Number.isFinite(s.mibPerHour)).sort((a, b) => b.mibPerHour - a.mibPerHour);
    const c = ceiling(afterWarmup(own, rule.warmupMinutes), rule);
    const limit = limitsMiB[component];
    const base = { component, limitMiB: limit, instances: inst.length, longLived, ceiling: c };
    const worst = longLived[0];
    if (worst !== undefined && worst.mibPerHour <= rule.slopeMiBPerHour) {
      return {
        ...base,
        verdict: 'flat',
        why: `${f2(worst.mibPerHour)} MiB/h at worst over ${longLived.length} instance(s) followed ≥ ${rule.spanMinutes} min after warm-up (${worst.pod}, ${f1(worst.spanMinutes)} min)`,
      };
    }
    const slopeText =
      worst !== undefined
        ? `not flat: ${worst.pod} ${f2(worst.mibPerHour)} MiB/h over ${f1(worst.spanMinutes)} min; `
        : `no instance followed ≥ ${rule.spanMinutes} min after warm-up (${inst.length} instances); `;
    if (c === undefined) return { ...base, verdict: 'not judged', why: `${slopeText}samples after warm-up cover < ${rule.settleSpanMinutes} min, too little for the thirds` };
    const thirds = `last third's max ${f1(c.lastThirdMaxMiB)} MiB vs first third's ${f1(c.firstThirdMaxMiB)} + ${f2(c.marginMiB)} allowed, over ${f1(c.spanMinutes)} min`;
    const underLimit = limit === undefined || c.maxMiB <= limit * rule.ceilingShareOfLimit;
    const ceilingText = `ceiling ${f1(c.maxMiB)} MiB${limit !== undefined ? ` of a ${limit} MiB limit` : ''}`;
    if (c.lastThirdMaxMiB <= c.firstThirdMaxMiB + c.marginMiB && underLimit) return { ...base, verdict: 'settles', why: `${slopeText}settles: ${thirds}; ${ceilingText}` };
    return { ...base, verdict: 'grows', why: `${slopeText}${underLimit ? 'grows' : `over ${rule.ceilingShareOfLimit * 100} % of its limit`}: ${thirds}; ${ceilingText}` };
  });
}
