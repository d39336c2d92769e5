import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { parseOptions, DEFAULT_MAX_BODY_BYTES, type WebhookOptions } from '../../cmd/webhook/options.js';
import { createClusterLookups, parseServerVersion, supportsNativeSidecars } from '../../cmd/webhook/cluster.js';
import { KubeApiError } from '../../src/kube/client.js';
import { SIDECAR } from './fixtures.js';
import { injectSidecar, sidecarContainer } from '../../cmd/webhook/mutate.js';

const CONFIG = `
port: 9443
sidecar:
  imagePullPolicy: Always
  mode: regular
  healthPort: 9999
  resources:
    requests: {cpu: 20m, memory: 64Mi}
`;

function files(map: Record<string, string>): (p: string) => string | undefined {
  return (p) => map[p];
}

function parse(env: Record<string, string>, argv: string[], fs: Record<string, string> = {}): WebhookOptions {
  const r = parseOptions(env, argv, files(fs));
  if (!r.ok) assert.fail(r.error);
  return r.value;
}

function parseError(env: Record<string, string>, argv: string[], fs: Record<string, string> = {}): string {
  const r = parseOptions(env, argv, files(fs));
  assert.equal(r.ok, false, 'expected an error');
  return (r as { error: string }).error;
}

void describe('webhook/options', () => {
  void test('defaults with only an image', () => {
    const o = parse({ SIDECAR_IMAGE: 'img:1' }, []);
    assert.equal(o.port, 8443);
    assert.equal(o.maxBodyBytes, DEFAULT_MAX_BODY_BYTES);
    assert.equal(o.tlsCertFile, '/etc/multus-proxy/tls/tls.crt');
    // The test fixture is the default configuration except for the image and the mode.
    assert.deepEqual({ ...o.sidecar }, { ...SIDECAR, image: 'img:1', mode: 'auto' });
  });

  void test('nodeAgentNamespace: multus-proxy-node unless told (Helm sets nodeAgent.namespace); the file, env or flag', () => {
    assert.equal(parse({ SIDECAR_IMAGE: 'img:1' }, []).nodeAgentNamespace, 'multus-proxy-node');
    assert.equal(parse({ SIDECAR_IMAGE: 'img:1', WEBHOOK_CONFIG: '/c.yaml' }, [], { '/c.yaml': 'nodeAgentNamespace: agents\n' }).nodeAgentNamespace, 'agents');
    assert.equal(parse({ SIDECAR_IMAGE: 'img:1', NODE_AGENT_NAMESPACE: 'env-ns' }, ['--node-agent-namespace=flag-ns']).nodeAgentNamespace, 'flag-ns');
  });
  void test("podSecurityDefault: privileged unless told (Kubernetes' own default); the file, env or flag; a bad level is named with the fix", () => {
    assert.equal(parse({ SIDECAR_IMAGE: 'img:1' }, []).podSecurityDefault, 'privileged');
    assert.equal(parse({ SIDECAR_IMAGE: 'img:1', WEBHOOK_CONFIG: '/c.yaml' }, [], { '/c.yaml': 'podSecurityDefault: baseline\n' }).podSecurityDefault, 'baseline');
    assert.equal(parse({ SIDECAR_IMAGE: 'img:1', POD_SECURITY_DEFAULT: 'restricted' }, []).podSecurityDefault, 'restricted');
    assert.match(parseError({ SIDECAR_IMAGE: 'img:1' }, ['--pod-security-default', 'Baseline']), /--pod-security-default.*"Baseline".*write one of privileged, baseline, restricted/);
  });

  void test("the sidecar's rule back end from the ConfigMap (sidecar.backend): injected as DATAPLANE_BACKEND unless auto; a bad one names the fix", () => {
    const o = parse({ SIDECAR_IMAGE: 'img:1', WEBHOOK_CONFIG: '/c.yaml' }, [], { '/c.yaml': 'sidecar:\n  backend: nftables\n' });
    assert.equal(o.sidecar.backend, 'nftables');
    assert.deepEqual(
      sidecarContainer(o.sidecar, 'tok', true).env?.filter((e) => e.name === 'DATAPLANE_BACKEND'),
      [{ name: 'DATAPLANE_BACKEND', value: 'nftables' }],
    );
    const auto = parse({ SIDECAR_IMAGE: 'img:1' }, []);
    assert.equal(auto.sidecar.backend, 'auto');
    assert.equal(
      sidecarContainer(auto.sidecar, 'tok', true).env?.some((e) => e.name === 'DATAPLANE_BACKEND'),
      false,
    );
    assert.match(parseError({ SIDECAR_IMAGE: 'img:1', SIDECAR_BACKEND: 'nft' }, []), /SIDECAR_BACKEND.*"nft".*auto, iptables, nftables/);
  });

  void test('file < env < flag; the image from the ConfigMap key file next to the config', () => {
    const fs = { '/cfg/config.yaml': CONFIG, '/cfg/sidecarImage': 'registry/multus-proxy:2\n' };
    const fromFile = parse({}, ['--config=/cfg/config.yaml'], fs);
    assert.equal(fromFile.port, 9443);
    assert.equal(fromFile.sidecar.image, 'registry/multus-proxy:2');
    assert.equal(fromFile.sidecar.mode, 'regular');
    assert.equal(fromFile.sidecar.healthPort, 9999);
    assert.deepEqual(fromFile.sidecar.resources, { requests: { cpu: '20m', memory: '64Mi' } });
    const env = parse({ WEBHOOK_PORT: '7443', SIDECAR_MODE: 'native', SIDECAR_PRIVILEGED: 'true' }, ['--config', '/cfg/config.yaml'], fs);
    assert.deepEqual([env.port, env.sidecar.mode, env.sidecar.privileged], [7443, 'native', true]);
    const flag = parse({ WEBHOOK_PORT: '7443' }, ['--config=/cfg/config.yaml', '--port=6443', '--sidecar-image=x:y', '--tls-cert-file=/c', '--tls-key-file=/k'], fs);
    assert.deepEqual([flag.port, flag.sidecar.image, flag.tlsCertFile, flag.tlsKeyFile], [6443, 'x:y', '/c', '/k']);
  });

  void test('the deploy ConfigMap parses (same keys as deploy/base/webhook-config.yaml)', () => {
    const yaml =
      'sidecar:\n  imagePullPolicy: IfNotPresent\n  mode: auto\n  privileged: false\n  healthPort: 9180\n  logLevel: info\n  resources:\n    requests:\n      cpu: 10m\n      memory: 48Mi\n    limits:\n      memory: 128Mi\nlogLevel: info\n';
    const o = parse({}, ['--config=/etc/w/config.yaml'], { '/etc/w/config.yaml': yaml, '/etc/w/sidecarImage': 'multus-proxy' });
    assert.equal(o.sidecar.image, 'multus-proxy');
  });

  void test('every bad value is named with its source and the fix; all problems at once', () => {
    const e = parseError({ WEBHOOK_PORT: '70000', SIDECAR_MODE: 'sometimes' }, ['--config=/c.yaml'], {
      '/c.yaml': 'sidecar:\n  image: i\n  privileged: yes-please\n  resources: {requests: {cpu: lots}}\nprot: 1\n',
    });
    assert.match(e, /WEBHOOK_PORT "70000": is not a whole number in range; write an integer from 1 to 65535/);
    assert.match(e, /SIDECAR_MODE "sometimes": is not one of the known values; write one of native, regular, auto/);
    assert.match(e, /sidecar\.privileged in \/c\.yaml "yes-please": is not a boolean; write true or false/);
    assert.match(e, /requests\.cpu "lots" is not a quantity/);
    assert.match(e, /prot in \/c\.yaml "prot": is not a known setting/);
  });

  void test('missing image, missing config file, unknown flag, broken YAML', () => {
    assert.match(parseError({}, []), /sidecar\.image "": is not set; set sidecar\.image in the config file, the sidecarImage key of the ConfigMap, SIDECAR_IMAGE or --sidecar-image/);
    assert.match(parseError({}, ['--config=/nope.yaml']), /--config \(WEBHOOK_CONFIG\) "\/nope\.yaml": does not exist/);
    assert.match(parseError({}, ['--prot=1']), /Unknown option '--prot'.*known flags: --config, --port/);
    assert.match(parseError({}, ['--config=/c'], { '/c': 'a: [' }), /is not valid YAML or JSON/);
    assert.match(parseError({}, ['--config=/c'], { '/c': '- 1' }), /is not a YAML\/JSON mapping/);
  });
});

void describe('webhook/cluster', () => {
  void test('server versions: plain, with a provider +, from gitVersion; native sidecars from 1.29', () => {
    assert.deepEqual(parseServerVersion({ major: '1', minor: '29+' }), { major: 1, minor: 29 });
    assert.deepEqual(parseServerVersion({ gitVersion: 'v1.28.3-gke.1' }), { major: 1, minor: 28 });
    assert.equal(parseServerVersion({}), undefined);
    assert.equal(supportsNativeSidecars({ major: 1, minor: 28 }), false);
    assert.equal(supportsNativeSidecars({ major: 1, minor: 29 }), true);
    assert.equal(supportsNativeSidecars({ major: 2, minor: 0 }), true);
  });

  void test('namespace lookups are cached, shared while in flight, refreshed on demand; 404 is undefined; errors are not cached', async () => {
    const gets: string[] = [];
    let t = 0;
    let fail = false;
    const client = {
      get: async <T>(path: string): Promise<T> => {
        gets.push(path);
        if (fail) throw new Error('apiserver down');
        if (path.endsWith('/gone')) throw new KubeApiError(404, 'not found', 'NotFound');
        return { metadata: { labels: { a: path } } } as T;
      },
    };
    const c = createClusterLookups(client, { namespaceCacheMs: 1000, nadTimeoutMs: 100, now: () => t });
    const [x, y] = await Promise.all([c.namespaceLabels('ns'), c.namespaceLabels('ns')]);
    assert.deepEqual(x, { a: '/api/v1/namespaces/ns' });
    assert.equal(x, y);
    assert.equal(gets.length, 1);
    await c.namespaceLabels('ns', true);
    assert.equal(gets.length, 2);
    t = 2000;
    await c.namespaceLabels('ns');
    assert.equal(gets.length, 3);
    assert.equal(await c.namespaceLabels('gone'), undefined);
    fail = true;
    await assert.rejects(c.namespaceLabels('other'), /apiserver down/);
    fail = false;
    assert.deepEqual(await c.namespaceLabels('other'), { a: '/api/v1/namespaces/other' });
  });

  void test('version lookup failure falls back to regular containers; NAD states', async () => {
    let versionCalls = 0;
    const client = {
      get: async <T>(path: string): Promise<T> => {
        if (path === '/version') {
          versionCalls += 1;
          throw new Error('boom');
        }
        if (path.includes('/missing')) throw new KubeApiError(404, 'nf', 'NotFound');
        if (path.includes('/slow')) return new Promise<T>(() => undefined);
        if (path.includes('/forbidden')) throw new KubeApiError(403, 'no', 'Forbidden');
        return {} as T;
      },
    };
    const c = createClusterLookups(client, { namespaceCacheMs: 0, nadTimeoutMs: 50 });
    assert.deepEqual(await Promise.all([c.nativeSidecarsSupported(), c.nativeSidecarsSupported()]), [false, false]);
    assert.equal(await c.nativeSidecarsSupported(), false);
    assert.equal(versionCalls, 1, 'concurrent callers share one lookup; a failure is remembered for a while');
    assert.equal((await c.nadExists({ namespace: 'a', name: 'here' })).state, 'exists');
    assert.equal((await c.nadExists({ namespace: 'a', name: 'missing' })).state, 'missing');
    assert.equal((await c.nadExists({ namespace: 'a', name: 'forbidden' })).state, 'unknown');
    // 'slow' never answers: 'unknown' can only come from the lookup's own timeout.
    assert.equal((await c.nadExists({ namespace: 'a', name: 'slow' })).state, 'unknown');
  });
});

void describe('externalIPs.allowedCIDRs', () => {
  const IMAGE = { SIDECAR_IMAGE: 'img' };
  void test('unset: not configured (external IPs warned about, not served)', () => {
    assert.deepEqual(parse(IMAGE, []).externalIPs, { configured: false });
  });
  void test('from the config file, the variable (comma list) or the flag; an empty list denies all', () => {
    const fromFile = parse(IMAGE, ['--config', '/c.yaml'], { '/c.yaml': 'externalIPs:\n  allowedCIDRs: [192.0.2.0/24]\n' }).externalIPs;
    assert.ok(fromFile.configured);
    assert.deepEqual(
      fromFile.allowed.map((r) => r.cidr),
      ['192.0.2.0/24'],
    );
    const fromEnv = parse({ ...IMAGE, EXTERNAL_IPS_ALLOWED_CIDRS: '192.0.2.0/24, 2001:db8::/64' }, []).externalIPs;
    assert.ok(fromEnv.configured);
    assert.deepEqual(
      fromEnv.allowed.map((r) => r.cidr),
      ['192.0.2.0/24', '2001:db8::/64'],
    );
    const none = parse(IMAGE, ['--config', '/c.yaml'], { '/c.yaml': 'externalIPs:\n  allowedCIDRs: []\n' }).externalIPs;
    assert.deepEqual(none, { configured: true, allowed: [] });
  });
  void test('the injected sidecar gets the list (EXTERNAL_IPS_ALLOWED_CIDRS) only when one is configured', () => {
    const envOf = (o: WebhookOptions): string | undefined => sidecarContainer(o.sidecar, 'tok', true).env?.find((e) => e.name === 'EXTERNAL_IPS_ALLOWED_CIDRS')?.value;
    assert.equal(envOf(parse(IMAGE, [])), undefined);
    assert.equal(envOf(parse({ ...IMAGE, EXTERNAL_IPS_ALLOWED_CIDRS: '192.0.2.7/24' }, [])), '192.0.2.0/24');
    assert.equal(envOf(parse(IMAGE, ['--external-ips-allowed-cidrs', ''])), '');
  });
  void test('a bad CIDR or an unknown key under externalIPs is refused with the fix', () => {
    assert.match(parseError({ ...IMAGE, EXTERNAL_IPS_ALLOWED_CIDRS: '192.0.2.1' }, []), /externalIPs\.allowedCIDRs\[0\].*192\.0\.2\.1.*write a CIDR/);
    assert.match(parseError(IMAGE, ['--config', '/c.yaml'], { '/c.yaml': 'externalIPs:\n  allowed: [192.0.2.0/24]\n' }), /externalIPs\.allowed .*is not a known setting/);
  });
  void test("the source guard: the admin's mode and exempt namespaces (file, env or flag) become SOURCE_GUARD=off in exactly the pods they cover", () => {
    const guardOf = (o: WebhookOptions, namespace: string): string | undefined =>
      injectSidecar({ metadata: { namespace }, spec: { containers: [{ name: 'app' }] } }, o.sidecar, true).spec?.initContainers?.[0]?.env?.find((e) => e.name === 'SOURCE_GUARD')?.value;
    const def = parse(IMAGE, []);
    assert.deepEqual(def.sidecar.sourceGuard, { mode: 'enforce', exemptNamespaces: [] });
    assert.equal(guardOf(def, 'apps'), undefined, 'enforce is the sidecar default: no variable');
    const exempt = parse(IMAGE, ['--config', '/c.yaml'], { '/c.yaml': 'sourceGuard:\n  exemptNamespaces: [vip, lb]\n' });
    assert.deepEqual(exempt.sidecar.sourceGuard, { mode: 'enforce', exemptNamespaces: ['lb', 'vip'] });
    assert.equal(guardOf(exempt, 'vip'), 'off');
    assert.equal(guardOf(exempt, 'apps'), undefined);
    assert.deepEqual(parse({ ...IMAGE, SOURCE_GUARD_EXEMPT_NAMESPACES: 'a, b' }, []).sidecar.sourceGuard?.exemptNamespaces, ['a', 'b']);
    const off = parse({ ...IMAGE, SOURCE_GUARD: 'enforce' }, ['--source-guard=off']);
    assert.equal(guardOf(off, 'apps'), 'off', 'the flag wins; off covers every namespace');
  });
  void test('a bad source guard mode, exempt namespace or key is refused with the fix', () => {
    assert.match(parseError({ ...IMAGE, SOURCE_GUARD: 'disabled' }, []), /SOURCE_GUARD "disabled": is not one of the known values; write one of enforce, off/);
    assert.match(parseError({ ...IMAGE, SOURCE_GUARD_EXEMPT_NAMESPACES: 'ok,Bad_NS' }, []), /sourceGuard\.exemptNamespaces "Bad_NS": is not a namespace name; write namespace names/);
    assert.match(parseError(IMAGE, ['--config', '/c.yaml'], { '/c.yaml': 'sourceGuard:\n  exempt: [a]\n' }), /sourceGuard\.exempt .*is not a known setting/);
  });
});
