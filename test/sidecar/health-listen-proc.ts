/**
 * The sidecar's health server as cmd/sidecar/main.ts starts it (src/health.ts), for
 * health-listen.test.ts: waits DELAY_MS first (a slow Node.js start), serves on the socket
 * health-listen passed (or binds HEALTH_PORT itself), is ready READY_MS after serving, prints
 * "serving <port> listener=<the inherited socket> children=<the sockets a child process holds>", and on SIGTERM closes the
 * server, prints "closed" and stays up 3 s (a stopping sidecar's last moments).
 */
import { execFileSync } from 'node:child_process';
import { readlinkSync } from 'node:fs';
import { HEALTH_FD_ENV, inheritedHealthFd, startHealthServer } from '../../src/health.js';

const delayMs = Number(process.env['DELAY_MS'] ?? '0');
const readyMs = Number(process.env['READY_MS'] ?? '0');
await new Promise((r) => setTimeout(r, delayMs));
const fd = inheritedHealthFd(process.env);
delete process.env[HEALTH_FD_ENV];
let ready = false;
const server = await startHealthServer({ live: () => true, ready: () => ({ ready }) }, undefined, Number(process.env['HEALTH_PORT'] ?? '0'), process.env['HEALTH_HOST'] ?? '::', undefined, fd).catch(
  (e: Error) => {
    console.log(`error ${e.message}`);
    process.exit(3);
  },
);
setTimeout(() => (ready = true), readyMs);
// The sockets a process the sidecar runs (iptables-restore, nft) would hold: none of the listener.
const children = execFileSync('sh', ['-c', 'for f in /proc/self/fd/*; do readlink "$f" 2>/dev/null; done; true'], { encoding: 'utf8' })
  .split('\n')
  .filter((l) => l.startsWith('socket:'))
  .join(',');
const listener = fd !== undefined ? readlinkSync(`/proc/self/fd/${fd}`) : '';
console.log(`serving ${server.port} listener=${listener} children=${children}`);
process.on('SIGTERM', () => {
  void server.close().then(() => {
    console.log('closed');
    setTimeout(() => process.exit(0), 3000);
  });
});
