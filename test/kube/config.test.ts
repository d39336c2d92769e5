import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dump } from 'js-yaml';
import { fromKubeconfigFiles, inClusterConnection, loadKubeConnection } from '../../src/kube/config.js';

function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'kubeconfig-test-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function kubeconfig(users: Record<string, unknown>[], extra: Record<string, unknown> = {}): string {
  return dump({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      { name: 'c1', cluster: { server: 'https://127.0.0.1:6443/', 'certificate-authority-data': Buffer.from('CA-ONE').toString('base64') } },
      { name: 'c2', cluster: { server: 'https://[::1]:7443', 'certificate-authority': 'ca2.crt', 'insecure-skip-tls-verify': true } },
    ],
    users,
    contexts: [
      { name: 'one', context: { cluster: 'c1', user: 'u1' } },
      { name: 'two', context: { cluster: 'c2', user: 'u2', namespace: 'team-b' } },
    ],
    'current-context': 'one',
    ...extra,
  });
}

void describe('kubeconfig loading', () => {
  void test('current context: server without trailing slash, CA data decoded, token', (t) => {
    const dir = tempDir(t);
    const file = join(dir, 'config');
    writeFileSync(file, kubeconfig([{ name: 'u1', user: { token: 'tok-1' } }]));
    const conn = loadKubeConnection({ kubeconfig: file, env: {} });
    assert.equal(conn.server, 'https://127.0.0.1:6443');
    assert.equal(conn.ca?.toString(), 'CA-ONE');
    assert.equal(conn.token, 'tok-1');
    assert.equal(conn.insecureSkipTLSVerify, undefined);
    assert.equal(conn.namespace, undefined);
  });

  void test('explicit context; file paths are relative to the kubeconfig; client cert and tokenFile', (t) => {
    const dir = tempDir(t);
    mkdirSync(join(dir, 'sub'));
    writeFileSync(join(dir, 'sub', 'ca2.crt'), 'CA-TWO');
    writeFileSync(join(dir, 'sub', 'client.crt'), 'CERT');
    writeFileSync(join(dir, 'sub', 'client.key'), 'KEY');
    const file = join(dir, 'sub', 'config');
    writeFileSync(
      file,
      kubeconfig([
        { name: 'u1', user: { token: 'x' } },
        { name: 'u2', user: { 'client-certificate': 'client.crt', 'client-key': 'client.key', tokenFile: 'tok' } },
      ]),
    );
    const conn = loadKubeConnection({ kubeconfig: file, context: 'two', env: {} });
    assert.equal(conn.server, 'https://[::1]:7443');
    assert.equal(conn.ca?.toString(), 'CA-TWO');
    assert.equal(conn.cert?.toString(), 'CERT');
    assert.equal(conn.key?.toString(), 'KEY');
    assert.equal(conn.tokenFile, join(dir, 'sub', 'tok'));
    assert.equal(conn.insecureSkipTLSVerify, true);
    assert.equal(conn.namespace, 'team-b', "the context's namespace (diagnose's default)");
  });

  void test('$KUBECONFIG with several files: the first file that names an entry wins', (t) => {
    const dir = tempDir(t);
    const a = join(dir, 'a');
    const b = join(dir, 'b');
    writeFileSync(a, dump({ users: [{ name: 'u1', user: { token: 'from-a' } }], 'current-context': 'one' }));
    writeFileSync(b, kubeconfig([{ name: 'u1', user: { token: 'from-b' } }], { 'current-context': 'two' }));
    const conn = loadKubeConnection({ env: { KUBECONFIG: `${a}:${join(dir, 'missing')}:${b}` } });
    assert.equal(conn.token, 'from-a');
    assert.equal(conn.server, 'https://127.0.0.1:6443');
  });

  void test('explicit path beats $KUBECONFIG, which beats in-cluster', (t) => {
    const dir = tempDir(t);
    const a = join(dir, 'a');
    const b = join(dir, 'b');
    writeFileSync(a, kubeconfig([{ name: 'u1', user: { token: 'A' } }]));
    writeFileSync(b, kubeconfig([{ name: 'u1', user: { token: 'B' } }]));
    const env = { KUBECONFIG: b, KUBERNETES_SERVICE_HOST: '10.0.0.1' };
    assert.equal(loadKubeConnection({ kubeconfig: a, env }).token, 'A');
    assert.equal(loadKubeConnection({ env }).token, 'B');
  });

  void test('clear errors: unknown context, missing user, exec plugin, cert without key, bad YAML, nothing found', (t) => {
    const dir = tempDir(t);
    const file = join(dir, 'config');
    writeFileSync(file, kubeconfig([{ name: 'u1', user: { token: 'x' } }]));
    assert.throws(() => fromKubeconfigFiles([file], 'nope'), /context "nope" not found; known: one, two/);
    assert.throws(() => fromKubeconfigFiles([file], 'two'), /names user "u2", which is not defined/);
    // exec plugins are supported now: a bad one is refused naming the user, key and fix.
    writeFileSync(file, kubeconfig([{ name: 'u1', user: { exec: { command: 'aws' } } }]));
    assert.throws(() => fromKubeconfigFiles([file]), /kubeconfig user "u1": exec\.apiVersion is undefined; use one of client\.authentication\.k8s\.io\/v1, /);
    writeFileSync(file, kubeconfig([{ name: 'u1', user: { 'auth-provider': { name: 'gcp' } } }]));
    assert.throws(() => fromKubeconfigFiles([file]), /uses "auth-provider", which multus-proxy does not support/);
    writeFileSync(file, kubeconfig([{ name: 'u1', user: { 'client-certificate-data': 'Q0VSVA==' } }]));
    assert.throws(() => fromKubeconfigFiles([file]), /client certificate without a key/);
    writeFileSync(file, 'clusters: [unclosed');
    assert.throws(() => fromKubeconfigFiles([file]), /not valid YAML/);
    assert.throws(() => fromKubeconfigFiles([join(dir, 'none')]), /none of .* exists/);
  });
});

void describe('in-cluster config', () => {
  void test('service host and port, token file and CA from the service-account folder; IPv6 host bracketed', (t) => {
    const dir = tempDir(t);
    writeFileSync(join(dir, 'token'), 'sa-token\n');
    writeFileSync(join(dir, 'ca.crt'), 'CLUSTER-CA');
    const v4 = inClusterConnection({ KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' }, dir);
    assert.equal(v4.server, 'https://10.96.0.1:443');
    assert.equal(v4.tokenFile, join(dir, 'token'));
    assert.equal(v4.ca?.toString(), 'CLUSTER-CA');
    assert.equal(v4.namespace, undefined, 'no namespace file');
    writeFileSync(join(dir, 'namespace'), 'multus-proxy-system');
    assert.equal(inClusterConnection({ KUBERNETES_SERVICE_HOST: '10.96.0.1' }, dir).namespace, 'multus-proxy-system');
    const v6 = loadKubeConnection({ env: { KUBERNETES_SERVICE_HOST: 'fd00:10:96::1', KUBERNETES_SERVICE_PORT: '6443' }, serviceAccountDir: dir });
    assert.equal(v6.server, 'https://[fd00:10:96::1]:6443');
  });

  void test('a missing token says how to fix it', (t) => {
    const dir = tempDir(t);
    assert.throws(() => inClusterConnection({ KUBERNETES_SERVICE_HOST: '10.96.0.1' }, dir), /automountServiceAccountToken/);
  });
});
