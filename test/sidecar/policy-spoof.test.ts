/**
 * A pod that claims another pod's address, against the kernel. Pods p, a and b are macvlan
 * children of one node's parent (as Multus' macvlan plugin makes them). p's ingress on net1
 * allows only a, bound to a's MAC (src/dataplane/nftables/policy-macs.ts), written by the real
 * sidecar dataplane; the tracer answers the same packets from the same render. What reaches p is
 * counted by a table of the test's own in p's namespace, before (priority -10) and after
 * (priority 10) the policy's chain. b then:
 * - adds a's address to its net1 and sends UDP and TCP from it: they arrive, and the policy drops
 *   every one (the source MAC is b's); the real a gets through;
 * - cannot take a's MAC on the same parent (macvlan refuses it: EADDRINUSE);
 * - sends raw frames (AF_PACKET) with a's MAC and a's address: the receiver cannot tell them from
 *   a's, so the sender's source guard (src/dataplane/nftables/source-guard.ts, written in b as the
 *   sidecar writes it) must drop them, and the IP spoof too, while b's own traffic, ARP and
 *   neighbour discovery still pass.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createDataplane, withPodPolicy, type Dataplane, type DesiredState } from '../../src/dataplane/index.js';
import { guardInterfaces, sourceGuardText } from '../../src/dataplane/index.js';
import type { PodPolicy } from '../../src/policy/model.js';
import { createTopology, httpRequests, startBackend, udpRequests, type Pod, type Topology } from '../harness/netns.js';
import { FakeSidecar } from '../harness/tracer/sidecar.js';
import { RAW_PY } from '../harness/raw-frames.js';

const TCP_PORT = 8080;
const UDP_PORT = 5353;
const COUNT = 20;
const NETWORK = 'demo/net-a';

/** Counts UDP datagrams and TCP SYNs to p's ports by source address, before and after the policy. */
const SPY = (srcs: readonly string[]): string => {
  const rules = (tag: string): string =>
    srcs
      .map((s, i) => {
        const f = s.includes(':') ? 'ip6' : 'ip';
        return `\t\t${f} saddr ${s} udp dport ${UDP_PORT} counter name "${tag}-u${i}"\n\t\t${f} saddr ${s} tcp dport ${TCP_PORT} tcp flags syn counter name "${tag}-t${i}"\n`;
      })
      .join('');
  const counters = srcs.flatMap((_s, i) => ['in', 'ok'].flatMap((t) => [`\tcounter ${t}-u${i} {\n\t}\n`, `\tcounter ${t}-t${i} {\n\t}\n`])).join('');
  return `table inet spy\ndelete table inet spy\ntable inet spy {\n${counters}\tchain in {\n\t\ttype filter hook input priority -10; policy accept;\n${rules('in')}\t}\n\tchain ok {\n\t\ttype filter hook input priority 10; policy accept;\n${rules('ok')}\t}\n}\n`;
};

/** Sends `count` datagrams from `from` (an address of the pod) without waiting for answers. */
const UDP_FROM_JS = `const d=require('dgram');const [from,to,port,n]=process.argv.slice(1);const s=d.createSocket(to.includes(':')?'udp6':'udp4');
s.bind({address:from},()=>{let i=0;const go=()=>{if(i++>=Number(n)){setTimeout(()=>s.close(),100);return}s.send('spoof',Number(port),to,go)};go()});`;
/** One TCP connection from `from`; prints "connected" or "failed". */
const TCP_FROM_JS = `const net=require('net');const [from,to,port]=process.argv.slice(1);const c=net.connect({host:to,port:Number(port),localAddress:from});
const t=setTimeout(()=>{console.log('failed');c.destroy()},1500);c.on('connect',()=>{clearTimeout(t);console.log('connected');c.destroy()});c.on('error',()=>{clearTimeout(t);console.log('failed')});`;

async function mac(topo: Topology, pod: Pod): Promise<string> {
  const out = await topo.run(pod, ['cat', '/sys/class/net/net1/address']);
  return out.stdout.trim();
}

void describe("policy: a pod that claims another pod's address (nftables, macvlan)", () => {
  let topo: Topology;
  let p: Pod;
  let a: Pod;
  let b: Pod;
  let macs: { p: string; a: string; b: string };
  let dp: Dataplane;
  let state: DesiredState;
  const fake = new FakeSidecar('nftables');

  /** Counter values of the spy table in p: `in-u0`, `ok-t1`, ... */
  async function spy(): Promise<Record<string, number>> {
    const out = (await topo.run(p, ['nft', 'list', 'counters', 'table', 'inet', 'spy'])).stdout;
    return Object.fromEntries([...out.matchAll(/counter (\S+) \{\s*packets (\d+)/g)].map((m) => [m[1] ?? '', Number(m[2])]));
  }
  const resetSpy = async (): Promise<void> => void (await topo.run(p, ['nft', 'reset', 'counters', 'table', 'inet', 'spy']));
  const traced = (src: string, srcMac: string, protocol: 'tcp' | 'udp'): boolean =>
    fake
      .trace(
        { family: src.includes(':') ? 6 : 4, protocol, src, dst: src.includes(':') ? p.net1.ipv6 : p.net1.ipv4, dport: protocol === 'tcp' ? TCP_PORT : UDP_PORT, iif: 'net1', srcMac },
        { hook: 'prerouting', local: [p.net1.ipv4, p.net1.ipv6] },
      )
      .every((o) => o.verdict.kind === 'accept');

  before(async () => {
    topo = await createTopology();
    const node = await topo.addNode('n1');
    p = await topo.addPod('p', { node });
    a = await topo.addPod('a', { node });
    b = await topo.addPod('b', { node });
    macs = { p: await mac(topo, p), a: await mac(topo, a), b: await mac(topo, b) };
    await startBackend(topo, p, { httpPort: TCP_PORT, udpPort: UDP_PORT });
    await topo.run(p, ['nft', '-f', '-'], { input: SPY([a.net1.ipv4, a.net1.ipv6, b.net1.ipv4]) });
    const policy: PodPolicy = {
      networks: [
        {
          network: NETWORK,
          interface: 'net1',
          ingress: {
            isolated: true,
            rules: [{ policy: 'demo/allow-a', index: 0, peers: { addresses: [a.net1.ipv4, a.net1.ipv6], blocks: [], macs: { [a.net1.ipv4]: [macs.a], [a.net1.ipv6]: [macs.a] } } }],
          },
          egress: { isolated: false, rules: [] },
          failures: [],
        },
      ],
    };
    state = withPodPolicy({ targets: [], interfaces: [{ network: { namespace: 'demo', name: 'net-a' }, interface: 'net1', ipv4: [p.net1.ipv4], ipv6: [p.net1.ipv6] }] }, policy);
    dp = createDataplane({ netns: p.ns, backendKind: 'nftables' });
    await dp.sync(state, { full: true });
    fake.sync(state, true);
    assert.equal(await dp.checkDrift({ deep: true }), undefined);
    assert.match((await topo.run(p, ['nft', 'list', 'table', 'inet', 'multus_proxy'])).stdout, /ip saddr \. ether saddr @MPX-PM-/);
  });
  after(async () => {
    dp?.close();
    await topo?.teardown();
  });

  void test('the real pair passes: a reaches p over UDP and TCP, both families', async () => {
    await resetSpy();
    const udp = await udpRequests(topo, a, p.net1.ipv4, UDP_PORT, COUNT, { timeoutMs: 1000 });
    assert.equal(udp.filter((r) => r.error === undefined).length, COUNT);
    const tcp = await httpRequests(topo, a, `http://${p.net1.ipv4}:${TCP_PORT}/`, 1, 1500);
    assert.equal(tcp[0]?.error, undefined, JSON.stringify(tcp));
    const tcp6 = await httpRequests(topo, a, `http://[${p.net1.ipv6}]:${TCP_PORT}/`, 1, 3000);
    assert.equal(tcp6[0]?.error, undefined, JSON.stringify(tcp6));
    const c = await spy();
    assert.equal(c['ok-u0'], COUNT);
    assert.equal(c['ok-t0'], 1);
    assert.equal(c['ok-t1'], 1);
    for (const proto of ['udp', 'tcp'] as const) {
      assert.equal(traced(a.net1.ipv4, macs.a, proto), true);
      assert.equal(traced(a.net1.ipv6, macs.a, proto), true);
    }
  });

  void test("b with a's address added to its net1: every UDP datagram and TCP SYN arrives and is dropped", async () => {
    await topo.run(b, ['ip', 'addr', 'add', `${a.net1.ipv4}/32`, 'dev', 'net1']);
    await topo.run(b, ['ip', 'addr', 'add', `${a.net1.ipv6}/128`, 'dev', 'net1', 'nodad']);
    await resetSpy();
    await topo.run(b, [process.execPath, '-e', UDP_FROM_JS, a.net1.ipv4, p.net1.ipv4, String(UDP_PORT), String(COUNT)]);
    const tcp = (await topo.run(b, [process.execPath, '-e', TCP_FROM_JS, a.net1.ipv4, p.net1.ipv4, String(TCP_PORT)])).stdout.trim();
    const tcp6 = (await topo.run(b, [process.execPath, '-e', TCP_FROM_JS, a.net1.ipv6, p.net1.ipv6, String(TCP_PORT)])).stdout.trim();
    const c = await spy();
    assert.equal(c['in-u0'], COUNT, 'the spoofed datagrams reached p');
    assert.equal(c['ok-u0'], 0, 'none got past the policy');
    assert.ok((c['in-t0'] ?? 0) >= 1 && (c['in-t1'] ?? 0) >= 1, `the spoofed SYNs reached p: ${JSON.stringify(c)}`);
    assert.equal(c['ok-t0'], 0);
    assert.equal(c['ok-t1'], 0);
    assert.equal(tcp, 'failed');
    assert.equal(tcp6, 'failed');
    for (const proto of ['udp', 'tcp'] as const) {
      assert.equal(traced(a.net1.ipv4, macs.b, proto), false, 'the tracer drops the same spoof');
      assert.equal(traced(a.net1.ipv6, macs.b, proto), false);
    }
    // Replies and neighbour discovery are not bound: a reply from b's MAC to a connection p made passes.
    assert.equal(
      fake
        .trace({ family: 4, protocol: 'udp', src: a.net1.ipv4, dst: p.net1.ipv4, dport: UDP_PORT, iif: 'net1', srcMac: macs.b, ct: 'established' }, { hook: 'prerouting', local: [p.net1.ipv4] })
        .every((o) => o.verdict.kind === 'accept'),
      true,
    );
  });

  void test('macvlan refuses b a MAC already used on the same parent', async () => {
    const r = await topo.run(b, ['ip', 'link', 'set', 'dev', 'net1', 'address', macs.a], { allowFail: true });
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /Address already in use/);
    assert.equal(await mac(topo, b), macs.b);
  });

  void test("raw frames with a's MAC and address pass the receiver, and b's source guard drops them at its egress; b still talks as itself", async () => {
    const raw = [RAW_PY, macs.a, a.net1.ipv4, macs.p, p.net1.ipv4, String(UDP_PORT), String(COUNT)];
    await resetSpy();
    assert.equal((await topo.run(b, ['python3', '-c', ...raw])).stdout.trim(), '0');
    assert.equal((await spy())['ok-u0'], COUNT, 'without a guard in the sender, the receiver cannot tell them from a');
    await topo.run(b, ['ip', 'addr', 'del', `${a.net1.ipv4}/32`, 'dev', 'net1']);
    await topo.run(b, ['ip', 'addr', 'del', `${a.net1.ipv6}/128`, 'dev', 'net1']);
    const status = [
      { name: 'ovn', interface: 'eth0', ipv4: [b.eth0.ipv4], ipv6: [], default: true },
      { name: NETWORK, namespace: 'demo', nad: 'net-a', interface: 'net1', ipv4: [b.net1.ipv4], ipv6: [b.net1.ipv6], mac: macs.b, default: false },
    ];
    await topo.run(b, ['nft', '-f', '-'], { input: sourceGuardText(guardInterfaces(status)) });
    await resetSpy();
    assert.equal((await topo.run(b, ['python3', '-c', ...raw])).stdout.trim(), String(COUNT), "every raw frame refused at b's egress");
    // The same spoof at the IP layer (b claims a's address again): dropped before it leaves.
    await topo.run(b, ['ip', 'addr', 'add', `${a.net1.ipv4}/32`, 'dev', 'net1']);
    await topo.run(b, [process.execPath, '-e', UDP_FROM_JS, a.net1.ipv4, p.net1.ipv4, String(UDP_PORT), String(COUNT)]);
    await topo.run(b, ['ip', 'addr', 'del', `${a.net1.ipv4}/32`, 'dev', 'net1']);
    // b as itself, after ARP and neighbour discovery from scratch: leaves b and reaches p (whose policy then drops it).
    await topo.run(b, ['ip', 'neigh', 'flush', 'all']);
    await topo.run(b, [process.execPath, '-e', UDP_FROM_JS, b.net1.ipv4, p.net1.ipv4, String(UDP_PORT), String(COUNT)]);
    const toA = await httpRequests(topo, b, `http://[${a.net1.ipv6}]:${TCP_PORT}/`, 1, 3000);
    const c = await spy();
    assert.equal(c['in-u0'], 0, `nothing with a's address left b: ${JSON.stringify(c)}`);
    assert.ok((c['in-u2'] ?? 0) >= COUNT - 1, `b's own datagrams left b and reached p: ${JSON.stringify(c)}`);
    // a serves nothing: a refusal (a TCP reset from a) proves b's SYN, and its neighbour discovery, went through.
    assert.equal(toA[0]?.error, 'ECONNREFUSED', JSON.stringify(toA));
    const dropped = (await topo.run(b, ['nft', 'list', 'table', 'netdev', 'multus_proxy_guard'])).stdout;
    const packets = [...dropped.matchAll(/packets (\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
    assert.ok(packets >= 2 * COUNT, `the guard counted its drops: ${dropped}`);
  });
});
