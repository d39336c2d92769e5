/**
 * resolve.ts with the client's place: kube-proxy's categorisation picks a target's endpoints
 * (internalTrafficPolicy Local, zone and node hints), 'drop' when endpoints exist but none is the
 * client's, 'none' (refused) when there are none at all; a target without a place as before.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resolveTargets } from '../../src/dataplane/core/resolve.js';
import type { BackendEndpoint, ServicePortTarget } from '../../src/dataplane/core/model.js';
import { render, StateMemo } from '../../src/dataplane/core/incremental.js';
import { CLIENT_BLUE, ep, target } from '../sidecar/render-fixtures.js';
import { serviceObject, sliceObject } from '../sidecar/state-fixtures.js';

const PLACE = { nodeName: 'n1', zone: 'a' };
const LOCAL = { internalTrafficPolicy: 'Local', externalTrafficPolicy: 'Cluster', externallyAccessible: false } as const;
const at = (ip: string, nodeName: string, zone: string, state: 'ready' | 'unready' | 'terminating' = 'ready', hints: { zones?: string[]; nodes?: string[] } = {}): BackendEndpoint => ({
  ...ep(ip, 8080, state),
  nodeName,
  zone,
  zoneHints: hints.zones ?? [],
  nodeHints: hints.nodes ?? [],
});

function resolved(t: ServicePortTarget): { ips: string[]; choice: string } {
  const r = resolveTargets({ interfaces: [CLIENT_BLUE], targets: [t] }).targets[0];
  assert.ok(r !== undefined, 'the target is served');
  return { ips: r.endpoints.map((e) => e.ip), choice: r.choice };
}

const three = (hints: (i: number) => { zones?: string[]; nodes?: string[] } = () => ({})) => [
  at('10.1.0.1', 'n1', 'a', 'ready', hints(1)),
  at('10.1.0.2', 'n2', 'b', 'ready', hints(2)),
  at('10.1.0.3', 'n2', 'b', 'ready', hints(3)),
];

void test('internalTrafficPolicy Local: the endpoints on the client node only', () => {
  assert.deepEqual(resolved(target('d/w', '10.96.0.1', 80, three(), { traffic: LOCAL, place: PLACE })), { ips: ['10.1.0.1'], choice: 'ready' });
});

void test('internalTrafficPolicy Local, none local: drop, not the remote ones', () => {
  assert.deepEqual(resolved(target('d/w', '10.96.0.1', 80, three().slice(1), { traffic: LOCAL, place: PLACE })), { ips: [], choice: 'drop' });
});

void test('internalTrafficPolicy Local, the client node unknown: no endpoint is local, drop', () => {
  assert.deepEqual(resolved(target('d/w', '10.96.0.1', 80, three(), { traffic: LOCAL, place: { nodeName: '', zone: '' } })), { ips: [], choice: 'drop' });
});

void test('internalTrafficPolicy Local, no endpoints anywhere (or none serving): none, refused', () => {
  assert.deepEqual(resolved(target('d/w', '10.96.0.1', 80, [], { traffic: LOCAL, place: PLACE })), { ips: [], choice: 'none' });
  assert.deepEqual(resolved(target('d/w', '10.96.0.1', 80, [at('10.1.0.1', 'n1', 'a', 'unready')], { traffic: LOCAL, place: PLACE })), { ips: [], choice: 'none' });
});

void test('internalTrafficPolicy Local: a local serving-terminating endpoint before remote ready ones', () => {
  const eps = [at('10.1.0.1', 'n1', 'a', 'terminating'), at('10.1.0.2', 'n2', 'b')];
  assert.deepEqual(resolved(target('d/w', '10.96.0.1', 80, eps, { traffic: LOCAL, place: PLACE })), { ips: ['10.1.0.1'], choice: 'terminating' });
});

void test("a load balancer's ingress IP uses the cluster endpoints, whatever internalTrafficPolicy says", () => {
  assert.deepEqual(resolved(target('d/w', '192.168.1.240', 80, three().slice(1), { traffic: { ...LOCAL, externallyAccessible: true }, place: PLACE, ingress: true })).ips, ['10.1.0.2', '10.1.0.3']);
});

void test('zone hints: those for the client zone; none for it, or some endpoint without: all ready ones', () => {
  assert.deepEqual(
    resolved(
      target(
        'd/w',
        '10.96.0.1',
        80,
        three((i) => ({ zones: [i === 2 ? 'a' : 'b'] })),
        { place: PLACE },
      ),
    ).ips,
    ['10.1.0.2'],
  );
  assert.deepEqual(
    resolved(
      target(
        'd/w',
        '10.96.0.1',
        80,
        three(() => ({ zones: ['b'] })),
        { place: PLACE },
      ),
    ).ips,
    ['10.1.0.1', '10.1.0.2', '10.1.0.3'],
  );
  assert.deepEqual(
    resolved(
      target(
        'd/w',
        '10.96.0.1',
        80,
        three((i) => (i === 1 ? {} : { zones: ['a'] })),
        { place: PLACE },
      ),
    ).ips,
    ['10.1.0.1', '10.1.0.2', '10.1.0.3'],
  );
});

void test('node hints (PreferSameNode) before zone hints', () => {
  assert.deepEqual(
    resolved(
      target(
        'd/w',
        '10.96.0.1',
        80,
        three((i) => ({ zones: ['a'], nodes: [i === 3 ? 'n1' : 'n2'] })),
        { place: PLACE },
      ),
    ).ips,
    ['10.1.0.3'],
  );
});

void test('zone hints with the client zone unknown: all ready ones', () => {
  assert.deepEqual(
    resolved(
      target(
        'd/w',
        '10.96.0.1',
        80,
        three((i) => ({ zones: [i === 2 ? 'a' : 'b'] })),
        { place: { nodeName: 'n1', zone: '' } },
      ),
    ).ips,
    ['10.1.0.1', '10.1.0.2', '10.1.0.3'],
  );
});

void test('a target without a place: every ready endpoint, hints and policy unread, as before', () => {
  assert.deepEqual(
    resolved(
      target(
        'd/w',
        '10.96.0.1',
        80,
        three((i) => ({ zones: [i === 2 ? 'a' : 'b'] })),
        { traffic: LOCAL },
      ),
    ),
    { ips: ['10.1.0.1', '10.1.0.2', '10.1.0.3'], choice: 'ready' },
  );
});

void test('state building: only a Service with internalTrafficPolicy Local or hinted endpoints carries the place; a new place redoes it', () => {
  const svc = (name: string, itp?: 'Local') => {
    const s = serviceObject('demo', name, { networks: 'demo/blue', clusterIPs: [name === 'plain' ? '10.96.0.1' : '10.96.0.2'], ports: [{ name: 'http', port: 80, targetPort: 8080 }] });
    if (itp !== undefined) s.spec = { ...s.spec, internalTrafficPolicy: itp };
    return s;
  };
  const slice = (name: string) =>
    sliceObject('demo', `${name}-4`, {
      service: name,
      network: 'demo/blue',
      family: 4,
      ports: [{ name: 'http', port: 80, targetPort: 8080 }],
      endpoints: [
        { ip: '192.168.101.3', nodeName: 'n1' },
        { ip: '192.168.101.4', nodeName: 'n2' },
      ],
    });
  const memo = new StateMemo();
  const input = { interfaces: [CLIENT_BLUE], services: [svc('plain'), svc('local', 'Local')], slices: [slice('plain'), slice('local')] };
  const first = memo.update({ ...input, place: { nodeName: 'n1', zone: '' } }).state;
  const byName = (targets: readonly ServicePortTarget[], name: string) => targets.find((t) => t.service === `demo/${name}`);
  assert.equal(byName(first.targets, 'plain')?.place, undefined);
  assert.deepEqual(byName(first.targets, 'local')?.place, { nodeName: 'n1', zone: '' });
  assert.equal(byName(first.targets, 'local')?.traffic?.internalTrafficPolicy, 'Local');
  assert.deepEqual(
    render(first)
      .resolution.targets.find((r) => r.target.service === 'demo/local')
      ?.endpoints.map((e) => e.ip),
    ['192.168.101.3'],
  );
  const moved = memo.update({ ...input, place: { nodeName: 'n2', zone: '' } }).state;
  assert.deepEqual(
    render(moved)
      .resolution.targets.find((r) => r.target.service === 'demo/local')
      ?.endpoints.map((e) => e.ip),
    ['192.168.101.4'],
  );
});
