/**
 * Conntrack reconciliation with real conntrack in network namespaces: after a restart (a new
 * dataplane that remembers nothing) or a failed sync, the UDP entries of a Service port that are
 * NATed to an address that is no longer one of its endpoints are deleted, as kube-proxy's
 * reconciler does, so a flow that keeps sending moves to a current endpoint.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createDataplane, type Dataplane, type SyncResult } from '../../src/dataplane/index.js';
import { udpRequests, type Pod } from '../harness/netns.js';
import { RED, target } from './render-fixtures.js';
import { DNS_V4, HTTP_PORT, UDP_PORT, createEnv, endpoints, webTarget, type Env } from './dataplane-env.js';
import type { DesiredState, ServicePortTarget } from '../../src/dataplane/core/model.js';

const dns = (pods: readonly Pod[]): ServicePortTarget => target('demo/dns', DNS_V4, 53, endpoints(pods, 4, UDP_PORT), { protocol: 'UDP', portName: 'dns' });

for (const rules of ['iptables', 'nftables'] as const)
  void describe(`sidecar dataplane (${rules}): conntrack reconciled after a restart or a failed sync`, () => {
    let env: Env;
    const dps: Dataplane[] = [];
    const dataplane = (): Dataplane => {
      const dp = createDataplane({ netns: env.client.ns, backendKind: rules });
      dps.push(dp);
      return dp;
    };
    const st = (targets: readonly ServicePortTarget[], extra: DesiredState['interfaces'] = []): DesiredState => ({ interfaces: [env.iface, ...extra], targets });
    /** The web Service and the UDP one with these backends. */
    const services = (dnsBackends: readonly Pod[]): ServicePortTarget[] => [webTarget(endpoints(env.backends, 4, HTTP_PORT)), dns(dnsBackends)];
    const without = (name: string): Pod[] => env.backends.filter((b) => b.name !== name);
    /** Pins one flow (fixed source port) and returns the backend conntrack bound it to. */
    async function pin(localPort: number): Promise<string> {
      const first = await udpRequests(env.topo, env.client, DNS_V4, 53, 3, { localPort });
      const name = first[0]?.name;
      assert.ok(name !== undefined, JSON.stringify(first));
      assert.deepEqual(
        first.map((r) => r.name),
        [name, name, name],
      );
      return name;
    }
    /** The flow left `from`, and the sync deleted something for it. */
    async function assertMoved(localPort: number, from: string, res: SyncResult): Promise<void> {
      const later = await udpRequests(env.topo, env.client, DNS_V4, 53, 3, { localPort });
      for (const r of later) {
        assert.equal(r.error, undefined);
        assert.notEqual(r.name, from, `the flow still reaches ${from}, which is no longer an endpoint`);
      }
      assert.ok(res.conntrackFlushes >= 1, `conntrack deletions: ${res.conntrackFlushes}`);
    }

    before(async () => {
      env = await createEnv(3);
    });
    after(async () => {
      for (const dp of dps) dp.close();
      await env.topo.teardown();
    });

    void test('restart: the first sync of a new dataplane deletes the entries NATed to an endpoint that is gone', async () => {
      await dataplane().sync(st(services(env.backends)), { full: true });
      const pinned = await pin(40010);
      // The sidecar restarts; meanwhile the pinned backend left the Service.
      const res = await dataplane().sync(st(services(without(pinned))), { full: true });
      await assertMoved(40010, pinned, res);
    });

    void test('failed sync: the sync after it deletes the entries NATed to an endpoint removed meanwhile', async () => {
      const dp = dataplane();
      await dp.sync(st(services(env.backends)), { full: true });
      const pinned = await pin(40011);
      // A sync that fails before its rules go in: a route with a source address net1 does not have.
      const bad = target('demo/elsewhere', '10.96.0.77', 80, [], { network: RED });
      await assert.rejects(dp.sync(st([...services(env.backends), bad], [{ network: RED, interface: 'net1', ipv4: ['192.0.2.99'], ipv6: [] }]), { full: false }));
      const res = await dp.sync(st(services(without(pinned))), { full: false });
      assert.equal(res.full, true, 'the sync after a failure is a full one');
      await assertMoved(40011, pinned, res);
    });

    void test('nothing stale: a restart deletes nothing and the flow stays on its endpoint', async () => {
      await dataplane().sync(st(services(env.backends)), { full: true });
      const pinned = await pin(40012);
      const res = await dataplane().sync(st(services(env.backends)), { full: true });
      assert.equal(res.conntrackFlushes, 0);
      assert.deepEqual(
        (await udpRequests(env.topo, env.client, DNS_V4, 53, 3, { localPort: 40012 })).map((r) => r.name),
        [pinned, pinned, pinned],
      );
    });
  });
