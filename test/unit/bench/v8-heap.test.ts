/** B5's reading of the sidecar's V8 heap from prom-client's default metrics (prom-client's exposition text). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseHeapMetrics } from '../../../bench/lib/v8-heap.js';

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
