/**
 * The rule back end chosen at start (src/dataplane/backend-choice.ts): the choice for every
 * setting, and the real sidecar refusing to start when nftables is forced where nft cannot run,
 * with the setting and the fix in its message. The probe table itself is loaded by the real
 * `nft -c` in test/sidecar/nft-render.test.ts.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AUTO_PREFERS, chooseRuleBackend, NftablesUnsupportedError } from '../../src/dataplane/backend-choice.js';
import { freePort } from '../harness/controlplane.js';

const SETTING = 'DATAPLANE_BACKEND (--backend)';

void describe('rule back end choice', () => {
  const works = (): Promise<undefined> => Promise.resolve(undefined);
  const fails = (): Promise<string> => Promise.resolve('nft is not installed');
  const untouched = (): Promise<string> => Promise.reject(new Error('the probe must not run'));

  void test("forced iptables never probes; forced nftables probes and fails the start with the setting, nft's words and the fix", async () => {
    assert.equal((await chooseRuleBackend('iptables', untouched, SETTING)).kind, 'iptables');
    assert.equal((await chooseRuleBackend('nftables', works, SETTING)).kind, 'nftables');
    await assert.rejects(chooseRuleBackend('nftables', fails, SETTING), (e: unknown) => {
      assert.ok(e instanceof NftablesUnsupportedError);
      assert.match(e.message, /DATAPLANE_BACKEND \(--backend\) is "nftables".*nft is not installed.*Fix: set it to "iptables"/);
      return true;
    });
  });
  void test('auto: nftables where the probe passes, else iptables with why; with iptables preferred, no probe', async () => {
    assert.equal(AUTO_PREFERS, 'nftables');
    assert.deepEqual(await chooseRuleBackend('auto', works, SETTING), { kind: 'nftables', why: 'auto: the nftables probe table loads here' });
    const prefersIptables = await chooseRuleBackend('auto', untouched, SETTING, 'iptables');
    assert.equal(prefersIptables.kind, 'iptables');
    const fallback = await chooseRuleBackend('auto', fails, SETTING);
    assert.deepEqual(fallback, { kind: 'iptables', why: 'auto: nftables cannot be used here (nft is not installed)' });
  });
});

void describe('sidecar start with nftables forced', () => {
  void test('the sidecar with --backend nftables where nft cannot run exits 2 naming the setting and the fix', () => {
    // A PATH holding only node: nft (and everything else) is missing, as in an image without it.
    const bin = mkdtempSync(join(tmpdir(), 'mpx-nonft-'));
    symlinkSync(process.execPath, join(bin, 'node'));
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'cmd/sidecar/main.ts', '--backend', 'nftables'], {
      env: { PATH: bin, POD_NAME: 'client', POD_NAMESPACE: 'demo', HOME: tmpdir() },
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(r.status, 2, r.stderr + r.stdout);
    assert.match(r.stdout + r.stderr, /DATAPLANE_BACKEND \(--backend\) is \\"nftables\\".*nft is not installed.*Fix: set it to \\"iptables\\"/);
  });
});

void describe('sidecar stopped while its nftables probe runs', () => {
  void test('SIGTERM during the probe: the health port stays and answers ready, then the sidecar exits 0', async () => {
    // An `nft` that hangs: the pod is deleted while its sidecar is still choosing a back end.
    const bin = mkdtempSync(join(tmpdir(), 'mpx-slownft-'));
    symlinkSync(process.execPath, join(bin, 'node'));
    writeFileSync(join(bin, 'nft'), '#!/bin/sh\nexec /bin/sleep 30\n');
    chmodSync(join(bin, 'nft'), 0o755);
    const port = await freePort();
    const child = spawn(process.execPath, ['--import', 'tsx', 'cmd/sidecar/main.ts'], {
      env: { PATH: bin, POD_NAME: 'client', POD_NAMESPACE: 'demo', HOME: tmpdir(), HEALTH_PORT: String(port), HEALTH_HOST: '127.0.0.1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    try {
      for (const until = Date.now() + 30_000; !out.includes('health port listening');) {
        if (Date.now() > until) assert.fail(`no health port: ${out}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      await new Promise((r) => setTimeout(r, 300)); // the probe's nft is running
      child.kill('SIGTERM');
      const res = await fetch(`http://127.0.0.1:${port}/readyz`);
      assert.equal(res.status, 200, 'a stopping sidecar answers ready, so the startup probe ends in a success');
      const [code, signal] = await exited;
      assert.deepEqual({ code, signal }, { code: 0, signal: null }, out);
      assert.match(out, /stopping; rules and routes stay in place/);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
