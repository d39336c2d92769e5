import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseOptions } from '../../cmd/sidecar/options.js';
import { DEFAULT_HEALTH_PORT } from '../../src/sidecar-contract.js';

const POD = { POD_NAME: 'client-7f9', POD_NAMESPACE: 'app' };

void test('defaults: pod from the downward API variables, documented intervals', () => {
  const r = parseOptions(POD, []);
  assert.ok(r.ok, r.ok ? '' : r.error);
  assert.deepEqual(r.value, {
    podName: 'client-7f9',
    podNamespace: 'app',
    kubeconfig: undefined,
    healthPort: DEFAULT_HEALTH_PORT,
    healthHost: '::',
    minSyncIntervalMs: 100,
    driftCheckIntervalMs: 60_000,
    retryMinMs: 1_000,
    retryMaxMs: 30_000,
    stuckAfterMs: 120_000,
    iptablesBackend: 'auto',
    backend: 'auto',
    annotationsFile: undefined,
    maxServicesPerNetwork: 2000,
    policyHoldMs: 15_000,
    policyApiRetryMs: 30_000,
    elementWriter: '/usr/local/bin/nfnl-batch',
    nodeName: '',
    nodeZone: '',
    externalIPs: { configured: false },
    sourceGuard: 'enforce',
    cleanup: false,
  });
});

void test("the source guard: SOURCE_GUARD (what the webhook sets from the admin's sourceGuard settings) or --source-guard; absent is enforce; a bad one is refused with the fix", () => {
  const off = parseOptions({ ...POD, SOURCE_GUARD: 'off' }, []);
  assert.ok(off.ok && off.value.sourceGuard === 'off');
  const flag = parseOptions({ ...POD, SOURCE_GUARD: 'off' }, ['--source-guard', 'enforce']);
  assert.ok(flag.ok && flag.value.sourceGuard === 'enforce');
  const empty = parseOptions({ ...POD, SOURCE_GUARD: '' }, []);
  assert.ok(empty.ok && empty.value.sourceGuard === 'enforce', 'an empty value is no value: the guard stays');
  for (const v of ['Off', 'disabled', 'false']) {
    const bad = parseOptions({ ...POD, SOURCE_GUARD: v }, []);
    assert.equal(bad.ok, false, v);
    if (!bad.ok) assert.match(bad.error, new RegExp(`SOURCE_GUARD \\(--source-guard\\) "${v}": is not a source guard mode; write one of enforce, off; .*sourceGuard\\.mode`));
  }
});

void test('external IPs: EXTERNAL_IPS_ALLOWED_CIDRS (what the webhook sets from externalIPs.allowedCIDRs) is the policy the sidecar re-checks', () => {
  const r = parseOptions({ ...POD, EXTERNAL_IPS_ALLOWED_CIDRS: '192.0.2.0/24,2001:db8::/64' }, []);
  assert.ok(r.ok, r.ok ? '' : r.error);
  assert.ok(r.value.externalIPs.configured);
  assert.deepEqual(
    r.value.externalIPs.allowed.map((c) => c.cidr),
    ['192.0.2.0/24', '2001:db8::/64'],
  );
  const bad = parseOptions({ ...POD, EXTERNAL_IPS_ALLOWED_CIDRS: '192.0.2.1' }, []);
  assert.ok(!bad.ok);
  assert.match(bad.error, /EXTERNAL_IPS_ALLOWED_CIDRS \(--external-ips-allowed-cidrs\)\[0\].*192\.0\.2\.1.*write a CIDR/);
});

void test('node and zone: NODE_NAME and NODE_ZONE (what the webhook sets), empty when unknown; bad ones name the fix', () => {
  const r = parseOptions({ ...POD, NODE_NAME: 'worker-1.example', NODE_ZONE: 'eu-west-1a' }, []);
  assert.ok(r.ok, r.ok ? '' : r.error);
  assert.equal(r.value.nodeName, 'worker-1.example');
  assert.equal(r.value.nodeZone, 'eu-west-1a');
  const empty = parseOptions({ ...POD, NODE_NAME: '', NODE_ZONE: '' }, []);
  assert.ok(empty.ok);
  assert.deepEqual([empty.value.nodeName, empty.value.nodeZone], ['', '']);
  const bad = parseOptions({ ...POD, NODE_NAME: 'Worker_1', NODE_ZONE: 'zone a' }, []);
  assert.ok(!bad.ok);
  assert.match(bad.error, /NODE_NAME \(--node-name\).*Worker_1.*spec\.nodeName/);
  assert.match(bad.error, /NODE_ZONE \(--node-zone\).*zone a.*topology\.kubernetes\.io\/zone/);
});

void test('the annotations file comes from POD_ANNOTATIONS_FILE (what the webhook sets) or the flag', () => {
  const env = parseOptions({ ...POD, POD_ANNOTATIONS_FILE: '/etc/multus-proxy/podinfo/annotations' }, []);
  assert.ok(env.ok && env.value.annotationsFile === '/etc/multus-proxy/podinfo/annotations');
  const flag = parseOptions(POD, ['--pod-annotations-file', '/tmp/a']);
  assert.ok(flag.ok && flag.value.annotationsFile === '/tmp/a');
});

void test('the element writer: ELEMENT_WRITER or the flag names nfnl-batch by absolute path, or off; anything else is refused', () => {
  const env = parseOptions({ ...POD, ELEMENT_WRITER: '/root/.cache/multus-proxy/bin/nfnl-batch' }, []);
  assert.ok(env.ok && env.value.elementWriter === '/root/.cache/multus-proxy/bin/nfnl-batch');
  const off = parseOptions(POD, ['--element-writer', 'off']);
  assert.ok(off.ok && off.value.elementWriter === false);
  const bad = parseOptions({ ...POD, ELEMENT_WRITER: 'nfnl-batch' }, []);
  assert.equal(bad.ok, false);
  if (!bad.ok) assert.match(bad.error, /^sidecar options: ELEMENT_WRITER \(--element-writer\) "nfnl-batch": is neither an absolute path nor off; write the absolute path of nfnl-batch .*, or off$/);
});

void test('--cleanup needs no pod name (it only removes our rules and routes)', () => {
  const r = parseOptions({}, ['--cleanup']);
  assert.ok(r.ok, r.ok ? '' : r.error);
  assert.equal(r.value.cleanup, true);
  const bad = parseOptions({}, ['--cleanup=yes']);
  assert.equal(bad.ok, false);
});

void test('flags win over variables; spaces around values are ignored', () => {
  const r = parseOptions({ ...POD, HEALTH_PORT: '9000', KUBECONFIG: '/env/kc', IPTABLES_BACKEND: 'nft' }, [
    '--health-port',
    '9100',
    '--kubeconfig=/flag/kc',
    '--min-sync-interval-ms',
    ' 20 ',
    '--iptables-backend',
    'legacy',
  ]);
  assert.ok(r.ok, r.ok ? '' : r.error);
  assert.equal(r.value.healthPort, 9100);
  assert.equal(r.value.kubeconfig, '/flag/kc');
  assert.equal(r.value.minSyncIntervalMs, 20);
  assert.equal(r.value.iptablesBackend, 'legacy');
});

void test('every bad value is reported at once, naming variable, flag, value and the fix', () => {
  const r = parseOptions({ POD_NAMESPACE: 'app', HEALTH_PORT: '70000', DRIFT_CHECK_INTERVAL_MS: '60s', IPTABLES_BACKEND: 'iptables' }, []);
  assert.equal(r.ok, false);
  if (r.ok) return;
  const lines = r.error.split('\n');
  assert.equal(lines.length, 4, r.error);
  assert.match(lines[0]!, /^sidecar options: POD_NAME \(--pod-name\) "": is not set; set it from the downward API \(fieldRef metadata\.name\)$/);
  assert.match(r.error, /HEALTH_PORT \(--health-port\) "70000": is not a whole number in range; write an integer from 0 to 65535/);
  assert.match(r.error, /DRIFT_CHECK_INTERVAL_MS \(--drift-check-interval-ms\) "60s": .*from 1000 to/);
  assert.match(r.error, /IPTABLES_BACKEND \(--iptables-backend\) "iptables": is not a known back end; write one of auto, nft, legacy/);
});

void test('a retry maximum below the minimum is refused', () => {
  const r = parseOptions({ ...POD, SYNC_RETRY_MIN_MS: '5000', SYNC_RETRY_MAX_MS: '1000' }, []);
  assert.equal(r.ok, false);
  if (!r.ok) assert.match(r.error, /SYNC_RETRY_MAX_MS .*"1000": is below SYNC_RETRY_MIN_MS .*\(5000\); make the maximum at least the minimum/);
});

void test('an unknown flag is refused with the list of known ones', () => {
  const r = parseOptions(POD, ['--helth-port', '1']);
  assert.equal(r.ok, false);
  if (!r.ok) {
    assert.match(r.error, /--helth-port/);
    assert.match(r.error, /--health-port/);
  }
});

void test('the rule back end: DATAPLANE_BACKEND or --backend, auto by default; a bad one names the fix', () => {
  const def = parseOptions({ ...POD }, []);
  assert.ok(def.ok && def.value.backend === 'auto');
  const env = parseOptions({ ...POD, DATAPLANE_BACKEND: 'nftables' }, []);
  assert.ok(env.ok && env.value.backend === 'nftables');
  const flag = parseOptions({ ...POD, DATAPLANE_BACKEND: 'nftables' }, ['--backend', 'iptables']);
  assert.ok(flag.ok && flag.value.backend === 'iptables');
  const bad = parseOptions({ ...POD, DATAPLANE_BACKEND: 'nft' }, []);
  assert.equal(bad.ok, false);
  if (!bad.ok) assert.match(bad.error, /DATAPLANE_BACKEND \(--backend\) "nft": is not a known rule back end; write one of auto, iptables, nftables/);
});
