/** The sidecar runtime's named parts, alone: the pod's last good input, and the cap notice said once per change. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import pino from 'pino';
import { PodInput } from '../../../cmd/sidecar/pod-input.js';
import { CapNotice } from '../../../cmd/sidecar/sync-report.js';
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
  assert.deepEqual(input.served.map((r) => `${r.namespace}/${r.name}`), ['ns/net-a']);
  input.read({ metadata: { namespace: 'ns', name: 'p', annotations: { [SERVICE_NETWORK]: 'Not A Name!' } } });
  input.read({ metadata: { namespace: 'ns', name: 'p', annotations: { [SERVICE_NETWORK]: 'Not A Name!' } } });
  assert.deepEqual(input.served.map((r) => `${r.namespace}/${r.name}`), ['ns/net-a'], 'the last good networks stay');
  assert.equal(lines.filter((l) => l.endsWith('(keeping the last good networks)')).length, 1, 'logged once while it lasts');
  assert.deepEqual(reads.filter(([k]) => k === 'service-network').map(([, e]) => e !== undefined), [false, true, true]);
});

void test('CapNotice says which Services are over the cap once per change, and when a network is within it again', () => {
  const { log, lines } = capture();
  const dropped: [string, number][] = [];
  const said: Say[] = [];
  const cap = new CapNotice(() => 2, log, { servicesDropped: (n, k) => void dropped.push([n, k]) }, (l) => said.push(...l));
  const over = [{ network: 'ns/net-a', total: 3, dropped: ['ns/c'] }];
  cap.note(over);
  cap.note(over);
  cap.note([]);
  assert.deepEqual(dropped, [['ns/net-a', 1], ['ns/net-a', 0]]);
  assert.equal(said.length, 1);
  assert.match(said[0]?.message ?? '', /network ns\/net-a has 3 Services, more than this sidecar serves \(2, MAX_SERVICES_PER_NETWORK\); 1 not served/);
  assert.deepEqual(lines, ['more Services than the cap on this network; the last in namespace/name order are not served', 'Services on the network are within the cap again; all are served']);
});
