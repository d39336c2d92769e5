/**
 * native/health-listen.c with the sidecar's health server (src/health.ts): the health port
 * accepts a connection before Node.js serves, the request is answered once it does, and without
 * the launcher the same early connection is refused (the startup probe's Unhealthy Event). Built
 * with scripts/build-native.sh into a temporary folder; real processes, sockets and, for the
 * IPv4-only pod, a network namespace of the test's own with IPv6 disabled; for a kernel without
 * IPv6, no-ipv6.c (a seccomp filter refusing AF_INET6 sockets).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { HEALTH_FD_ENV, inheritedHealthFd } from '../../src/health.js';

const REPO = resolve(import.meta.dirname, '..', '..');
const PROC = join(import.meta.dirname, 'health-listen-proc.ts');
let dir: string;
let launcher: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'multus-proxy-health-listen-'));
  await promisify(execFile)('bash', [join(REPO, 'scripts', 'build-native.sh')], { env: { ...process.env, MULTUS_PROXY_BIN_DIR: dir } });
  launcher = join(dir, 'health-listen');
  await promisify(execFile)('gcc', ['-O2', '-Wall', '-Wextra', '-Werror', '-o', join(dir, 'no-ipv6'), join(import.meta.dirname, 'no-ipv6.c')]);
});
after(() => rmSync(dir, { recursive: true, force: true }));

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '::', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

interface Proc {
  readonly child: ChildProcess;
  /** Resolves with the first line matching `re`. */
  line(re: RegExp): Promise<string>;
  readonly out: () => string;
}

function start(withLauncher: boolean, env: Record<string, string>): Proc {
  const cmd = [process.execPath, '--import', 'tsx', PROC];
  const [file = '', ...args] = withLauncher ? [launcher, ...cmd] : cmd;
  const child = spawn(file, args, { cwd: REPO, env: { PATH: process.env['PATH'] ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const waiters: { re: RegExp; resolve: (l: string) => void }[] = [];
  const onData = (d: Buffer): void => {
    out += d.toString();
    for (const w of [...waiters]) {
      const l = out.split('\n').find((x) => w.re.test(x));
      if (l !== undefined) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(l);
      }
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  return {
    child,
    out: () => out,
    line: (re) =>
      new Promise((resolveLine, reject) => {
        const l = out.split('\n').find((x) => re.test(x));
        if (l !== undefined) return resolveLine(l);
        waiters.push({ re, resolve: resolveLine });
        const t = setTimeout(() => reject(new Error(`no line ${re} within 30 s:\n${out}`)), 30_000);
        const gone = (code: number | null): void => void setTimeout(() => reject(new Error(`exited ${code} before a line ${re}:\n${out}`)), 100);
        if (child.exitCode !== null) gone(child.exitCode);
        else child.once('exit', gone);
        t.unref();
      }),
  };
}

/** A TCP connect: 'connected' (then closed) or the error code. */
function connect(host: string, port: number): Promise<string> {
  return new Promise((r) => {
    const s = net.connect({ host, port });
    s.once('connect', () => {
      s.destroy();
      r('connected');
    });
    s.once('error', (e: NodeJS.ErrnoException) => r(e.code ?? e.message));
  });
}

/** One HTTP GET on a fresh connection, as the kubelet probes: status and when the connect and the answer came. */
function probe(host: string, port: number, path: string, onConnect?: () => void): Promise<{ connectMs: number; status: number; ms: number } | { error: string }> {
  const t0 = Date.now();
  return new Promise((r) => {
    let connectMs = -1;
    let data = '';
    const s = net.connect({ host, port }, () => {
      connectMs = Date.now() - t0;
      onConnect?.();
      s.write(`GET ${path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n`);
    });
    s.on('data', (d) => (data += d.toString()));
    s.once('error', (e: NodeJS.ErrnoException) => r({ error: e.code ?? e.message }));
    s.once('close', () => {
      const status = Number(/^HTTP\/1\.1 (\d+)/.exec(data)?.[1] ?? 0);
      r(status > 0 ? { connectMs, status, ms: Date.now() - t0 } : { error: `closed after ${Date.now() - t0} ms without an answer: ${JSON.stringify(data)}` });
    });
  });
}

void test("inheritedHealthFd: the launcher's descriptor, none without it, a clear error for anything else", () => {
  assert.equal(inheritedHealthFd({}), undefined);
  assert.equal(inheritedHealthFd({ [HEALTH_FD_ENV]: '' }), undefined);
  assert.equal(inheritedHealthFd({ [HEALTH_FD_ENV]: '3' }), 3);
  for (const bad of ['x', '-1', '0', '2', '3.5'])
    assert.throws(() => inheritedHealthFd({ [HEALTH_FD_ENV]: bad }), new RegExp(`${HEALTH_FD_ENV}=".*" is not an inherited file descriptor.*unset it`), bad);
});

void test('under health-listen the port accepts before Node.js serves and the held request is answered once ready; without it the same connection is refused', async () => {
  const port = await freePort();
  const env = { HEALTH_PORT: String(port), DELAY_MS: '1500', READY_MS: '300' };

  const bare = start(false, env);
  try {
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(await connect('127.0.0.1', port), 'ECONNREFUSED', 'without the launcher: refused while Node.js starts (the probe failure this fixes)');
    await bare.line(/^serving /);
  } finally {
    bare.child.kill('SIGKILL');
    if (bare.child.exitCode === null) await new Promise((r) => bare.child.once('exit', r));
  }

  const p = start(true, env);
  try {
    // The first try may come before the launcher's exec: retried until it connects. What counts is
    // the order: the connection is accepted while Node.js is still starting (before it serves).
    let outAtConnect = '';
    let first = await probeSoon(port, p.out, () => (outAtConnect = p.out()));
    assert.ok(!('error' in first), `under the launcher: ${JSON.stringify(first)}\n${p.out()}`);
    assert.doesNotMatch(outAtConnect, /^serving /m, `connected before Node.js served (${first.connectMs} ms after the try)`);
    assert.equal(first.status, 200, 'held in the backlog, then by /readyz?wait until ready');
    assert.ok(first.ms >= 1500, `answered after Node.js started serving (${first.ms} ms)`);
    const serving = await p.line(/^serving /);
    const [, servedPort, listener, children] = /^serving (\d+) listener=(\S*) children=(\S*)$/.exec(serving) ?? [];
    assert.equal(Number(servedPort), port);
    assert.match(listener ?? '', /^socket:\[\d+\]$/, 'served on the inherited socket');
    assert.ok(!(children ?? '').split(',').includes(listener ?? ''), `a process the sidecar runs does not hold the listener (${children} vs ${listener})`);
    first = await probe('::1', port, '/readyz');
    assert.ok(!('error' in first) && first.status === 200, `IPv6 too: ${JSON.stringify(first)}`);
    // Stopping: once the server is closed the port refuses (no process left holding the socket).
    p.child.kill('SIGTERM');
    await p.line(/^closed$/);
    assert.equal(await connect('127.0.0.1', port), 'ECONNREFUSED', 'closed means closed');
  } finally {
    p.child.kill('SIGKILL');
  }
});

/** Probes until a connection is accepted or Node.js serves (after which a refusal is final). */
async function probeSoon(port: number, out: () => string, onConnect?: () => void): Promise<Awaited<ReturnType<typeof probe>>> {
  for (;;) {
    const served = /^serving /m.test(out());
    const r = await probe('127.0.0.1', port, '/readyz?wait=9', onConnect);
    if (!('error' in r) || r.error !== 'ECONNREFUSED' || served) return r;
    await new Promise((x) => setTimeout(x, 5));
  }
}

void test('health-listen falls back to letting Node.js bind when it cannot listen, and a port mismatch is a clear error', async () => {
  const port = await freePort();
  const bad = start(true, { HEALTH_PORT: 'ninety' });
  try {
    assert.match(await bad.line(/health-listen:/), /not listening on HEALTH_HOST=\(unset\) HEALTH_PORT=ninety \(HEALTH_PORT is not a port number/);
    // The sidecar's own option parsing would refuse "ninety"; this server reads 0 for it.
  } finally {
    bad.child.kill('SIGKILL');
  }
  // The launcher listened on one port, Node.js was told another: refused with the variable named.
  const other = await freePort();
  const mismatch = spawn(launcher, ['sh', '-c', `HEALTH_PORT=${other} exec "$0" --import tsx ${PROC}`, process.execPath], {
    cwd: REPO,
    env: { PATH: process.env['PATH'] ?? '', HEALTH_PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  mismatch.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise((r) => mismatch.once('exit', r));
  assert.equal(code, 3, out);
  assert.match(out, new RegExp(`${HEALTH_FD_ENV}=3: the inherited socket listens on port ${port}, not on the health port ${other}`));
});

void test('in an IPv4-only pod (IPv6 disabled in its network namespace) "::" still takes the IPv4 probe', async () => {
  const port = 9180;
  // A network namespace of this test's own (unshare -n), so the fixed port collides with nothing.
  const script = [
    'ip link set lo up',
    'sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 net.ipv6.conf.lo.disable_ipv6=1',
    `HEALTH_PORT=${port} READY_MS=0 DELAY_MS=500 "${launcher}" "${process.execPath}" --import tsx "${PROC}" > "${dir}/v4.out" 2>&1 &`,
    `"${process.execPath}" -e 'const s = require("net").connect(${port}, "127.0.0.1", () => s.write("GET /readyz?wait=9 HTTP/1.1\\r\\nHost: p\\r\\nConnection: close\\r\\n\\r\\n")); let d = ""; s.on("data", (x) => (d += x)); s.on("close", () => { console.log(d.split("\\r\\n")[0]); process.exit(0); }); s.on("error", (e) => { console.log(e.code); process.exit(0); })'`,
    'kill $!',
  ].join('\n');
  const r = await promisify(execFile)('unshare', ['-n', 'sh', '-c', script], { cwd: REPO, timeout: 30_000 });
  assert.equal(r.stdout.trim(), 'HTTP/1.1 200 OK', r.stderr);
});

void test('on a kernel without IPv6 (AF_INET6 sockets refused) health-listen listens on 0.0.0.0 and Node.js serves on it', async () => {
  const port = await freePort();
  const p = spawn(join(dir, 'no-ipv6'), [launcher, process.execPath, '--import', 'tsx', PROC], {
    cwd: REPO,
    env: { PATH: process.env['PATH'] ?? '', HEALTH_PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  p.stdout.on('data', (d: Buffer) => (out += d.toString()));
  p.stderr.on('data', (d: Buffer) => (out += d.toString()));
  try {
    const first = await probeSoon(port, () => out);
    assert.ok(!('error' in first) && first.status === 200, `IPv4: ${JSON.stringify(first)}\n${out}`);
    assert.match(out, /^serving \d+ listener=socket:\[\d+\]/m, 'served on the inherited socket, not one Node.js bound after a fallback');
    assert.doesNotMatch(out, /health-listen: not listening/);
    assert.equal(await connect('::1', port), 'ECONNREFUSED', 'IPv4 only: nothing listens on ::1');
  } finally {
    p.kill('SIGKILL');
  }
});
