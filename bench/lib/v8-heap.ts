/**
 * The V8 heap as a Node.js program's prom-client default metrics report it: in use, reserved, and
 * reserved per heap space. B5 reads it from the sidecar's /metrics to split private memory into
 * heap and the rest, and to show where two V8 versions size the heap differently (V8 12+ has a
 * `trusted` space, for example, that V8 11 does not).
 */
export interface HeapFigures {
  /** MiB in use (NaN when the metric is missing). */
  readonly used: number;
  /** MiB reserved. */
  readonly total: number;
  /** MiB reserved per space, by V8's space name (`old`, `new`, `code`, `trusted`, ...). */
  readonly spaces: ReadonlyMap<string, number>;
}

const MIB = 2 ** 20;

/** Reads `<prefix>_nodejs_heap_size_{used,total}_bytes` and `<prefix>_nodejs_heap_space_size_total_bytes{space="..."}` from exposition text. */
export function parseHeapMetrics(text: string, prefix: string): HeapFigures {
  const read = (name: string): number => {
    const m = new RegExp(`^${prefix}_nodejs_${name} (\\S+)$`, 'm').exec(text);
    return m?.[1] ? Number(m[1]) / MIB : NaN;
  };
  const spaces = new Map<string, number>();
  for (const m of text.matchAll(new RegExp(`^${prefix}_nodejs_heap_space_size_total_bytes\\{space="([^"]+)"\\} (\\S+)$`, 'gm'))) {
    if (m[1] && m[2]) spaces.set(m[1], Number(m[2]) / MIB);
  }
  return { used: read('heap_size_used_bytes'), total: read('heap_size_total_bytes'), spaces };
}
