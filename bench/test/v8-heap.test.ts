/** B5's reading of the sidecar's V8 heap from prom-client's default metrics (prom-client's exposition text). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gcPauseMs, gcSeconds, heapSpaces, parseHeapMetrics } from '../lib/v8-heap.js';

const TEXT = `# HELP multus_proxy_sidecar_nodejs_heap_size_total_bytes Process heap size from Node.js in bytes.
# TYPE multus_proxy_sidecar_nodejs_heap_size_total_bytes gauge
multus_proxy_sidecar_nodejs_heap_size_total_bytes 12582912
multus_proxy_sidecar_nodejs_heap_size_used_bytes 9437184
multus_proxy_sidecar_nodejs_heap_space_size_total_bytes{space="read_only"} 0
multus_proxy_sidecar_nodejs_heap_space_size_total_bytes{space="new"} 1048576
multus_proxy_sidecar_nodejs_heap_space_size_total_bytes{space="old"} 7340032
multus_proxy_sidecar_nodejs_heap_space_size_total_bytes{space="trusted"} 1433600
multus_proxy_sidecar_nodejs_heap_space_size_used_bytes{space="old"} 7000000
other_nodejs_heap_size_used_bytes 1
`;

void test('parseHeapMetrics: used and reserved in MiB, only under the prefix', () => {
  const h = parseHeapMetrics(TEXT, 'multus_proxy_sidecar');
  assert.equal(h.total, 12);
  assert.equal(h.used, 9);
  const none = parseHeapMetrics('', 'multus_proxy_sidecar');
  assert.ok(Number.isNaN(none.used) && Number.isNaN(none.total));
});

void test('heapSpaces: MiB in use per space, only the used figures under the prefix', () => {
  assert.deepEqual(heapSpaces(TEXT, 'multus_proxy_sidecar'), { old: 7000000 / 2 ** 20 });
  assert.deepEqual(heapSpaces(TEXT, 'other'), {});
});

void test('gcSeconds: GC pause seconds summed over the kinds, only under the prefix; NaN without the metric', () => {
  const text = [
    'multus_proxy_node_nodejs_gc_duration_seconds_bucket{le="0.001",kind="minor"} 10',
    'multus_proxy_node_nodejs_gc_duration_seconds_sum{kind="minor"} 0.25',
    'multus_proxy_node_nodejs_gc_duration_seconds_sum{kind="major"} 1.5',
    'multus_proxy_node_nodejs_gc_duration_seconds_count{kind="major"} 3',
    'other_nodejs_gc_duration_seconds_sum{kind="major"} 100',
  ].join('\n');
  assert.equal(gcSeconds(text, 'multus_proxy_node'), 1.75);
  assert.ok(Number.isNaN(gcSeconds(TEXT, 'multus_proxy_sidecar')));
});

void test('gcPauseMs: the pause of a --trace-gc line, Node 20 and Node 24 formats; other lines undefined', () => {
  assert.equal(gcPauseMs('[25286:0xc407d60]       44 ms: Scavenge 3.8 (4.0) -> 3.4 (5.0) MB, 15.68 / 0.00 ms  (average mu = 1.000, current mu = 1.000) allocation failure; '), 15.68);
  assert.equal(gcPauseMs('[25269:0x1be9a000]      132 ms: Scavenge 4.7 (5.8) -> 4.3 (6.8) MB, pooled: 0 MB, 1.32 / 0.00 ms  (average mu = 1.000, current mu = 1.000) allocation failure; '), 1.32);
  assert.equal(
    gcPauseMs(
      '[25269:0x1be9a000]     5012 ms: Mark-Compact (reduce) 9.1 (12.0) -> 8.2 (10.0) MB, pooled: 0 MB, 6.50 / 0.00 ms  (+ 1.2 ms in 4 steps since start of marking, biggest step 0.6 ms, walltime since start of marking 9 ms) (average mu = 0.99, current mu = 0.98) memory reducer; GC in old space requested',
    ),
    6.5,
  );
  assert.equal(gcPauseMs('{"level":30,"msg":"rules applied","ms":12}'), undefined);
});
