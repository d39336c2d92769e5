/**
 * Shared set-up for the dataplane tests: the blog topology (a client with eth0 + net1,
 * three backends serving HTTP on :8080 and UDP echo on :5353 on their net1 addresses, default
 * routes on eth0) and helpers to build desired states and read the client namespace back.
 */
import assert from 'node:assert/strict';
import { createTopology, startBackend, type Pod, type Topology } from '../harness/netns.js';
import type { BackendEndpoint, DesiredState, PodInterface, ServicePortTarget } from '../../src/dataplane/core/model.js';
import { BLUE, target } from './render-fixtures.js';

export const HTTP_PORT = 8080;
export const UDP_PORT = 5353;
export const WEB_V4 = '10.96.0.10';
export const WEB_V6 = 'fd00:10:96::a';
export const DNS_V4 = '10.96.0.53';

export interface Env {
  readonly topo: Topology;
  readonly client: Pod;
  readonly backends: readonly Pod[];
  readonly iface: PodInterface;
}

export async function createEnv(backendCount = 3): Promise<Env> {
  for (const bin of ['iptables-nft-restore', 'ip6tables-nft-restore', 'iptables-legacy-restore', 'conntrack', 'setpriv']) {
    const { execFileSync } = await import('node:child_process');
    try {
      execFileSync('sh', ['-c', `command -v ${bin}`], { stdio: 'ignore' });
    } catch {
      throw new Error(`${bin} is missing: apt-get install iptables conntrack util-linux`);
    }
  }
  const topo = await createTopology();
  const client = await topo.addPod('client');
  const backends: Pod[] = [];
  for (let i = 1; i <= backendCount; i += 1) {
    const b = await topo.addPod(`b${i}`);
    await startBackend(topo, b, { httpPort: HTTP_PORT, udpPort: UDP_PORT });
    backends.push(b);
  }
  return { topo, client, backends, iface: { network: BLUE, interface: 'net1', ipv4: [client.net1.ipv4], ipv6: [client.net1.ipv6] } };
}

export function endpoints(pods: readonly Pod[], family: 4 | 6, port: number, state: (p: Pod) => 'ready' | 'unready' | 'terminating' = () => 'ready'): BackendEndpoint[] {
  return pods.map((p) => {
    const s = state(p);
    return { ip: family === 4 ? p.net1.ipv4 : p.net1.ipv6, port, ready: s === 'ready', serving: s !== 'unready', terminating: s === 'terminating' };
  });
}

export function webTarget(eps: readonly BackendEndpoint[], extra: Partial<ServicePortTarget> = {}): ServicePortTarget {
  return target('demo/web', WEB_V4, 80, eps, { portName: 'http', ...extra });
}

export function state(env: Env, targets: readonly ServicePortTarget[]): DesiredState {
  return { interfaces: [env.iface], targets };
}

export async function saveText(env: Env, family: 4 | 6 = 4, backend: 'nft' | 'legacy' = 'nft'): Promise<string> {
  const r = await env.topo.run(env.client, [`${family === 4 ? 'iptables' : 'ip6tables'}-${backend}-save`]);
  // Drop the timestamp comments so two saves compare equal when the rules do.
  return r.stdout
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .join('\n');
}

/** Counts replies per backend name; asserts every request got one. */
export function tally(replies: readonly { name?: string; error?: string }[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const r of replies) {
    assert.equal(r.error, undefined, `request failed: ${r.error ?? ''}`);
    counts.set(r.name ?? '?', (counts.get(r.name ?? '?') ?? 0) + 1);
  }
  return counts;
}
