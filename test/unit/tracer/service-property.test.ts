/**
 * Property: for random sidecar states (Service ports of both families and three protocols, 0-4
 * endpoints each in any condition, with or without affinity), synced one after another as the
 * renderers write them (full, then partial; the third full again over the rules the others left,
 * as a restarted sidecar writes it: in bounded steps), the tracer answers every Service port as kube-proxy's
 * rule says, on both back ends: the ready endpoints in equal shares, else the serving terminating
 * ones, else a refusal (TCP reset, else port unreachable); a port no Service port has on a served cluster
 * IP is refused the same way, and an address no Service has is untouched.
 * The expectation is written here from the rule, not taken from the renderer.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { BACKENDS, FakeSidecar, type DesiredState, type ServicePortTarget } from '../../harness/tracer/sidecar.js';
import { summarize, type L4, type Verdict } from '../../harness/tracer/walk.js';
import { CLIENT_BLUE, target } from '../../sidecar/render-fixtures.js';

const PROTOCOLS = ['TCP', 'UDP', 'SCTP'] as const;
const COND = ['ready', 'unready', 'terminating', 'terminating-unserving'] as const;

const endpointArb = fc.record({ host: fc.integer({ min: 3, max: 9 }), port: fc.constantFrom(8080, 8443), cond: fc.constantFrom(...COND) });
const portArb = fc.record({
  ip: fc.integer({ min: 1, max: 4 }),
  family: fc.constantFrom(4 as const, 6 as const),
  port: fc.constantFrom(80, 443, 53),
  protocol: fc.constantFrom(...PROTOCOLS),
  endpoints: fc.uniqueArray(endpointArb, { maxLength: 4, selector: (e) => `${e.host}:${e.port}` }),
  affinity: fc.option(fc.constantFrom(10, 10800), { nil: undefined }),
});
/** One Service port per (address, port, protocol): two would make the first win, which is another test's subject. */
const stateArb = fc.uniqueArray(portArb, { maxLength: 6, selector: (p) => `${p.family}/${p.ip}/${p.port}/${p.protocol}` });

type Port = typeof portArb extends fc.Arbitrary<infer T> ? T : never;
const clusterIP = (p: Port): string => (p.family === 4 ? `10.96.0.${p.ip}` : `fd00:10:96::${p.ip}`);
const epIP = (p: Port, host: number): string => (p.family === 4 ? `192.168.101.${host}` : `fd00:101::${host}`);

function toState(ports: readonly Port[]): DesiredState {
  const targets: ServicePortTarget[] = ports.map((p, i) =>
    target(
      `demo/s${i}`,
      clusterIP(p),
      p.port,
      p.endpoints.map((e) => ({
        ip: epIP(p, e.host),
        port: e.port,
        ready: e.cond === 'ready',
        serving: e.cond === 'ready' || e.cond === 'terminating',
        terminating: e.cond.startsWith('terminating'),
      })),
      {
        protocol: p.protocol,
        ...(p.affinity !== undefined ? { affinityTimeoutSeconds: p.affinity } : {}),
      },
    ),
  );
  return { interfaces: [CLIENT_BLUE], targets };
}

/** kube-proxy's rule, from the port's own data. */
function expectedVerdicts(p: Port): Verdict[] {
  const ready = p.endpoints.filter((e) => e.cond === 'ready');
  const use = ready.length > 0 ? ready : p.endpoints.filter((e) => e.cond === 'terminating');
  if (use.length === 0) return [{ kind: 'reject', with: p.protocol === 'TCP' ? 'tcp-reset' : 'port-unreachable' }];
  return use.map((e) => ({ kind: 'dnat', ip: epIP(p, e.host), port: e.port, masquerade: false }));
}

const key = (v: Verdict): string => JSON.stringify(v);

for (const kind of BACKENDS)
  void describe(`packet tracer (${kind}): random states answer as kube-proxy's endpoint rule`, () => {
    void test('every Service port of every state in a sequence of full and partial syncs (200 sequences)', () => {
      fc.assert(
        fc.property(fc.array(stateArb, { minLength: 1, maxLength: 4 }), (states) => {
          const ns = new FakeSidecar(kind);
          states.forEach((ports, i) => {
            ns.sync(toState(ports), i === 0 || i === 2);
            for (const p of ports) {
              const pkt = { family: p.family, protocol: p.protocol.toLowerCase() as L4, src: p.family === 4 ? '192.168.101.2' : 'fd00:101::2', dst: clusterIP(p), dport: p.port };
              const got = summarize(ns.trace(pkt));
              const want = expectedVerdicts(p);
              assert.deepEqual(got.map((g) => key(g.verdict)).sort(), want.map(key).sort(), `state ${i}, ${pkt.protocol} ${pkt.dst}:${pkt.dport}`);
              for (const g of got) assert.ok(Math.abs(g.share - 1 / got.length) < 1e-6, `state ${i}, ${pkt.dst}:${pkt.dport}: share ${g.share} of ${got.length}`);
              // The same cluster IP on a port no Service has there: refused at once, as kube-proxy's nftables mode.
              const other = summarize(ns.trace({ ...pkt, dport: 9 }));
              assert.deepEqual(
                other.map((o) => o.verdict),
                [{ kind: 'reject', with: p.protocol === 'TCP' ? 'tcp-reset' : 'port-unreachable' }],
                `state ${i}, ${pkt.protocol} ${pkt.dst}:9`,
              );
              // An address no Service has: untouched.
              const none = summarize(ns.trace({ ...pkt, dst: p.family === 4 ? '10.96.0.200' : 'fd00:10:96::c8' }));
              assert.deepEqual(
                none.map((o) => o.verdict),
                [{ kind: 'accept', masquerade: false }],
              );
            }
          });
        }),
        { numRuns: 200 },
      );
    });
  });
