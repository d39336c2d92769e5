/**
 * Service semantics on the packet tracer, both back ends, no root: every row of the shared case
 * table (test/harness/tracer/cases.ts) applied in order as the project's renderers write it (a full
 * text, then partial ones), each probe answered as the row expects, in equal shares, with the
 * refusal the row names; and each row's answers the same from a fresh full sync.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKENDS, FakeSidecar } from '../../harness/tracer/sidecar.js';
import { CLIENT, SERVICE_CASES, TRACER_ONLY_CASES, expected, observe, packetOf, rejectKind, traceProbe, type ServiceCase } from '../../harness/tracer/cases.js';

const ROWS: readonly ServiceCase[] = [...SERVICE_CASES, ...TRACER_ONLY_CASES];

for (const kind of BACKENDS)
  void describe(`packet tracer (${kind}): Service cases`, () => {
    const ns = new FakeSidecar(kind);
    ROWS.forEach(
      (row, i) =>
        void test(row.name, () => {
          ns.sync(row.state(), i === 0);
          const fresh = new FakeSidecar(kind);
          fresh.sync(row.state(), true);
          for (const probe of row.probes) {
            const what = `${probe.protocol} ${probe.dst}:${probe.port}`;
            const shares = new Map<string, number>();
            assert.equal(traceProbe(ns, probe, shares), expected(probe.expect), what);
            if ('reach' in probe.expect) for (const [name, share] of shares) assert.ok(Math.abs(share - 1 / shares.size) < 1e-6, `${what}: ${name} gets ${share}, not 1/${shares.size}`);
            if ('refused' in probe.expect) assert.equal(rejectKind(ns.trace(packetOf(probe))), probe.expect.refused, what);
            // A sticky probe made a connection on `ns`; the fresh one has none, so it spreads.
            const plain = 'sticky' in probe.expect ? `reach ${[...probe.expect.sticky].sort().join(',')}` : expected(probe.expect);
            assert.equal(observe(fresh.trace(packetOf(probe)), probe.protocol), plain, `${what}: a fresh full sync`);
          }
        }),
    );

    void test('affinity is per client: another client of the same Service still spreads', () => {
      const row = SERVICE_CASES.find((r) => r.probes.some((p) => 'sticky' in p.expect));
      assert.ok(row);
      const f = new FakeSidecar(kind);
      f.sync(row.state(), true);
      const probe = row.probes[0];
      assert.ok(probe !== undefined && 'sticky' in probe.expect);
      assert.match(traceProbe(f, probe), /^one of b1,b2,b3, every time$/);
      const other = { ...packetOf(probe), src: '192.168.101.9' };
      assert.equal(observe(f.trace(other), 'tcp'), 'reach b1,b2,b3');
      assert.equal(packetOf(probe).src, CLIENT.ipv4);
    });
  });
