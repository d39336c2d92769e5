/**
 * The V8 heap as a Node.js program's prom-client metrics report it (the sidecar's lean set has the
 * same names): in use and reserved. B5 reads it from the sidecar's /metrics to split private
 * memory into heap and the rest, for each runtime.
 */
export interface HeapFigures {
  /** MiB in use (NaN when the metric is missing). */
  readonly used: number;
  /** MiB reserved. */
  readonly total: number;
}

const MIB = 2 ** 20;

/** Reads `<prefix>_nodejs_heap_size_{used,total}_bytes` from exposition text. */
export function parseHeapMetrics(text: string, prefix: string): HeapFigures {
  const read = (name: string): number => {
    const m = new RegExp(`^${prefix}_nodejs_${name} (\\S+)$`, 'm').exec(text);
    return m?.[1] ? Number(m[1]) / MIB : NaN;
  };
  return { used: read('heap_size_used_bytes'), total: read('heap_size_total_bytes') };
}

/** MiB in use per V8 heap space (`<prefix>_nodejs_heap_space_size_used_bytes{space="…"}`: new, old, code, …). */
export function heapSpaces(text: string, prefix: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of text.matchAll(new RegExp(`^${prefix}_nodejs_heap_space_size_used_bytes\\{space="([^"]+)"\\} (\\S+)$`, 'gm'))) out[m[1] ?? ''] = Number(m[2]) / MIB;
  return out;
}

/**
 * Seconds spent in GC so far: the sum of `<prefix>_nodejs_gc_duration_seconds_sum` over its kinds
 * (prom-client's GC observer; wall time of each pause). NaN when absent (the sidecar's lean metrics).
 */
export function gcSeconds(text: string, prefix: string): number {
  const re = new RegExp(`^${prefix}_nodejs_gc_duration_seconds_sum\\{[^}]*\\} (\\S+)$`, 'gm');
  let sum = NaN;
  for (const m of text.matchAll(re)) sum = (Number.isNaN(sum) ? 0 : sum) + Number(m[1]);
  return sum;
}

/** The pause (ms) of one `--trace-gc` line, Node 20's ("…MB, 0.50 / 0.00 ms") and Node 24's ("…MB, pooled: 0 MB, 0.50 / 0.00 ms") formats; undefined for other lines. */
export function gcPauseMs(line: string): number | undefined {
  const m = /ms: (?:Scavenge|Mark-Compact|Minor Mark-Sweep|Mark-Sweep)[^,]*MB, (?:pooled: [\d.]+ MB, )?([\d.]+) \/ [\d.]+ ms/.exec(line);
  return m?.[1] !== undefined ? Number(m[1]) : undefined;
}
