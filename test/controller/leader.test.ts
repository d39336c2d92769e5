/**
 * Leader election with two real controller processes (`node --import tsx cmd/controller/main.ts`)
 * on one Lease: only the leader writes, the standby is ready too, takes over after `kill -9` of the
 * leader, and a leader that sees its lease taken exits at once.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { getEventListeners, once } from 'node:events';
import { apiPath } from '../../src/kube/paths.js';
import type { V1Lease } from '../../src/kube/types.js';
import { useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { networkStatus } from '../unit/controller/fixtures.js';
import { createPod, createService, ourSlices, sliceAddresses } from './helpers.js';
import { leaseHolder, readyz, startControllerProc, tail, type Proc } from './procs.js';
import { fenceWrites, LeaderElector, microTime } from '../../cmd/controller/leader.js';
import { interpose } from '../harness/interpose.js';
import { createLogger } from '../../src/log.js';

const LEASE_MS = 3000;
const RETRY_MS = 500;

void describe('controller leader election (two processes)', () => {
  let cp: ControlPlane;
  let ns: string;
  const procs: Proc[] = [];
  const leasePath = (): string => apiPath('coordination.k8s.io', 'v1', 'leases', ns, 'ctl');
  const holder = (): Promise<string | undefined> => leaseHolder(cp.client, ns);

  function startProc(identity: string): Proc {
    const p = startControllerProc({ kubeconfig: cp.kubeconfigPath, namespace: ns, identity, leaseMs: LEASE_MS, renewMs: 2000, retryMs: RETRY_MS });
    procs.push(p);
    return p;
  }

  before(async () => {
    cp = await useControlPlane();
    ns = uniqueName('ldr');
    await cp.createNamespace(ns);
  });

  after(async () => {
    for (const p of procs) if (p.exitCode === undefined) p.child.kill('SIGKILL');
    await cp?.client.delete(apiPath('', 'v1', 'namespaces', undefined, ns));
    await cp?.stop();
  });

  void test('only the leader writes; SIGTERM releases at once; kill -9 hands over after the lease; a leader that loses the lease exits', async () => {
    const a = startProc('ctl-a');
    await waitFor(
      'ctl-a leads',
      async () => (await holder()) === 'ctl-a',
      30_000,
      () => tail(a),
    );
    const b = startProc('ctl-b');
    await waitFor(
      'ctl-b started',
      () => b.port !== undefined,
      30_000,
      () => tail(b),
    );
    // Readiness is not leadership: the standby is ready once its caches have synced.
    await waitFor('both ready', async () => (await readyz(a)) === 200 && (await readyz(b)) === 200, 30_000);
    assert.equal(await holder(), 'ctl-a');

    const status = (ip: string): string => networkStatus([{ name: `${ns}/macvlan1`, ips: [ip] }]);
    await createPod(cp.client, ns, 'web-1', { labels: { app: 'web' }, status: status('10.7.0.1') });
    await createService(cp.client, ns, 'web', { network: 'macvlan1', selector: { app: 'web' } });
    await waitFor('slice from the leader', async () => sliceAddresses(await ourSlices(cp.client, ns, 'web')).join() === '10.7.0.1');
    assert.equal(b.logs.filter((l) => l.includes('EndpointSlices written')).length, 0, 'the standby wrote nothing');

    // SIGTERM: the leader releases the lease, so the standby need not wait for it to expire.
    const termAt = Date.now();
    a.child.kill('SIGTERM');
    await waitFor(
      'ctl-b takes over after release',
      async () => (await holder()) === 'ctl-b',
      15_000,
      () => tail(b),
    );
    const released = Date.now() - termAt;
    if (a.exitCode === undefined) await once(a.child, 'exit');
    assert.equal(a.exitCode, 0, tail(a));
    assert.ok(released < LEASE_MS, `takeover after SIGTERM took ${released} ms, not less than a lease duration`);
    process.stdout.write(`# takeover after SIGTERM (lease released): ${released} ms\n`);

    const c = startProc('ctl-c');
    await waitFor(
      'ctl-c ready',
      async () => c.port !== undefined && (await readyz(c)) === 200,
      30_000,
      () => tail(c),
    );
    await createPod(cp.client, ns, 'web-2', { labels: { app: 'web' }, status: status('10.7.0.2') });
    await waitFor(
      'ctl-b writes',
      async () => sliceAddresses(await ourSlices(cp.client, ns, 'web')).join() === '10.7.0.1,10.7.0.2',
      15_000,
      () => tail(b),
    );

    // kill -9: no release, the standby must wait for the lease to expire.
    const killedAt = Date.now();
    b.child.kill('SIGKILL');
    await waitFor(
      'ctl-c takes over',
      async () => (await holder()) === 'ctl-c',
      15_000,
      () => tail(c),
    );
    const takeover = Date.now() - killedAt;
    // client-go semantics: expiry counts from the last change the standby observed, so the bound
    // is one lease duration plus up to two retry periods (observation lag and jittered polling).
    assert.ok(takeover <= LEASE_MS + 2 * RETRY_MS + 500, `takeover took ${takeover} ms`);
    process.stdout.write(`# takeover after kill -9: ${takeover} ms (lease ${LEASE_MS} ms, retry ${RETRY_MS} ms)\n`);

    await createPod(cp.client, ns, 'web-3', { labels: { app: 'web' }, status: status('10.7.0.3') });
    await waitFor(
      'new leader writes',
      async () => sliceAddresses(await ourSlices(cp.client, ns, 'web')).join() === '10.7.0.1,10.7.0.2,10.7.0.3',
      15_000,
      () => tail(c),
    );

    // Someone else takes the lease: the leader must stop at once (exit 1).
    const lease = await cp.client.get<V1Lease>(leasePath());
    const now = new Date().toISOString().replace('Z', '000Z');
    const stolenAt = Date.now();
    await cp.client.replace(leasePath(), { ...lease, spec: { ...lease.spec, holderIdentity: 'thief', renewTime: now, leaseDurationSeconds: 60 } });
    if (c.exitCode === undefined) await once(c.child, 'exit');
    const exitAfter = Date.now() - stolenAt;
    assert.equal(c.exitCode, 1, tail(c));
    assert.ok(exitAfter < 60_000, `exited ${exitAfter} ms after losing the lease: on seeing the thief, before its 60 s lease could run out`);
    assert.ok(
      c.logs.some((l) => l.includes('lease taken by thief')),
      tail(c),
    );
  });

  void test('the standby stamps its observation when the GET returns, not when it was sent (client-go observedTime)', async () => {
    // A lease held by a live holder. The standby's GET is held back (a slow request) while the
    // holder renews; the GET then returns the renewed record. That record is only as old as the
    // renew, so a lease duration after the GET was *sent* it is still alive and must not be taken.
    const name = 'slow-get';
    const path = apiPath('coordination.k8s.io', 'v1', 'leases', ns, name);
    const spec = (renew: number): NonNullable<V1Lease['spec']> => ({
      holderIdentity: 'holder',
      leaseDurationSeconds: LEASE_MS / 1000,
      renewTime: microTime(renew) as unknown as Date,
      acquireTime: microTime(renew) as unknown as Date,
    });
    await cp.client.create(apiPath('coordination.k8s.io', 'v1', 'leases', ns), { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name }, spec: spec(Date.now()) });
    let gate: Promise<void> | undefined;
    const slow = interpose(cp.client, {
      get: async (p, o) => {
        await gate;
        return cp.client.get(p, o);
      },
    });
    const elector = new LeaderElector(
      slow,
      { namespace: ns, name, identity: 'standby', leaseDurationMs: LEASE_MS, renewDeadlineMs: 2000, retryPeriodMs: RETRY_MS },
      { onStartedLeading: () => assert.fail('started leading'), onStoppedLeading: () => undefined },
      createLogger('test', 'silent'),
    );
    const HOLD_MS = 1500;
    let open!: () => void;
    gate = new Promise((r) => (open = r));
    const sentAt = Date.now();
    const first = elector.tryAcquireOrRenew(sentAt);
    await new Promise((r) => setTimeout(r, HOLD_MS));
    const lease = await cp.client.get<V1Lease>(path);
    const renewedAt = Date.now();
    await cp.client.replace(path, { ...lease, spec: spec(renewedAt) });
    open();
    assert.equal(await first, false, 'a held lease is not taken');
    gate = undefined;
    // A lease duration after the GET was sent, but well under one after the holder's renew.
    await new Promise((r) => setTimeout(r, sentAt + LEASE_MS + 100 - Date.now()));
    assert.ok(Date.now() - renewedAt < LEASE_MS - 500, 'the test itself ran too slowly to judge');
    const taken = await elector.tryAcquireOrRenew();
    assert.equal(taken, false, `took a lease renewed ${Date.now() - renewedAt} ms ago (lease ${LEASE_MS} ms): its observation was stamped before the GET returned`);
    assert.equal((await cp.client.get<V1Lease>(path)).spec?.holderIdentity, 'holder');
  });
});

/**
 * What a leader leaves on its long-lived signals: nothing. Each renew joins the process's lifetime
 * signal with a deadline, and each write joins the caller's signal with the fence. With
 * AbortSignal.any that left one entry per renew in the lifetime signal's dependants on Node 20
 * (nodejs/node#55351): the controller's heap grew for as long as it led (B12). Many fast renews
 * against the real apiserver, then the signals are looked at.
 */
void describe('controller leader election: long-lived signals stay clean (real apiserver)', () => {
  let cp: ControlPlane;
  let ns: string;
  before(async () => {
    cp = await useControlPlane();
    ns = uniqueName('ldrsig');
    await cp.createNamespace(ns);
  });
  after(async () => {
    await cp?.client.delete(apiPath('', 'v1', 'namespaces', undefined, ns));
    await cp?.stop();
  });

  /** Signals AbortSignal.any registered on `s` and has not pruned (Node's internal set; none when absent). */
  const dependants = (s: AbortSignal): number => {
    const sym = Object.getOwnPropertySymbols(s).find((k) => k.description === 'kDependantSignals');
    const set = sym === undefined ? undefined : (s as unknown as Record<symbol, { size?: number } | undefined>)[sym];
    return set?.size ?? 0;
  };

  void test('200 renews and 200 fenced writes leave no listener and no dependant on the lifetime and caller signals', async () => {
    const RENEWS = 200;
    const life = new AbortController();
    let renews = 0;
    // Looked at during the last renew, before the lifetime signal aborts (an abort unhooks everything anyway).
    let atLast = { listeners: NaN, dependants: NaN };
    const counting = interpose(cp.client, {
      replace: async (p, b, o) => {
        if (++renews === RENEWS) {
          atLast = { listeners: getEventListeners(life.signal, 'abort').length, dependants: dependants(life.signal) };
          life.abort();
        }
        return cp.client.replace(p, b, o);
      },
    });
    const elector = new LeaderElector(
      counting,
      { namespace: ns, name: 'sig', identity: 'sig-1', leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 1 },
      { onStartedLeading: () => undefined, onStoppedLeading: () => undefined },
      createLogger('test', 'silent'),
    );
    const running = elector.run(life.signal);
    await waitFor('leading', () => elector.isLeader(), 30_000);
    // Fenced writes under one long-lived caller signal (a worker's), as the reconciler makes them.
    const caller = new AbortController();
    const fenced = fenceWrites(cp.client, elector);
    const cmPath = apiPath('', 'v1', 'configmaps', ns);
    await fenced.create(cmPath, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'sig' }, data: { n: '0' } }, { signal: caller.signal });
    for (let i = 1; i < 200; i++) await fenced.patch(`${cmPath}/sig`, { data: { n: String(i) } }, 'merge', { signal: caller.signal });
    await running;
    assert.ok(renews >= RENEWS, `only ${renews} renews`);
    // The renew in flight holds one link to it; the earlier ones must have let go.
    assert.ok(atLast.listeners <= 1, `${atLast.listeners} listeners on the lifetime signal after ${RENEWS} renews`);
    assert.ok(atLast.dependants <= 1, `${atLast.dependants} signals registered on the lifetime signal after ${RENEWS} renews`);
    assert.equal(getEventListeners(caller.signal, 'abort').length, 0, 'listeners left on the caller signal by fenced writes');
    assert.equal(dependants(caller.signal), 0, `${dependants(caller.signal)} signals registered on the caller signal by 200 fenced writes`);
  });
});
