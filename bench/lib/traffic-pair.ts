/**
 * The dataplane benchmarks' two namespaces (B4, B10): a client and a backend joined by a veth pair
 * (the "secondary network"; the client's end has the pod's address), the backend answering HTTP
 * on every given address with one Node.js server, and both tuned for hundreds of thousands of
 * short connections (our namespaces only).
 */
import { CLIENT_ADDRESS, CLIENT_INTERFACE, ENDPOINT_PREFIX_LEN, TARGET_PORT } from './services.js';
import { createNetns } from './netns.js';
import { requireTool, run, startProcess, stopProcess, waitForLine, type Cleanup } from './proc.js';

export interface TrafficPair {
  readonly client: string;
  readonly backend: string;
}

export async function createTrafficPair(tag: string, cleanup: Cleanup, backendIPs: Iterable<string>): Promise<TrafficPair> {
  await requireTool('conntrack', ['--version'], 'install conntrack (apt-get install conntrack)');
  const client = await createNetns(`${tag}c`, cleanup);
  const backend = await createNetns(`${tag}b`, cleanup);
  await run('ip', ['-n', client, 'link', 'add', CLIENT_INTERFACE, 'type', 'veth', 'peer', 'name', CLIENT_INTERFACE, 'netns', backend]);
  await run('ip', ['-n', client, 'addr', 'add', `${CLIENT_ADDRESS}/${ENDPOINT_PREFIX_LEN}`, 'dev', CLIENT_INTERFACE]);
  await run('ip', ['-n', client, 'link', 'set', CLIENT_INTERFACE, 'up']);
  for (const ip of backendIPs) await run('ip', ['-n', backend, 'addr', 'add', `${ip}/${ENDPOINT_PREFIX_LEN}`, 'dev', CLIENT_INTERFACE]);
  await run('ip', ['-n', backend, 'link', 'set', CLIENT_INTERFACE, 'up']);
  await tuneForShortConnections(client, backend);
  await startHttpBackend(backend, TARGET_PORT, cleanup);
  return { client, backend };
}

/**
 * Tens of thousands of short connections per run: without this, conntrack entries in TIME_WAIT
 * (120 s) and the ephemeral port range run out after a few runs and both sides collapse to a
 * few hundred req/s (seen in an earlier B4 run). Only the namespaces given, which are the
 * benchmark's own (B11 tunes its client only: the real node's settings are not ours).
 */
export async function tuneForShortConnections(client: string, backend?: string): Promise<void> {
  const settings: [string, string, string][] = [
    [client, 'net.netfilter.nf_conntrack_tcp_timeout_time_wait', '1'],
    [client, 'net.ipv4.ip_local_port_range', '1024 65000'],
    [client, 'net.ipv4.tcp_tw_reuse', '1'],
  ];
  if (backend !== undefined) settings.push([backend, 'net.ipv4.tcp_max_tw_buckets', '1024']);
  for (const [ns, key, value] of settings) await run('sysctl', ['-qw', `${key}=${value}`], { netns: ns });
}

/** B4's backend (bench/servers/http-backend.ts) on every address of `ns`, stopped by `cleanup`. */
export async function startHttpBackend(ns: string, port: number, cleanup: Cleanup): Promise<void> {
  const server = startProcess('node', ['--import', 'tsx', 'bench/servers/http-backend.ts'], { netns: ns, env: { ...process.env, PORT: String(port) } });
  cleanup.add('backend server', () => stopProcess(server));
  await waitForLine(server, /LISTENING (\d+)/);
}
