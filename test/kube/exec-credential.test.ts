/**
 * kubeconfig exec credential plugins. Unit: the ExecCredential parser (property test), the
 * interactive-mode rule, the kubeconfig checks. Real apiserver: a small plugin script hands out a
 * ServiceAccount token obtained by TokenRequest; the apiserver must see that identity
 * (SelfSubjectReview), the token is cached until its expirationTimestamp, fetched again after it
 * or after a 401, and a failing plugin's error names the kubeconfig user and carries its stderr.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dump } from 'js-yaml';
import fc from 'fast-check';
import { createKubeClient } from '../../src/kube/client.js';
import { execConfig, loadKubeConnection } from '../../src/kube/config.js';
import { execInfo, interactiveFor, parseExecCredential } from '../../src/kube/exec-credential.js';
import { apiPath } from '../../src/kube/paths.js';
import { useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';

const V1 = 'client.authentication.k8s.io/v1';
const V1BETA1 = 'client.authentication.k8s.io/v1beta1';
const CFG = { user: 'laptop', command: 'plugin', apiVersion: V1 } as const;

void describe('exec credential: parsing and checks', () => {
  void test('a valid ExecCredential gives its token and expiry', () => {
    const out = JSON.stringify({ apiVersion: V1, kind: 'ExecCredential', status: { token: 't0', expirationTimestamp: '2030-01-02T03:04:05Z' } });
    assert.deepEqual(parseExecCredential(out, CFG), { token: 't0', expiresAt: Date.parse('2030-01-02T03:04:05Z') });
    assert.deepEqual(parseExecCredential(JSON.stringify({ apiVersion: V1, kind: 'ExecCredential', status: { token: 't1' } }), CFG), { token: 't1' });
  });

  void test('bad output: clear errors naming the user and the plugin', () => {
    const bad: [unknown, RegExp][] = [
      ['not json', /printed no ExecCredential JSON/],
      [{ apiVersion: V1, kind: 'Other', status: { token: 't' } }, /kind is "Other"/],
      [{ apiVersion: V1BETA1, kind: 'ExecCredential', status: { token: 't' } }, /answered apiVersion ".*v1beta1", but the kubeconfig asks for ".*v1"; make them match/],
      [{ apiVersion: V1, kind: 'ExecCredential', status: {} }, /status\.token is missing/],
      [{ apiVersion: V1, kind: 'ExecCredential', status: { clientCertificateData: 'x' } }, /client certificates from exec plugins are not supported/],
      [{ apiVersion: V1, kind: 'ExecCredential', status: { token: 't', expirationTimestamp: 'soon' } }, /expirationTimestamp "soon" is not an RFC 3339 time/],
    ];
    for (const [out, re] of bad) {
      assert.throws(
        () => parseExecCredential(typeof out === 'string' ? out : JSON.stringify(out), CFG),
        (e: Error) => re.test(e.message) && e.message.includes('kubeconfig user "laptop": exec plugin "plugin"'),
      );
    }
  });

  void test('any plugin output either parses or throws an Error naming the user (property)', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.json(),
          fc.record({ apiVersion: fc.constantFrom(V1, V1BETA1, 'x'), kind: fc.constantFrom('ExecCredential', 'y'), status: fc.anything() }).map((o) => JSON.stringify(o)),
        ),
        (out) => {
          try {
            const r = parseExecCredential(out, CFG);
            return typeof r.token === 'string' && r.token !== '';
          } catch (e) {
            return e instanceof Error && e.message.startsWith('kubeconfig user "laptop"');
          }
        },
      ),
    );
  });

  void test('interactive mode: Never never, IfAvailable with a terminal, Always requires one; KUBERNETES_EXEC_INFO says which', () => {
    assert.equal(interactiveFor('Never', true, 'u'), false);
    assert.equal(interactiveFor('IfAvailable', true, 'u'), true);
    assert.equal(interactiveFor('IfAvailable', false, 'u'), false);
    assert.equal(interactiveFor('Always', true, 'u'), true);
    assert.throws(() => interactiveFor('Always', false, 'u'), /user "u": the exec plugin needs a terminal/);
    assert.deepEqual(JSON.parse(execInfo(V1, false)), { apiVersion: V1, kind: 'ExecCredential', spec: { interactive: false } });
  });

  void test('kubeconfig exec section: defaults and errors naming the user, key, value and fix', () => {
    const ok = execConfig({ command: 'aws', args: ['eks', 'get-token'], env: [{ name: 'A', value: '1' }], apiVersion: V1BETA1 }, 'eks', '/d');
    assert.deepEqual(ok, { user: 'eks', command: 'aws', args: ['eks', 'get-token'], env: [{ name: 'A', value: '1' }], apiVersion: V1BETA1, interactiveMode: 'IfAvailable', dir: '/d' });
    assert.throws(() => execConfig({ command: 'x', apiVersion: V1 }, 'gke', '/d'), /user "gke": exec\.interactiveMode is undefined; use Never, IfAvailable or Always/);
    assert.throws(() => execConfig({ apiVersion: V1 }, 'gke', '/d'), /user "gke": exec\.command is missing/);
    assert.throws(() => execConfig({ command: 'x', apiVersion: 'v2' }, 'gke', '/d'), /exec\.apiVersion is "v2"; use one of/);
    assert.throws(() => execConfig({ command: 'x', apiVersion: V1, interactiveMode: 'Never', args: [1] }, 'gke', '/d'), /exec\.args must be a list of strings, got \[1\]/);
    assert.throws(() => execConfig({ command: 'x', apiVersion: V1, interactiveMode: 'Never', env: [{ name: 'A' }] }, 'gke', '/d'), /exec\.env\[0\] is \{"name":"A"\}/);
  });
});

void describe('exec credential plugin against the real apiserver', () => {
  let cp: ControlPlane;
  let ns: string;
  let dir: string;
  let token: string;

  before(async () => {
    cp = await useControlPlane();
    ns = uniqueName('exec');
    await cp.createNamespace(ns);
    token = await cp.tokenFor(ns, 'laptop', { expirationSeconds: 3600 });
    dir = mkdtempSync(join(tmpdir(), 'mp-exec-'));
    // The plugin: prints an ExecCredential with the token and expiry from files, counts its runs,
    // records KUBERNETES_EXEC_INFO, and fails with a message on stderr when FAIL_FILE exists.
    writeFileSync(
      join(dir, 'plugin.sh'),
      [
        '#!/bin/sh',
        'echo run >> "$DIR/runs"',
        'printf "%s" "$KUBERNETES_EXEC_INFO" > "$DIR/info"',
        'if [ -e "$DIR/fail" ]; then echo "error: your SSO session expired; run: cloud login" >&2; exit 3; fi',
        'printf \'{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"%s","expirationTimestamp":"%s"}}\' "$API" "$(cat "$DIR/token")" "$(cat "$DIR/expiry")"',
      ].join('\n'),
    );
    chmodSync(join(dir, 'plugin.sh'), 0o755);
  });

  after(async () => {
    rmSync(dir, { recursive: true, force: true });
    await cp?.client.delete(apiPath('', 'v1', 'namespaces', undefined, ns));
    await cp?.stop();
  });

  const kubeconfig = (apiVersion: string, extra: Record<string, unknown> = {}): string => {
    const file = join(dir, `config-${apiVersion.split('/')[1] ?? ''}`);
    writeFileSync(
      file,
      dump({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'c', cluster: { server: cp.server, 'certificate-authority-data': Buffer.from(cp.caPem).toString('base64') } }],
        users: [
          {
            name: 'laptop-user',
            user: {
              exec: {
                apiVersion,
                command: './plugin.sh',
                env: [
                  { name: 'DIR', value: dir },
                  { name: 'API', value: apiVersion },
                ],
                ...extra,
              },
            },
          },
        ],
        contexts: [{ name: 'c', context: { cluster: 'c', user: 'laptop-user' } }],
        'current-context': 'c',
      }),
    );
    return file;
  };
  const runs = (): number =>
    readFileSync(join(dir, 'runs'), 'utf8')
      .split('\n')
      .filter((l) => l === 'run').length;
  const whoAmI = async (client: ReturnType<typeof createKubeClient>): Promise<string | undefined> =>
    (
      (await client.create<Record<string, unknown>>('/apis/authentication.k8s.io/v1/selfsubjectreviews', { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' })) as {
        status?: { userInfo?: { username?: string } };
      }
    ).status?.userInfo?.username;
  const setup = (tok: string, expiry: Date): void => {
    writeFileSync(join(dir, 'token'), tok);
    writeFileSync(join(dir, 'expiry'), expiry.toISOString());
    writeFileSync(join(dir, 'runs'), '');
    rmSync(join(dir, 'fail'), { force: true });
  };

  void test("v1: the apiserver sees the plugin's identity; the token is cached until it expires", async () => {
    setup(token, new Date(Date.now() + 3600_000));
    const client = createKubeClient(loadKubeConnection({ kubeconfig: kubeconfig(V1, { interactiveMode: 'Never' }) }));
    assert.equal(await whoAmI(client), `system:serviceaccount:${ns}:laptop`);
    assert.equal(await whoAmI(client), `system:serviceaccount:${ns}:laptop`);
    assert.equal(runs(), 1, 'cached: one run for two requests');
    assert.deepEqual(JSON.parse(readFileSync(join(dir, 'info'), 'utf8')), { apiVersion: V1, kind: 'ExecCredential', spec: { interactive: false } });
  });

  void test('v1beta1: an expired credential is fetched again before the next request', async () => {
    setup(token, new Date(Date.now() - 1000));
    const client = createKubeClient(loadKubeConnection({ kubeconfig: kubeconfig(V1BETA1) }));
    assert.equal(await whoAmI(client), `system:serviceaccount:${ns}:laptop`);
    assert.equal(await whoAmI(client), `system:serviceaccount:${ns}:laptop`);
    assert.equal(runs(), 2);
  });

  void test('a 401 runs the plugin again and retries once', async () => {
    setup('not-a-valid-token', new Date(Date.now() + 3600_000));
    const client = createKubeClient(loadKubeConnection({ kubeconfig: kubeconfig(V1, { interactiveMode: 'IfAvailable' }) }));
    await assert.rejects(whoAmI(client), (e: { status?: number }) => e.status === 401);
    assert.equal(runs(), 2, 'the 401 made the client run the plugin again (still a bad token: the retry fails too)');
    writeFileSync(join(dir, 'token'), token); // the user logged in again
    assert.equal(await whoAmI(client), `system:serviceaccount:${ns}:laptop`);
    assert.equal(runs(), 3);
  });

  void test('a failing plugin: the error names the kubeconfig user and carries its stderr', async () => {
    setup(token, new Date(Date.now() + 3600_000));
    writeFileSync(join(dir, 'fail'), '');
    const client = createKubeClient(loadKubeConnection({ kubeconfig: kubeconfig(V1, { interactiveMode: 'Never' }) }));
    await assert.rejects(whoAmI(client), /kubeconfig user "laptop-user": exec plugin "\.\/plugin\.sh" failed \(exit 3\): error: your SSO session expired; run: cloud login/);
    const missing = createKubeClient(loadKubeConnection({ kubeconfig: kubeconfig(V1, { interactiveMode: 'Never', command: 'no-such-plugin-xyz', installHint: 'Install it with: brew install xyz' }) }));
    await assert.rejects(whoAmI(missing), /kubeconfig user "laptop-user": exec plugin "no-such-plugin-xyz": not found\. Install it with: brew install xyz/);
  });
});
