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
