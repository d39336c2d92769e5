/**
 * Network namespaces named for benchmarks (`mpb-…` so they never collide with the tests' own),
 * deleted again by the caller's Cleanup.
 */
import { run, type Cleanup } from './proc.js';

let counter = 0;

export function netnsName(tag: string): string {
  counter += 1;
  return `mpb-${tag}-${process.pid}-${counter}`;
}

/** Creates a namespace with its loopback up; registers its deletion. */
export async function createNetns(tag: string, cleanup: Cleanup): Promise<string> {
  const name = netnsName(tag);
  await run('ip', ['netns', 'add', name]);
  cleanup.add(`netns ${name}`, () => deleteNetns(name));
  await run('ip', ['link', 'set', 'lo', 'up'], { netns: name });
  return name;
}

export async function deleteNetns(name: string): Promise<void> {
  await run('ip', ['netns', 'delete', name], { check: false });
}

/**
 * A client pod's namespace as the sidecar finds it: loopback and a secondary interface `net1`
 * with the pod's secondary address. net1 is one end of a veth pair whose other end stays in the
 * same namespace (this kernel has no dummy driver): rule sync needs the interface for the
 * cluster-IP routes; no traffic is sent.
 */
export async function createClientNetns(tag: string, cleanup: Cleanup, iface: string, address: string, prefixLen: number, peer = `${iface}p`): Promise<string> {
  const ns = await createNetns(tag, cleanup);
  await run('ip', ['link', 'add', iface, 'type', 'veth', 'peer', 'name', peer], { netns: ns });
  await run('ip', ['addr', 'add', `${address}/${prefixLen}`, 'dev', iface], { netns: ns });
  await run('ip', ['link', 'set', peer, 'up'], { netns: ns });
  await run('ip', ['link', 'set', iface, 'up'], { netns: ns });
  return ns;
}
