/**
 * Lets a process inside a test network namespace reach the harness's kube-apiserver, which
 * listens on the root namespace's 127.0.0.1.
 *
 * Network namespaces do not share loopback, but they do share the file system. So a relay in the
 * root namespace listens on a Unix socket and forwards to the apiserver, and a second relay,
 * started inside the pod's namespace, listens on that namespace's 127.0.0.1 at the apiserver's
 * own port and forwards to the socket. The sidecar then uses the same kubeconfig (same URL, same
 * certificate) as everyone else, and no address outside the test's namespaces is added or used.
 */
import { once } from 'node:events';
import net from 'node:net';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import type { Place, Topology } from './netns.js';

export interface ApiserverRelay {
  /** Starts the in-namespace half for one pod; resolves when it listens. */
  attach(pod: Place): Promise<void>;
  close(): Promise<void>;
}

/** Runs inside the namespace: 127.0.0.1:<port> -> Unix socket. Printed "ready" once listening. */
const POD_SIDE_JS = `
const net = require('node:net');
const [port, sock] = process.argv.slice(1);
const srv = net.createServer((c) => { const u = net.connect(sock); c.pipe(u); u.pipe(c); c.on('error', () => u.destroy()); u.on('error', () => c.destroy()); });
srv.listen(Number(port), '127.0.0.1', () => console.log('ready'));
`;

export async function startApiserverRelay(topo: Topology, server: string, dir: string): Promise<ApiserverRelay> {
  const url = new URL(server);
  const port = Number(url.port);
  const sock = join(dir, `apiserver-${process.pid}-${Date.now()}.sock`);
  const conns = new Set<net.Socket>();
  const unixServer = net.createServer((c) => {
    const up = net.connect(port, '127.0.0.1');
    conns.add(c).add(up);
    c.pipe(up);
    up.pipe(c);
    const drop = (): void => {
      c.destroy();
      up.destroy();
      conns.delete(c);
      conns.delete(up);
    };
    c.on('error', drop).on('close', drop);
    up.on('error', drop).on('close', drop);
  });
  unixServer.listen(sock);
  await once(unixServer, 'listening');
  const children: ChildProcess[] = [];
  return {
    async attach(pod) {
      const child = topo.spawn(pod, [process.execPath, '-e', POD_SIDE_JS, String(port), sock]);
      children.push(child);
      await new Promise<void>((resolve, reject) => {
        let errText = '';
        const timer = setTimeout(() => reject(new Error(`apiserver relay in ${pod.name} did not start: ${errText}`)), 10_000);
        child.stderr?.on('data', (b: Buffer) => (errText += b.toString()));
        child.stdout?.on('data', (b: Buffer) => {
          if (b.toString().includes('ready')) {
            clearTimeout(timer);
            resolve();
          }
        });
        child.once('exit', (code) => {
          clearTimeout(timer);
          reject(new Error(`apiserver relay in ${pod.name} exited (${String(code)}): ${errText}`));
        });
      });
    },
    async close() {
      for (const c of children) c.kill('SIGKILL');
      for (const c of conns) c.destroy();
      await new Promise<void>((resolve) => unixServer.close(() => resolve()));
    },
  };
}
