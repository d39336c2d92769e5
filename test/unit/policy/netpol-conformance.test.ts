/**
 * The real-node conformance matrix's cases (test/node/netpol-cases.ts) checked without a node:
 * every case's policies pass the webhook's checker, and every cell of its expected truth table
 * (written as the upstream test writes it) is what the project's own pipeline answers: the
 * resolver compiles each of the nine pods' policy, the nftables render writes it on a fake
 * sidecar per pod, and the packet tracer sends each probe out of the client's table and into the
 * server's. A table that disagrees is a wrong mapping or a wrong pipeline; either way the
 * real-node run would fail the same cell.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { checkPolicy } from '../../../src/policy/validate.js';
import { resolvePodPolicy } from '../../../src/policy/resolve.js';
import { withPodPolicy } from '../../../src/dataplane/policy-support.js';
import type { DesiredState } from '../../../src/dataplane/core/model.js';
import { FakeSidecar } from '../../harness/tracer/sidecar.js';
import {
  afterCase,
  allowAll,
  casePolicies,
  CASES,
  differingCells,
  expectedTable,
  modelLookup,
  modelPod,
  NETWORK,
  PAIRS,
  PODS,
  probeName,
  PROBES,
  Reachability,
  UPDATE_CASES,
  type Addresses,
  type Labels,
  type PodId,
  type Table,
} from '../../node/netpol-cases.js';

const ADDRESSES = Object.fromEntries(PODS.map((id, i) => [id, `10.1.9.${11 + i}`])) as Addresses;

const BASE: DesiredState = { targets: [], interfaces: [] };

/** The table the resolver, the render and the tracer answer for a case's policies (with the labels a change added). */
function pipelineTable(policies: ReturnType<typeof casePolicies>, labels: Labels = {}): Table {
  const sidecars = new Map<PodId, FakeSidecar>();
  const lookup = modelLookup(ADDRESSES, labels);
  for (const id of PODS) {
    const fake = new FakeSidecar('nftables');
    fake.sync(withPodPolicy(BASE, resolvePodPolicy(modelPod(id, ADDRESSES, labels), policies, lookup)));
    sidecars.set(id, fake);
  }
  const accepts = (fake: FakeSidecar | undefined, ...args: Parameters<FakeSidecar['trace']>): boolean => (fake?.trace(...args) ?? []).every((o) => o.verdict.kind === 'accept');
  const out: Table = {};
  for (const p of PROBES) {
    const row: Record<string, boolean> = {};
    for (const [f, t] of PAIRS) {
      const pkt = { family: 4, protocol: p.protocol === 'TCP' ? 'tcp' : 'udp', src: ADDRESSES[f], dst: ADDRESSES[t], dport: p.port } as const;
      const out = accepts(sidecars.get(f), pkt, { hook: 'output', route: () => 'net1' });
      const into = accepts(sidecars.get(t), { ...pkt, iif: 'net1' }, { hook: 'prerouting', local: [ADDRESSES[t]] });
      row[`${f}>${t}`] = out && into;
    }
    out[probeName(p)] = row;
  }
  return out;
}

void describe('netpol conformance cases (the real-node matrix) against the pipeline', () => {
  void test('the cases: at least 30, distinct upstream titles, every policy admitted by the checker', () => {
    assert.ok(CASES.length >= 30, `${CASES.length} cases`);
    assert.equal(new Set(CASES.map((c) => c.upstream)).size, CASES.length);
    for (const c of CASES)
      for (const p of casePolicies(c, ADDRESSES)) {
        const r = checkPolicy(p);
        assert.ok(r.ok, `${c.upstream}: ${p.metadata?.name}: ${r.ok ? '' : r.error.message}`);
      }
  });

  void test('no policy: the pipeline reaches every pair on every probe', () => {
    assert.deepEqual(differingCells(allowAll(), pipelineTable([])), []);
  });

  for (const c of CASES)
    void test(c.upstream, () => {
      const expected = expectedTable(c);
      assert.deepEqual(differingCells(expected, pipelineTable(casePolicies(c, ADDRESSES))), []);
    });

  for (const u of UPDATE_CASES)
    void test(`${u.upstream}: the table before, then after ${u.change.what}`, () => {
      assert.deepEqual(differingCells(expectedTable(u.before), pipelineTable(casePolicies(u.before, ADDRESSES))), [], 'before');
      const after = afterCase(u);
      assert.deepEqual(differingCells(expectedTable(after), pipelineTable(casePolicies(after, ADDRESSES), u.change.labels)), [], 'after');
      assert.notDeepEqual(expectedTable(u.before), expectedTable(after), 'the change changes the table');
      for (const p of casePolicies(after, ADDRESSES)) assert.ok(checkPolicy(p).ok, `${p.metadata?.name}`);
    });

  void test('every case denies something (a case whose table is all allowed is one of the allow-all cases)', () => {
    const open = CASES.filter((c) => differingCells(allowAll(), expectedTable(c)).length === 0).map((c) => c.upstream);
    assert.deepEqual(open, [
      'should enforce policy to allow ingress traffic from pods in all namespaces',
      'should support allow-all policy',
      'should enforce multiple ingress policies with ingress allow-all policy taking precedence',
      'should enforce multiple egress policies with egress allow-all policy taking precedence',
      'should ensure an IP overlapping both IPBlock.CIDR and IPBlock.Except is allowed',
    ]);
  });

  void test('differingCells names the probe, the pair and both answers', () => {
    const expected = expectedTable({ upstream: 't', policies: () => [], expect: () => new Reachability().expect('x/a', 'y/b', false) });
    assert.deepEqual(differingCells(expected, allowAll()), [
      'TCP/80 x/a -> y/b: expected deny, observed allow',
      'TCP/81 x/a -> y/b: expected deny, observed allow',
      'UDP/80 x/a -> y/b: expected deny, observed allow',
      'UDP/81 x/a -> y/b: expected deny, observed allow',
    ]);
    assert.equal(NETWORK.subnet, '10.1.9.0/24');
  });
});
