/**
 * The node agent's Service cases (test/harness/tracer/node-cases.ts) on the packet tracer, both
 * back ends, no root: NodePort and LoadBalancer, Cluster (masqueraded) and Local (the client
 * address kept, local endpoints only; none: refused for a node port, dropped for an ingress IP),
 * source ranges, UDP, IPv6, and a host-network process reaching a cluster IP; each in equal
 * shares and with the refusal the row names.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeNode } from '../../harness/tracer/node.js';
import { HTTP, NODE_CASES, POD, UDP, nodeExpected, nodeObservation, nodePacket, nodeState, podAt } from '../../harness/tracer/node-cases.js';
import { BACKENDS } from '../../harness/tracer/sidecar.js';
import { summarize } from '../../harness/tracer/walk.js';

for (const kind of BACKENDS)
  void describe(`packet tracer (${kind}): the node agent's Service cases`, () => {
    const nodes = { n1: new FakeNode(kind), n2: new FakeNode(kind) };
    nodes.n1.sync(nodeState('n1'), true);
    nodes.n2.sync(nodeState('n2'), true);
    for (const row of NODE_CASES)
      void test(row.name, () => {
        const { pkt, path } = nodePacket(row);
        const outcomes = nodes[row.node].trace(pkt, path);
        const got = summarize(outcomes);
        const e = row.expect;
        // The words the kernel test compares with.
        assert.equal(nodeObservation(outcomes), nodeExpected(e));
        if ('reach' in e) {
          const port = row.protocol === 'udp' ? UDP : HTTP;
          assert.deepEqual(
            got.map((g) => g.verdict),
            e.reach.map((p) => ({ kind: 'dnat', ip: pkt.family === 4 ? POD[p].ipv4 : POD[p].ipv6, port, masquerade: e.masquerade })),
            got.map((g) => `${g.verdict.kind === 'dnat' ? podAt(g.verdict.ip) : g.verdict.kind} ${g.share}`).join(', '),
          );
          for (const g of got) assert.ok(Math.abs(g.share - 1 / got.length) < 1e-6, `share ${g.share}`);
        } else assert.deepEqual(got, [{ verdict: 'refused' in e ? { kind: 'reject', with: e.refused } : { kind: 'drop' }, share: 1 }]);
      });
  });
