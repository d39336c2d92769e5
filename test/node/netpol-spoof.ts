/**
 * Spoofing on the real node: a pod that claims another pod's address on the segment does not get
 * through the policy that allows that other pod. With x/a isolated to "from y/a only" (netpol-more.ts
 * BASE_CASE), an attacker pod in netpol-z (injected, its app container root with NET_ADMIN, as
 * a namespace without the optional sidecar-pod-security policy allows) adds y/a's net1 address to
 * its own net1 and sends UDP datagrams and a TCP connection to x/a from it:
 * - with its own sidecar's source guard in place, nothing leaves it (the guard's counters);
 * - after it deletes the guard (NET_ADMIN can; its sidecar writes it again at its next drift check,
 *   so the phase is run again if that happened during it), the packets reach x/a and x/a's policy drops them:
 *   its rule binds y/a's address to y/a's MAC, and `ip addr add` keeps the attacker's MAC (x/a's
 *   drop counters);
 * - it cannot take y/a's MAC on the same parent (macvlan: EADDRINUSE), but raw frames (AF_PACKET,
 *   which NET_RAW allows) can carry y/a's MAC and address both, and x/a could not tell them from
 *   y/a's: its own sidecar's guard refuses every one at its egress (sent from the host in the
 *   attacker's network namespace, as the image has no raw-socket tool);
 * Delivery is read where it happens: x/a's server logs every datagram it receives with its source.
 * The real y/a gets through before and after, in the same run.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { RealNode } from '../harness/node.js';
import { NETWORK_STATUS_ANNOTATION, SIDECAR_CONTAINER_NAME } from '../../src/keys.js';
import { GUARD_TABLE } from '../../src/dataplane/index.js';
import { pod as getPod, podPid } from './cluster.js';
import { RAW_UDP_PY } from '../harness/raw-frames.js';
import { NAMESPACES, NETWORK_KEY, POD_LABEL } from './netpol-cases.js';
import { NETPOL_IMAGE, probeFrom, type Matrix } from './netpol.js';

const execFileP = promisify(execFile);

export const SPOOF_COUNT = 20;
const ATTACKER = 'spoofer';
const UDP_PORT = 81;

/** argv[1]: {host, port, n, tag, from?}: sends n datagrams `<tag>-<i>`, 5 ms apart; prints {sent, errors}. */
const SEND_JS = `const d=require('dgram');const a=JSON.parse(process.argv[1]);const s=d.createSocket(a.host.includes(':')?'udp6':'udp4');let i=0,errors=0;
const go=()=>{if(i>=a.n){setTimeout(()=>{s.close();console.log(JSON.stringify({sent:i,errors}))},300);return}i++;s.send(a.tag+'-'+i,a.port,a.host,e=>{if(e)errors++;setTimeout(go,5)})};
s.on('error',()=>{});if(a.from)s.bind({address:a.from},go);else go();`;

export interface SpoofRun {
  /** y/a's datagrams x/a logged, before and after the attack (each of SPOOF_COUNT). */
  readonly realBefore: number;
  readonly realAfter: number;
  /** y/a's TCP probe answers ('x/a' when it got through), before and after. */
  readonly realTcp: readonly string[];
  /** x/a's set of y/a's address bound to y/a's MAC was found in its sidecar's table. */
  readonly pairInTable: boolean;
  /** The attacker's attempt to take y/a's MAC: exit code and message. */
  readonly macTaken: { code: number; stderr: string };
  readonly guarded: SpoofPhase;
  /** Raw frames with y/a's MAC and address, sent while the guard was in place. */
  readonly raw: RawPhase;
  readonly unguarded: SpoofPhase;
}

export interface RawPhase {
  /** Sends the kernel refused (an egress hook dropped the frame), of SPOOF_COUNT. */
  readonly refused: number;
  /** Raw datagrams x/a logged. */
  readonly delivered: number;
  /** Packets the attacker's guard dropped during the phase. */
  readonly guardDrops: number;
}

export interface SpoofPhase {
  /** Spoofed datagrams x/a logged (delivered to its socket). */
  readonly delivered: number;
  /** The spoofed TCP probe's answer ('' when no connection). */
  readonly tcp: string;
  /** Packets the attacker's guard dropped during the phase. */
  readonly guardDrops: number;
  /** Packets x/a's policy counters dropped during the phase. */
  readonly policyDrops: number;
}

function attackerPod(): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: ATTACKER, namespace: NAMESPACES.z, labels: { [POD_LABEL]: ATTACKER }, annotations: { 'k8s.v1.cni.cncf.io/networks': NETWORK_KEY } },
    spec: {
      terminationGracePeriodSeconds: 1,
      containers: [{ name: 'serve', image: NETPOL_IMAGE, command: ['node', '-e', 'setInterval(()=>{},1e9)'], securityContext: { runAsUser: 0, capabilities: { add: ['NET_ADMIN'] } } }],
    },
  };
}

interface Net1 {
  readonly ipv4: string;
  readonly mac: string;
}

async function net1(node: RealNode, namespace: string, name: string): Promise<Net1> {
  const p = await getPod(node, namespace, name);
  const status = JSON.parse(p.metadata?.annotations?.[NETWORK_STATUS_ANNOTATION] ?? '[]') as { interface?: string; ips?: string[]; mac?: string }[];
  const e = status.find((s) => s.interface === 'net1');
  const ipv4 = e?.ips?.find((x) => !x.includes(':'));
  if (ipv4 === undefined || e?.mac === undefined) throw new Error(`${namespace}/${name}: no IPv4 address or MAC on net1 in its network-status`);
  return { ipv4, mac: e.mac.toLowerCase() };
}

const packets = (text: string, name: RegExp): number => [...text.matchAll(/counter (\S+) \{\s*packets (\d+)/g)].filter((m) => name.test(m[1] ?? '')).reduce((n, m) => n + Number(m[2]), 0);

export async function runSpoof(node: RealNode, m: Matrix, log: (m: string) => void): Promise<SpoofRun> {
  const must = async (ns: string, pod: string, cmd: string[], container = 'serve'): Promise<string> => {
    const r = await node.exec(ns, pod, cmd, { container, timeoutMs: 60_000 });
    if (r.code !== 0) throw new Error(`${ns}/${pod} (${container}): ${cmd.join(' ')} failed (${r.code}): ${r.stderr.slice(0, 300)}`);
    return r.stdout;
  };
  const send = async (ns: string, pod: string, tag: string, from?: string): Promise<void> =>
    void (await must(ns, pod, ['node', '-e', SEND_JS, JSON.stringify({ host: m.addresses['x/a'], port: UDP_PORT, n: SPOOF_COUNT, tag, ...(from !== undefined ? { from } : {}) })]));
  /** Datagrams tagged `tag` that x/a's server received, with y/a's address as their source. */
  const delivered = async (tag: string): Promise<number> => {
    const logs = await node.kubectl(['logs', '-n', NAMESPACES.x, 'a', '-c', 'serve']);
    return logs.split('\n').filter((l) => l.startsWith(`udp ${UDP_PORT} `) && l.includes(` ${tag}-`)).length;
  };
  const tcpFrom = async (ns: string, pod: string, from?: string): Promise<string> =>
    (await probeFrom(node, ns, pod, [['x/a', m.addresses['x/a']]], [{ protocol: 'TCP', port: 80 }], { timeoutMs: 2000, ...(from !== undefined ? { from } : {}) }))['TCP/80 x/a'] ?? '';
  const policyDrops = async (): Promise<number> => packets(await must(NAMESPACES.x, 'a', ['nft', 'list', 'counters', 'table', 'inet', 'multus_proxy'], SIDECAR_CONTAINER_NAME), /^MPX-PC-/);
  const guardDrops = async (): Promise<number> => {
    const r = await node.exec(NAMESPACES.z, ATTACKER, ['nft', 'list', 'table', 'netdev', GUARD_TABLE], { container: SIDECAR_CONTAINER_NAME, timeoutMs: 30_000 });
    return r.code === 0 ? [...r.stdout.matchAll(/packets (\d+)/g)].reduce((n, x) => n + Number(x[1]), 0) : 0;
  };

  const t0 = Date.now();
  await node.kubectl(['apply', '-f', '-'], { input: JSON.stringify(attackerPod()) });
  try {
    await node.wait(`pod/${ATTACKER}`, 'condition=Ready', { namespace: NAMESPACES.z, timeoutMs: 120_000 });
    log(`attacker ${NAMESPACES.z}/${ATTACKER} Ready in ${Date.now() - t0} ms`);
    const ya = await net1(node, NAMESPACES.y, 'a');
    const xa = await net1(node, NAMESPACES.x, 'a');
    const table = await must(NAMESPACES.x, 'a', ['nft', 'list', 'table', 'inet', 'multus_proxy'], SIDECAR_CONTAINER_NAME);
    const pairInTable = table.includes(`${ya.ipv4} . ${ya.mac}`) && /ip saddr \. ether saddr @MPX-PM-/.test(table);

    await send(NAMESPACES.y, 'a', 'real1');
    const realTcp = [await tcpFrom(NAMESPACES.y, 'a')];
    const realBefore = await delivered('real1');

    const macTry = await node.exec(NAMESPACES.z, ATTACKER, ['ip', 'link', 'set', 'dev', 'net1', 'address', ya.mac], { container: 'serve', timeoutMs: 30_000 });
    // The claim: y/a's address on the attacker's net1, and x/a's MAC known without asking (so every packet reaches the egress).
    await must(NAMESPACES.z, ATTACKER, ['ip', 'addr', 'add', `${ya.ipv4}/32`, 'dev', 'net1']);
    await must(NAMESPACES.z, ATTACKER, ['ip', 'neigh', 'replace', xa.ipv4, 'lladdr', xa.mac, 'dev', 'net1', 'nud', 'permanent']);

    const phase = async (tag: string): Promise<SpoofPhase> => {
      const [g0, d0] = [await guardDrops(), await policyDrops()];
      await send(NAMESPACES.z, ATTACKER, tag, ya.ipv4);
      const tcp = await tcpFrom(NAMESPACES.z, ATTACKER, ya.ipv4);
      return { delivered: await delivered(tag), tcp, guardDrops: (await guardDrops()) - g0, policyDrops: (await policyDrops()) - d0 };
    };
    const guarded = await phase('spoof1');
    const raw = await (async (): Promise<RawPhase> => {
      const g0 = await guardDrops();
      const pid = await podPid(node, ATTACKER, NAMESPACES.z);
      const args = [ya.mac, ya.ipv4, xa.mac, xa.ipv4, String(UDP_PORT), String(SPOOF_COUNT), 'raw1-0'];
      const { stdout } = await execFileP('nsenter', ['-t', String(pid), '-n', 'python3', '-c', RAW_UDP_PY, ...args], { timeout: 30_000 });
      return { refused: Number(stdout.trim()), delivered: await delivered('raw1'), guardDrops: (await guardDrops()) - g0 };
    })();
    // NET_ADMIN in the app container removes what its own sidecar wrote (the sidecar-pod-security policy is what refuses that container).
    // The sidecar writes a deleted guard again on its next drift check: a phase during which that
    // happened did not test x/a alone, so it is run again (a check every 60 s, a phase of ~3 s).
    const guardBack = async (): Promise<boolean> =>
      (await node.exec(NAMESPACES.z, ATTACKER, ['nft', 'list', 'table', 'netdev', GUARD_TABLE], { container: SIDECAR_CONTAINER_NAME, timeoutMs: 30_000 })).code === 0;
    let unguarded: SpoofPhase | undefined;
    for (let attempt = 1; unguarded === undefined; attempt++) {
      await must(NAMESPACES.z, ATTACKER, ['nft', 'delete', 'table', 'netdev', GUARD_TABLE]);
      const p = await phase(`spoof${attempt + 1}`);
      if (!(await guardBack())) unguarded = p;
      else if (attempt >= 3) throw new Error(`the attacker's guard was written again during each of ${attempt} phases with it deleted`);
      else log(`the attacker's sidecar wrote its guard again during the phase (its drift check): the phase runs again`);
    }
    log(`spoof (${SPOOF_COUNT} UDP + 1 TCP from ${ya.ipv4}): guarded ${JSON.stringify(guarded)}; raw frames ${JSON.stringify(raw)}; guard deleted ${JSON.stringify(unguarded)}`);

    await must(NAMESPACES.z, ATTACKER, ['ip', 'addr', 'del', `${ya.ipv4}/32`, 'dev', 'net1']);
    // x/a may have learnt the attacker's MAC for y/a's address from its ARP answers: forget it, as the kernel would in time.
    await must(NAMESPACES.x, 'a', ['ip', 'neigh', 'flush', 'dev', 'net1'], SIDECAR_CONTAINER_NAME);
    await send(NAMESPACES.y, 'a', 'real2');
    realTcp.push(await tcpFrom(NAMESPACES.y, 'a'));
    const realAfter = await delivered('real2');
    return { realBefore, realAfter, realTcp, pairInTable, macTaken: { code: macTry.code, stderr: macTry.stderr.trim() }, guarded, raw, unguarded };
  } finally {
    await node
      .kubectl(['delete', 'pod', '-n', NAMESPACES.z, ATTACKER, '--ignore-not-found', '--wait=true', '--timeout=60s'], { timeoutMs: 70_000 })
      .catch((e: Error) => log(`deleting the attacker: ${e.message}`));
  }
}
