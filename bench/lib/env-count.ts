/**
 * A count a benchmark takes from an environment variable (B3_CYCLES, …): unset or empty is the
 * benchmark's own size; anything else must be a whole number in range, or the run stops with a
 * message naming the variable, the value and the fix, rather than running a size nobody asked for.
 */
export function parseCount(name: string, raw: string | undefined, fallback: number, max: number): number {
  if (raw === undefined || raw.trim() === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > max) throw new Error(`${name}=${JSON.stringify(raw)}: not a whole number from 1 to ${max}; unset it for the default ${fallback}`);
  return n;
}
