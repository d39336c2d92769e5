/** The sidecar runtime's named parts, alone: the pod's last good input, and the cap report said once per change. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import pino from 'pino';
import { PodInput } from '../../../cmd/sidecar/pod-input.js';
import { CapReporter } from '../../../cmd/sidecar/cap-report.js';
import type { SidecarMetrics } from '../../../cmd/sidecar/metrics.js';
import type { Say } from '../../../cmd/sidecar/problems.js';

function capture(): { log: pino.Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _e, done) {
      lines.push((JSON.parse(chunk.toString()) as { msg: string }).msg);
      done();
    },
  });
  return { log: pino({ level: 'info' }, sink), lines };
}

const SERVICE_NETWORK = 'k8s.v1.cni.cncf.io/service-network';

void test('PodInput keeps the last good networks through a malformed update, says so once, and reports each read', () => {
  const { log, lines } = capture();
  const reads: [string, string | undefined][] = [];
  const input = new PodInput(log, (key, error) => reads.push([key, error]));
  input.read({ metadata: { namespace: 'ns', name: 'p', annotations: { [SERVICE_NETWORK]: 'net-a' } } });
  assert.deepEqual(
    input.served.map((r) => `${r.namespace}/${r.name}`),
    ['ns/net-a'],
  );
  input.read({ metadata: { namespace: 'ns', name: 'p', annotations: { [SERVICE_NETWORK]: 'Not A Name!' } } });
  input.read({ metadata: { namespace: 'ns', name: 'p', annotations: { [SERVICE_NETWORK]: 'Not A Name!' } } });
  assert.deepEqual(
    input.served.map((r) => `${r.namespace}/${r.name}`),
    ['ns/net-a'],
    'the last good networks stay',
  );
  assert.equal(lines.filter((l) => l.endsWith('(keeping the last good networks)')).length, 1, 'logged once while it lasts');
  assert.deepEqual(
    reads.filter(([k]) => k === 'service-network').map(([, e]) => e !== undefined),
    [false, true, true],
  );
});

void test('CapReporter says which namespace is over its share once per change, and when a network is within the cap again', () => {
  const { log, lines } = capture();
  const dropped: [string, number][] = [];
  const said: Say[] = [];
  const metrics = { servicesDropped: (n: string, k: number) => void dropped.push([n, k]) } as unknown as SidecarMetrics;
  const cap = new CapReporter(2, { metrics, log, say: (l) => said.push(...l) });
  const over = [{ network: 'ns/net-a', total: 3, namespaces: [{ namespace: 'aaa', demand: 2, share: 1, dropped: ['aaa/c'] }] }];
  cap.served(['ns/net-b']);
  cap.over(over);
  cap.over(over);
  cap.served(['ns/net-a', 'ns/net-b']);
  cap.over([]);
  assert.deepEqual(
    dropped,
    [
      ['ns/net-b', 0],
      ['ns/net-a', 1],
      ['ns/net-a', 0],
    ],
    'a served network starts at 0 once; one already over keeps its count',
  );
  assert.equal(said.length, 1);
  assert.match(
    said[0]?.message ?? '',
    /network ns\/net-a has 3 Service ports \(targets\), more than this sidecar serves \(2, MAX_SERVICES_PER_NETWORK\); namespace aaa asks for 2, over its fair share of 1, so 1 of its Services are not served: aaa\/c/,
  );
  assert.deepEqual(lines, ['namespace over its share of the network; its own Services past the share are not served', 'targets on the network are within the cap again; all Services are served']);
});
