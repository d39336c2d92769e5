/**
 * A loopback TCP proxy that a test can switch off in two ways, to cut a client off from the
 * apiserver without touching the apiserver:
 * - `refuse`: every open connection is reset and new ones are closed at once (a partition);
 * - `blackhole`: connections stay open but no byte passes (a NAT that silently dropped them),
 *   which is what an informer's watchdog exists for;
 * - `deaf`: the client's bytes are dropped, the server's still arrive (an asymmetric partition):
 *   open watches keep delivering events, so a cut-off leader still has work, but none of its
 *   requests (renews, writes) reaches the apiserver or is answered.
 * TLS passes through untouched, so the apiserver's certificate (for 127.0.0.1) still verifies.
 */
import { connect, createServer, type Socket } from 'node:net';

export type ProxyMode = 'pass' | 'refuse' | 'blackhole' | 'deaf';

export interface TcpProxy {
  readonly port: number;
  mode(): ProxyMode;
  setMode(mode: ProxyMode): void;
  /** Connections accepted so far (each watch or request on a fresh socket adds one). */
  connections(): number;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
  let current: ProxyMode = 'pass';
  let accepted = 0;
  const open = new Set<Socket>();
  const server = createServer((client) => {
    accepted++;
    if (current === 'refuse') {
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(targetPort, targetHost);
    open.add(client);
    open.add(upstream);
    const drop = (): void => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', drop);
    upstream.on('error', drop);
    client.on('close', drop);
    upstream.on('close', drop);
    // Bytes pass only in 'pass' mode (and server-to-client in 'deaf'); otherwise read and dropped.
    client.on('data', (d: Buffer) => {
      if (current === 'pass') upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => {
      if (current === 'pass' || current === 'deaf') client.write(d);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    port,
    mode: () => current,
    setMode(mode) {
      current = mode;
      if (mode === 'refuse') for (const s of open) s.resetAndDestroy();
    },
    connections: () => accepted,
    async close() {
      for (const s of open) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
