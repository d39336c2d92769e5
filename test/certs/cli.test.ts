import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULTS, parseCli, parseDuration } from '../../cmd/certs/cli.js';
import { useControlPlane, uniqueName } from '../harness/controlplane.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1Secret } from '../../src/kube/types.js';

const CLI = join(import.meta.dirname, '..', '..', 'cmd', 'certs', 'cli.ts');

function runCli(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', CLI, ...args], { encoding: 'utf8', cwd: join(import.meta.dirname, '..', '..') });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

void describe('certs CLI', () => {
  void test('bootstrap defaults match the install manifests; flags override', () => {
    const r = parseCli(['bootstrap']);
    assert.ok(r.ok);
    assert.deepEqual(r.value, {
      command: 'bootstrap',
      rotation: {
        service: DEFAULTS.service,
        namespace: 'multus-proxy-system',
        ips: [],
        dnsNames: [],
        caValidityDays: undefined,
        leafValidityDays: undefined,
        caRenewBeforeDays: undefined,
        leafRenewBeforeDays: undefined,
      },
      secretNamespace: 'multus-proxy-system',
      servingSecret: 'multus-proxy-webhook-tls',
      caSecret: 'multus-proxy-webhook-ca',
      mutating: ['multus-proxy-webhook'],
      validating: ['multus-proxy-webhook'],
      intervalMs: 0,
    });
    const o = parseCli(['bootstrap', '--mutating=a,b', '--validating', '', '--interval=12h', '--ip=::1', '--validity-days=30']);
    assert.ok(o.ok && o.value.command === 'bootstrap');
    assert.deepEqual([o.value.mutating, o.value.validating, o.value.intervalMs, o.value.rotation.ips, o.value.rotation.leafValidityDays], [['a', 'b'], [], 43_200_000, ['::1'], 30]);
  });

  void test('bad flags: every problem named with the fix', () => {
    const r = parseCli(['bootstrap', '--service=Web_Hook', '--ip=300.1.1.1', '--interval=5s', '--validity-days=-1']);
    assert.equal(r.ok, false);
    const e = (r as { error: string }).error;
    assert.match(e, /--service "Web_Hook": /);
    assert.match(e, /--ip "300\.1\.1\.1": is not an IPv4 or IPv6 address/);
    assert.match(e, /--interval "5s": is not a duration of at least a minute \(or 0\)/);
    assert.match(e, /--validity-days "-1": is not a positive number of days/);
    assert.match((parseCli(['generate']) as { error: string }).error, /--out "": is required for generate/);
    assert.match((parseCli(['rotate']) as { error: string }).error, /--command "rotate": is not a command/);
    assert.match((parseCli(['generate', '--bogus']) as { error: string }).error, /Unknown option '--bogus'/);
    assert.deepEqual([parseDuration('90s'), parseDuration('1d'), parseDuration('x')], [90_000, 86_400_000, undefined]);
  });

  void test('generate writes a verifiable chain, keys private, and a second run changes nothing', () => {
    const dir = mkdtempSync(join(tmpdir(), 'certs-cli-'));
    try {
      const first = runCli(['generate', '--out', dir, '--service=hook', '--namespace=sys', '--ip=127.0.0.1']);
      assert.equal(first.status, 0, first.stderr);
      assert.match(first.stdout, /new CA: no CA stored yet\nnew serving certificate: no serving certificate stored yet/);
      const out = execFileSync('openssl', ['verify', '-purpose', 'sslserver', '-CAfile', join(dir, 'ca.crt'), join(dir, 'tls.crt')], { encoding: 'utf8' });
      assert.match(out, /OK/);
      assert.equal(statSync(join(dir, 'tls.key')).mode & 0o777, 0o600);
      assert.equal(statSync(join(dir, 'ca', 'tls.key')).mode & 0o777, 0o600);
      const cert = readFileSync(join(dir, 'tls.crt'), 'utf8');
      const second = runCli(['generate', '--out', dir, '--service=hook', '--namespace=sys', '--ip=127.0.0.1']);
      assert.equal(second.status, 0, second.stderr);
      assert.match(second.stdout, /are current; nothing changed/);
      assert.equal(readFileSync(join(dir, 'tls.crt'), 'utf8'), cert);
      const bad = runCli(['generate', '--out', dir, '--ip=nope']);
      assert.equal(bad.status, 2);
      assert.match(bad.stderr, /--ip "nope": is not an IPv4 or IPv6 address/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  void test('bootstrap as a process (as the Job runs it): creates the Secrets, a second run rewrites nothing', async () => {
    const cp = await useControlPlane();
    try {
      const ns = uniqueName('certs-cli');
      await cp.createNamespace(ns);
      const args = ['bootstrap', `--kubeconfig=${cp.kubeconfigPath}`, `--namespace=${ns}`, '--mutating=', '--validating='];
      const first = runCli(args);
      assert.equal(first.status, 0, first.stderr);
      const secret = await cp.client.get<V1Secret>(apiPath('', 'v1', 'secrets', ns, 'multus-proxy-webhook-tls'));
      assert.equal(secret.type, 'kubernetes.io/tls');
      assert.deepEqual(Object.keys(secret.data ?? {}).sort(), ['ca.crt', 'tls.crt', 'tls.key']);
      const ca = await cp.client.get<V1Secret>(apiPath('', 'v1', 'secrets', ns, 'multus-proxy-webhook-ca'));
      assert.deepEqual(Object.keys(ca.data ?? {}).sort(), ['previous.crt', 'tls.crt', 'tls.key']);
      const second = runCli(args);
      assert.equal(second.status, 0, second.stderr);
      assert.match(second.stdout, /"reasons":\[\],"caSecretWritten":false,"servingSecretWritten":false/);
      assert.equal((await cp.client.get<V1Secret>(apiPath('', 'v1', 'secrets', ns, 'multus-proxy-webhook-tls'))).metadata?.resourceVersion, secret.metadata?.resourceVersion);
      const unreachable = runCli(['bootstrap', '--kubeconfig=/nonexistent/kubeconfig']);
      assert.equal(unreachable.status, 1);
      assert.match(unreachable.stderr, /^certs: .*nonexistent/m);
    } finally {
      await cp.stop();
    }
  });
});
