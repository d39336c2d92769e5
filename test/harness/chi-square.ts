/**
 * Pearson's chi-square test of "every backend gets an equal share" for the load-balancing tests:
 * a random choice per connection gives counts that differ, so equality is judged against the
 * spread chance allows. α = 0.001: a correct balancer fails one run in a thousand, a balancer
 * that sends everything to one of two backends fails at once from ~20 requests on. Pure.
 */

/** Critical values of the chi-square distribution at α = 0.001, by degrees of freedom (1-10). */
const CRITICAL_0_001 = [10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322, 26.124, 27.877, 29.588];

export interface UniformTest {
  readonly statistic: number;
  readonly degreesOfFreedom: number;
  readonly critical: number;
  /** true: the counts are consistent with equal shares at α = 0.001. */
  readonly uniform: boolean;
}

export function chiSquareUniform(counts: readonly number[]): UniformTest {
  const k = counts.length;
  const total = counts.reduce((a, b) => a + b, 0);
  const critical = CRITICAL_0_001[k - 2];
  if (critical === undefined) throw new Error(`chiSquareUniform: ${k} backends; it knows 2 to ${CRITICAL_0_001.length + 1}`);
  // Expected at least 5 per cell, the usual validity condition of the approximation.
  if (total < 5 * k) throw new Error(`chiSquareUniform: ${total} samples over ${k} backends; need at least ${5 * k}`);
  const expected = total / k;
  const statistic = counts.reduce((s, o) => s + (o - expected) ** 2 / expected, 0);
  return { statistic, degreesOfFreedom: k - 1, critical, uniform: statistic <= critical };
}
