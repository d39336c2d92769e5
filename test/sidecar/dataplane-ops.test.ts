/**
 * The dataplane's operations against a real namespace: partial syncs touch one chain, exactly one
 * jump, leftovers of an earlier run removed, cleanup leaves foreign rules and routes alone, a
 * failed restore leaves the table as it was and forces a full sync, least privilege, legacy back end.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { createDataplane } from '../../src/dataplane/index.js';
import { RestoreError } from '../../src/dataplane/iptables/io.js';
import { JUMP_SPEC, serviceChainName } from '../../src/dataplane/core/names.js';
import { httpRequests } from '../harness/netns.js';
import { BLUE, CLIENT_BLUE, sampleState, target } from './render-fixtures.js';
import { DNS_V4, HTTP_PORT, UDP_PORT, WEB_V4, WEB_V6, createEnv, endpoints, saveText, state, tally, webTarget, type Env } from './dataplane-env.js';
import type { DesiredState } from '../../src/dataplane/core/model.js';

const WEB_CHAIN = serviceChainName({ service: 'demo/web', portName: 'http', protocol: 'TCP', family: 4, clusterIP: WEB_V4 });

function fullState(env: Env, webPods = env.backends): DesiredState {
  return state(env, [
    webTarget(endpoints(webPods, 4, HTTP_PORT)),
    target('demo/web', WEB_V6, 80, endpoints(env.backends, 6, HTTP_PORT), { portName: 'http' }),
    target('demo/dns', DNS_V4, 53, endpoints(env.backends, 4, UDP_PORT), { protocol: 'UDP', portName: 'dns' }),
  ]);
}

function ours(text: string): string[] {
  return text.split('\n').filter((l) => l.includes('MPX-'));
}

async function routes(env: Env, pod = env.client): Promise<string> {
  return (await env.topo.run(pod, ['sh', '-c', 'ip route show; ip -6 route show'])).stdout;
}

/** Pids of restore processes (iptables-nft-restore, ip6tables-nft-restore; or those whose name matches `comm`) living in network namespace `ns`. */
function restoreProcessesIn(ns: string, comm = /^ip6?tables-nft-r/): number[] {
  const inode = statSync(`/run/netns/${ns}`).ino;
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (!comm.test(readFileSync(`/proc/${d}/comm`, 'utf8')) || statSync(`/proc/${d}/ns/net`).ino !== inode) continue;
      out.push(Number(d));
    } catch {
      // gone meanwhile
    }
  }
  return out.sort((a, b) => a - b);
}

/** Until `n` restore processes live in `ns` (a spare is started after its sync returns, and shows under its own name once exec'd). */
async function restoreProcessesSettled(ns: string, n: number, comm?: RegExp): Promise<number[]> {
  for (let i = 0; i < 100 && restoreProcessesIn(ns, comm).length !== n; i++) await sleep(10);
  return restoreProcessesIn(ns, comm);
}

void describe('sidecar dataplane: operations', () => {
  let env: Env;
  before(async () => {
    env = await createEnv(2);
    // A foreign owner's rules and routes, present before we start: they must survive everything.
    await env.topo.run(env.client, ['iptables', '-t', 'nat', '-N', 'FOREIGN']);
    await env.topo.run(env.client, ['iptables', '-t', 'nat', '-A', 'FOREIGN', '-j', 'RETURN']);
    await env.topo.run(env.client, ['iptables', '-t', 'nat', '-A', 'OUTPUT', '-d', '10.200.0.1/32', '-j', 'FOREIGN']);
    await env.topo.run(env.client, ['iptables', '-t', 'filter', '-A', 'OUTPUT', '-d', '10.200.0.2/32', '-j', 'ACCEPT']);
    await env.topo.run(env.client, ['ip6tables', '-t', 'nat', '-A', 'OUTPUT', '-d', 'fd00:200::1/128', '-j', 'RETURN']);
    await env.topo.run(env.client, ['ip', 'route', 'add', '10.200.0.0/24', 'dev', 'net1']);
  });
  after(async () => {
    await env.topo.teardown();
  });

  const foreignPresent = async (): Promise<void> => {
    const v4 = await saveText(env, 4);
    assert.match(v4, /^-A OUTPUT -d 10\.200\.0\.1\/32 -j FOREIGN$/m);
    assert.match(v4, /^-A FOREIGN -j RETURN$/m);
    assert.match(v4, /^-A OUTPUT -d 10\.200\.0\.2\/32 -j ACCEPT$/m);
    assert.match(await saveText(env, 6), /^-A OUTPUT -d fd00:200::1\/128 -j RETURN$/m);
    assert.match(await routes(env), /^10\.200\.0\.0\/24 dev net1/m);
  };

  void test('leftovers of an earlier run are removed by the first (full) sync; foreign rules stay', async () => {
    await env.topo.run(env.client, ['iptables-restore', '--noflush'], {
      input: '*nat\n:MPX-SVC-LEFTOVERLEFTOVER - [0:0]\n-A MPX-SVC-LEFTOVERLEFTOVER -j RETURN\nCOMMIT\n',
    });
    await env.topo.run(env.client, ['ip', 'route', 'add', '10.96.0.99/32', 'dev', 'net1', 'proto', '241']);
    const dp = createDataplane({ netns: env.client.ns });
    const res = await dp.sync(fullState(env), { full: false });
    assert.equal(res.full, true, 'the first sync of a new dataplane is a full one');
    assert.deepEqual(res.families[0]?.deletedChains, ['nat/MPX-SVC-LEFTOVERLEFTOVER']);
    assert.equal(res.routesRemoved, 1);
    assert.doesNotMatch(await saveText(env), /LEFTOVER/);
    assert.doesNotMatch(await routes(env), /10\.96\.0\.99/);
    await foreignPresent();
    assert.equal(tally(await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 20)).size, 2);
  });

  void test('exactly one jump from OUTPUT, repaired by a full sync when duplicated or removed', async () => {
    const dp = createDataplane({ netns: env.client.ns });
    const jumps = async (): Promise<number> => (await saveText(env)).split('\n').filter((l) => l === `-A OUTPUT ${JUMP_SPEC.nat}`).length;
    await dp.sync(fullState(env), { full: true });
    await dp.sync(fullState(env), { full: true });
    assert.equal(await jumps(), 1);
    await env.topo.run(env.client, ['iptables', '-t', 'nat', '-A', 'OUTPUT', '-m', 'comment', '--comment', 'multus-proxy', '-j', 'MPX-SERVICES']);
    assert.equal(await jumps(), 2);
    await dp.sync(fullState(env), { full: true });
    assert.equal(await jumps(), 1);
    await env.topo.run(env.client, ['iptables', '-t', 'nat', '-D', 'OUTPUT', '-m', 'comment', '--comment', 'multus-proxy', '-j', 'MPX-SERVICES']);
    assert.equal(await jumps(), 0);
    const partial = await dp.sync(fullState(env), { full: false });
    assert.equal(partial.changed, false, 'a partial sync with nothing changed does nothing');
    await dp.sync(fullState(env), { full: true });
    assert.equal(await jumps(), 1);
    assert.equal(tally(await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 20)).size, 2);
  });

  void test('a full sync repairs rules someone else removed', async () => {
    const dp = createDataplane({ netns: env.client.ns });
    await dp.sync(fullState(env), { full: true });
    const good = ours(await saveText(env, 4));
    await env.topo.run(env.client, ['iptables', '-t', 'nat', '-F', WEB_CHAIN]);
    await env.topo.run(env.client, ['iptables', '-t', 'filter', '-F', 'MPX-REJECT']);
    assert.notDeepEqual(ours(await saveText(env, 4)), good);
    // A partial sync trusts its memory and does nothing; the full one puts everything back.
    assert.equal((await dp.sync(fullState(env), { full: false })).changed, false);
    const res = await dp.sync(fullState(env), { full: true });
    assert.equal(res.full, true);
    assert.deepEqual(ours(await saveText(env, 4)), good);
    assert.equal(tally(await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 20)).size, 2);
  });

  void test('spare restore processes: kept for a restore run more than once; each change goes through one; one killed from outside is replaced and the change still lands; close() lets them go', async () => {
    // From a namespace without rules of ours (earlier tests left some): a full sync over them
    // restores in several steps (iptables/steps.ts), and this counts the runs of a first sync.
    const clean = createDataplane({ netns: env.client.ns });
    await clean.cleanup();
    clean.close();
    const dp = createDataplane({ netns: env.client.ns, spareRestore: true });
    const [b1, b2] = env.backends;
    assert.ok(b1 && b2);
    const reaches = async (name: string): Promise<void> => assert.deepEqual([...tally(await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 10)).keys()], [name]);
    try {
      await dp.sync(fullState(env), { full: true });
      assert.deepEqual(await restoreProcessesSettled(env.client.ns, 0), [], 'no spare after a restore run once (both families)');
      const res = await dp.sync(fullState(env, [b1]), { full: false });
      assert.deepEqual(res.families[0]?.changedChains, [`nat/${WEB_CHAIN}`]);
      assert.equal(res.families[1]?.text, '', 'IPv6 unchanged: it keeps no spare');
      await reaches('b1');
      const first = await restoreProcessesSettled(env.client.ns, 1);
      assert.equal(first.length, 1, 'the second IPv4 restore leaves a spare');
      await dp.sync(fullState(env, [b2]), { full: false });
      await reaches('b2');
      const second = await restoreProcessesSettled(env.client.ns, 1);
      assert.equal(second.length, 1);
      assert.notDeepEqual(second, first, 'the spare was used and replaced');
      for (const p of second) process.kill(p, 'SIGKILL');
      await dp.sync(fullState(env, [b1]), { full: false });
      await reaches('b1');
      assert.equal((await restoreProcessesSettled(env.client.ns, 1)).length, 1, 'the change landed although its spare was killed; a new spare waits');
    } finally {
      dp.close();
    }
    assert.deepEqual(await restoreProcessesSettled(env.client.ns, 0), [], 'close(): the spares read EOF and exit');
    assert.match(await saveText(env), new RegExp(`-A ${WEB_CHAIN} .*--to-destination ${b1.net1.ipv4.replace(/\./g, '\\.')}:`), 'and change nothing on the way out');
  });

  void test('syncs called without waiting run one at a time, in order', async () => {
    const dp = createDataplane({ netns: env.client.ns });
    const [b1, b2] = env.backends;
    assert.ok(b1 && b2);
    const results = await Promise.all([dp.sync(fullState(env), { full: true }), dp.sync(fullState(env, [b1]), { full: false }), dp.sync(fullState(env, [b2]), { full: false })]);
    assert.deepEqual(
      results.map((r) => [r.full, r.changed]),
      [
        [true, true],
        [false, true],
        [false, true],
      ],
    );
    assert.deepEqual([...tally(await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 10)).keys()], ['b2']);
  });

  void test('a one-endpoint change rewrites only that Service chain (iptables-save before/after)', async () => {
    const dp = createDataplane({ netns: env.client.ns });
    await dp.sync(fullState(env), { full: true });
    const before4 = (await saveText(env, 4)).split('\n');
    const before6 = await saveText(env, 6);
    const [b1] = env.backends;
    assert.ok(b1);
    const res = await dp.sync(fullState(env, [b1]), { full: false });
    assert.deepEqual(res.families[0]?.changedChains, [`nat/${WEB_CHAIN}`]);
    assert.equal(res.families[1]?.text, '');
    const after4 = (await saveText(env, 4)).split('\n');
    const removed = before4.filter((l) => !after4.includes(l));
    const added = after4.filter((l) => !before4.includes(l));
    assert.ok(removed.length > 0 && added.length > 0);
    for (const l of [...removed, ...added]) assert.ok(l.startsWith(`-A ${WEB_CHAIN} `), `unexpected change outside ${WEB_CHAIN}: ${l}`);
    assert.equal(await saveText(env, 6), before6);
    assert.deepEqual([...tally(await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 10)).keys()], ['b1']);
  });

  for (const spareRestore of [false, true]) {
    void test(`a failed restore names the offending line, leaves the nat table as it was, and forces a full sync${spareRestore ? ' (through a spare process, with its sentinel line)' : ''}`, async () => {
      const dp = createDataplane({ netns: env.client.ns, spareRestore });
      await dp.sync(fullState(env), { full: true });
      // Two IPv4 restores: the failing one below goes to a spare.
      if (spareRestore) await dp.sync(fullState(env, env.backends.slice(0, 1)), { full: false });
      // Someone else jumps into our chain: deleting it (the Service goes away) must fail.
      await env.topo.run(env.client, ['iptables', '-t', 'nat', '-A', 'FOREIGN', '-j', WEB_CHAIN]);
      const beforeNat = (await env.topo.run(env.client, ['iptables-save', '-t', 'nat'])).stdout.replace(/^#.*\n/gm, '');
      const without = state(
        env,
        fullState(env).targets.filter((t) => !(t.service === 'demo/web' && t.family === 4)),
      );
      await assert.rejects(dp.sync(without, { full: false }), (e: unknown) => {
        assert.ok(e instanceof RestoreError, String(e));
        assert.equal(e.family, 4);
        assert.ok(e.line !== undefined, `no line in ${e.stderr}`);
        assert.ok(
          e.context.some((l) => l.includes('>')),
          JSON.stringify(e.context),
        );
        assert.match(e.message, new RegExp(`failed: line \\d+: CHAIN_DEL failed \\(Device or resource busy\\): chain ${WEB_CHAIN} at input line \\d+: .*> -X ${WEB_CHAIN}`));
        return true;
      });
      const afterNat = (await env.topo.run(env.client, ['iptables-save', '-t', 'nat'])).stdout.replace(/^#.*\n/gm, '');
      assert.equal(afterNat, beforeNat, 'the nat table changed although its transaction failed');
      await env.topo.run(env.client, ['iptables', '-t', 'nat', '-D', 'FOREIGN', '-j', WEB_CHAIN]);
      const retry = await dp.sync(without, { full: false });
      assert.equal(retry.full, true, 'after a failure the next sync is a full one');
      assert.doesNotMatch(await saveText(env), new RegExp(WEB_CHAIN));
      dp.close();
    });
  }

  void test('the apply runs with only NET_ADMIN and NET_RAW, and cleanup removes everything of ours and nothing else', async () => {
    const dataplane = fileURLToPath(new URL('../../src/dataplane/index.ts', import.meta.url));
    const script = `
      import { readFileSync } from 'node:fs';
      import { createDataplane } from ${JSON.stringify(dataplane)};
      const caps = /CapEff:\\s+(\\w+)/.exec(readFileSync('/proc/self/status', 'utf8'))[1];
      const [op, json] = process.argv.slice(1);
      const dp = createDataplane();
      const res = op === 'sync' ? await dp.sync(JSON.parse(json), { full: true }) : await dp.cleanup();
      console.log(JSON.stringify({ caps, res }));`;
    const inChild = async (op: 'sync' | 'cleanup', st?: DesiredState): Promise<{ caps: string; res: unknown }> => {
      const r = await env.topo.run(env.client, [
        'setpriv',
        '--bounding-set',
        '-all,+net_admin,+net_raw',
        '--inh-caps',
        '-all',
        '--',
        process.execPath,
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        script,
        op,
        JSON.stringify(st ?? {}),
      ]);
      return JSON.parse(r.stdout) as { caps: string; res: unknown };
    };
    const synced = await inChild('sync', fullState(env));
    // CAP_NET_ADMIN is bit 12, CAP_NET_RAW bit 13: 0x3000 and nothing else.
    assert.equal(synced.caps, '0000000000003000');
    assert.equal(tally(await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 20)).size, 2);
    assert.equal(tally(await httpRequests(env.topo, env.client, `http://[${WEB_V6}]:80/`, 20)).size, 2);

    const cleaned = await inChild('cleanup');
    assert.equal(cleaned.caps, '0000000000003000');
    assert.deepEqual(ours(await saveText(env, 4)), []);
    assert.deepEqual(ours(await saveText(env, 6)), []);
    assert.equal((await env.topo.run(env.client, ['sh', '-c', 'ip route show proto 241; ip -6 route show proto 241'])).stdout, '');
    await foreignPresent();
    // The cluster IP is no longer ours: nothing answers.
    assert.notEqual((await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 1, 500))[0]?.error, undefined);
  });

  void test('without IPv6 in the kernel (ipv6: false) only IPv4 is programmed and ip6tables is never run', async () => {
    await createDataplane({ netns: env.client.ns }).cleanup();
    const dp = createDataplane({ netns: env.client.ns, ipv6: false });
    const v4Only = state(env, [webTarget(endpoints(env.backends, 4, HTTP_PORT))]);
    const res = await dp.sync(v4Only, { full: true });
    assert.deepEqual(
      res.families.map((f) => f.family),
      [4],
    );
    assert.equal(ours(await saveText(env, 6)).length, 0);
    assert.equal(tally(await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 20)).size, 2);
    await dp.cleanup();
    assert.equal(ours(await saveText(env, 4)).length, 0);
    await foreignPresent();
  });

  void test('nftables: a spare `nft -f -` waits once a change ran twice; each change goes through one; one killed from outside is replaced and the change still lands; close() lets it go', async () => {
    const NFT = /^nft\n?$/;
    const dp = createDataplane({ netns: env.client.ns, spareRestore: true, backendKind: 'nftables' });
    const [b1, b2] = env.backends;
    assert.ok(b1 && b2);
    const reaches = async (name: string): Promise<void> => assert.deepEqual([...tally(await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 10)).keys()], [name]);
    try {
      // The first sync is a first fill: the table's skeleton, then its elements, two runs of
      // `nft -f -` (docs/decisions/0195-first-fill-in-bounded-transactions.md), so at most one spare waits after it.
      await dp.sync(fullState(env), { full: true });
      assert.ok((await restoreProcessesSettled(env.client.ns, 1, NFT)).length <= 1, 'at most one spare after the first fill');
      await dp.sync(fullState(env, [b1]), { full: false });
      await reaches('b1');
      const first = await restoreProcessesSettled(env.client.ns, 1, NFT);
      assert.equal(first.length, 1, 'the second `nft -f -` leaves a spare');
      await dp.sync(fullState(env, [b2]), { full: false });
      await reaches('b2');
      const second = await restoreProcessesSettled(env.client.ns, 1, NFT);
      assert.equal(second.length, 1);
      assert.notDeepEqual(second, first, 'the spare was used and replaced');
      for (const p of second) process.kill(p, 'SIGKILL');
      await dp.sync(fullState(env, [b1]), { full: false });
      await reaches('b1');
      assert.equal((await restoreProcessesSettled(env.client.ns, 1, NFT)).length, 1, 'the change landed although its spare was killed; a new spare waits');
    } finally {
      dp.close();
    }
    assert.deepEqual(await restoreProcessesSettled(env.client.ns, 0, NFT), [], 'close(): the spare reads EOF and exits');
    await reaches('b1');
    await createDataplane({ netns: env.client.ns, backendKind: 'nftables' }).cleanup();
    await foreignPresent();
  });
});

void describe('sidecar dataplane: legacy back end', () => {
  let env: Env;
  before(async () => {
    env = await createEnv(2);
  });
  after(async () => {
    await env.topo.teardown();
  });

  void test('a namespace with legacy rules is driven with iptables-legacy; nft stays untouched', async () => {
    await env.topo.run(env.client, ['iptables-legacy', '-t', 'filter', '-A', 'OUTPUT', '-d', '10.200.0.3/32', '-j', 'ACCEPT']);
    const auto = createDataplane({ netns: env.client.ns });
    assert.equal(await auto.backend(), 'legacy');
    const res = await auto.sync(fullState(env), { full: true });
    assert.equal(res.backend, 'legacy');
    assert.match(await saveText(env, 4, 'legacy'), /-A OUTPUT -m comment --comment multus-proxy -j MPX-SERVICES/);
    assert.deepEqual(ours(await saveText(env, 4, 'nft')), []);
    const replies = await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 40);
    assert.equal(tally(replies).size, 2);
    assert.deepEqual(new Set(replies.map((r) => r.peer)), new Set([env.client.net1.ipv4]));
    // A partial change works the same way.
    const [b1] = env.backends;
    assert.ok(b1);
    await auto.sync(fullState(env, [b1]), { full: false });
    assert.deepEqual([...tally(await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 10)).keys()], ['b1']);
    // A Service added and removed by partial syncs: one appended and one deleted dispatch rule.
    const extra = target('demo/extra', '10.96.0.88', 80, endpoints(env.backends, 4, HTTP_PORT), { portName: 'http' });
    const added = await auto.sync(state(env, [...fullState(env).targets, extra]), { full: false });
    assert.equal(added.full, false);
    assert.match(added.families[0]?.text ?? '', /^-A MPX-SERVICES -d 10\.96\.0\.88\/32 /m);
    assert.equal(tally(await httpRequests(env.topo, env.client, 'http://10.96.0.88:80/', 20)).size, 2);
    const removed = await auto.sync(fullState(env), { full: false });
    assert.match(removed.families[0]?.text ?? '', /^-D MPX-SERVICES -d 10\.96\.0\.88\/32 /m);
    assert.doesNotMatch(await saveText(env, 4, 'legacy'), /10\.96\.0\.88/);
    await auto.cleanup();
    const legacy = await saveText(env, 4, 'legacy');
    assert.deepEqual(ours(legacy), []);
    assert.match(legacy, /-A OUTPUT -d 10\.200\.0\.3\/32 -j ACCEPT/);
  });

  void test('the golden sample (affinity, SCTP, UDP, IPv6, reject-only) applies and cleans up with both back ends', async () => {
    for (const backend of ['nft', 'legacy'] as const) {
      const pod = await env.topo.addPod(`sample${backend}`);
      const sample = sampleState();
      const st = { ...sample, interfaces: [{ ...CLIENT_BLUE, ipv4: [pod.net1.ipv4], ipv6: [pod.net1.ipv6] }] };
      const dp = createDataplane({ netns: pod.ns, iptablesFlavor: backend });
      const res = await dp.sync(st, { full: true });
      assert.equal(res.backend, backend);
      const save4 = await env.topo.run(pod, [`iptables-${backend}-save`]);
      const save6 = await env.topo.run(pod, [`ip6tables-${backend}-save`]);
      // Every rule we rendered is there (iptables-save prints some options in its own words, so count).
      const rendered4 = res.families[0]?.text.split('\n').filter((l) => l.startsWith('-A ') || l.startsWith('-I ')).length ?? 0;
      assert.equal(save4.stdout.split('\n').filter((l) => l.startsWith('-A ') && l.includes('MPX-')).length, rendered4);
      assert.match(save4.stdout, /-p sctp -m sctp --dport 9999/);
      assert.match(save4.stdout, /--rcheck --seconds 10800 --reap/);
      assert.match(save6.stdout, /--to-destination \[fd00:101::4\]:8080/);
      // What iptables lists is what was written: no false drift for any rule shape, either back end.
      assert.equal(await dp.checkDrift({ deep: true }), undefined, `${backend}: no drift right after a sync`);
      await env.topo.run(pod, [`iptables-${backend}`, '-t', 'nat', '-D', 'OUTPUT', '-m', 'comment', '--comment', 'multus-proxy', '-j', 'MPX-SERVICES']);
      assert.match((await dp.checkDrift({ deep: false })) ?? '', /^IPv4 nat\/OUTPUT: 0 rules of ours, 1 written$/);
      assert.equal((await dp.sync(st, { full: false })).full, true, 'after drift the next sync is a full one');
      assert.equal(await dp.checkDrift({ deep: true }), undefined, `${backend}: repaired`);
      await dp.cleanup();
      assert.deepEqual(ours((await env.topo.run(pod, [`iptables-${backend}-save`])).stdout), []);
      assert.deepEqual(ours((await env.topo.run(pod, [`ip6tables-${backend}-save`])).stdout), []);
    }
  });

  void test('an empty namespace is nft; the back end can be forced', async () => {
    const other = await env.topo.addPod('fresh');
    assert.equal(await createDataplane({ netns: other.ns }).backend(), 'nft');
    assert.equal(await createDataplane({ netns: other.ns, iptablesFlavor: 'legacy' }).backend(), 'legacy');
    assert.equal(BLUE.name, 'blue');
  });
});
