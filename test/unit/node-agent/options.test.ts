import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { HELP, parseNodeAgentOptions } from '../../../cmd/node-agent/options.js';

void describe('node agent options', () => {
  void test('defaults, with NODE_NAME from the downward API', () => {
    const r = parseNodeAgentOptions({ NODE_NAME: 'worker-1' }, []);
    assert.deepEqual(r, {
      ok: true,
      value: {
        mode: 'run',
        nodeName: 'worker-1',
        healthPort: 9190,
        iptablesBackend: 'auto',
        masqueradeBit: 13,
        minSyncIntervalMs: 100,
        fullResyncIntervalMs: 60000,
        parentFromNad: false,
        backend: 'auto',
        externalIPs: { configured: false },
      },
    });
  });
  void test('external-IP CIDRs: the admin list from the variable or the flag; a bad entry names itself and the fix', () => {
    const r = parseNodeAgentOptions({ NODE_NAME: 'a', EXTERNAL_IPS_ALLOWED_CIDRS: '192.0.2.0/24, 2001:db8::/64' }, []);
    assert.ok(r.ok);
    assert.deepEqual(r.value.externalIPs.configured ? r.value.externalIPs.allowed.map((x) => x.cidr) : 'not configured', ['192.0.2.0/24', '2001:db8::/64']);
    const f = parseNodeAgentOptions({ NODE_NAME: 'a' }, ['--external-ips-allowed-cidrs', '198.51.100.0/24']);
    assert.ok(f.ok && f.value.externalIPs.configured && f.value.externalIPs.allowed[0]?.cidr === '198.51.100.0/24');
    const bad = parseNodeAgentOptions({ NODE_NAME: 'a', EXTERNAL_IPS_ALLOWED_CIDRS: '192.0.2.0/24,nope' }, []);
    assert.ok(!bad.ok);
    assert.match(bad.error, /EXTERNAL_IPS_ALLOWED_CIDRS \(--external-ips-allowed-cidrs\)\[1\].*nope.*192\.0\.2\.0\/24/s);
  });
  void test('a flag wins over its variable; --cleanup needs no node name; --help always wins', () => {
    const r = parseNodeAgentOptions({ NODE_NAME: 'a', HEALTH_PORT: '1' }, ['--node-name', 'b', '--health-port', '2', '--iptables-backend', 'legacy', '--masquerade-bit', '12']);
    assert.ok(r.ok && r.value.nodeName === 'b' && r.value.healthPort === 2 && r.value.iptablesBackend === 'legacy' && r.value.masqueradeBit === 12);
    const c = parseNodeAgentOptions({}, ['--cleanup']);
    assert.ok(c.ok && c.value.mode === 'cleanup');
    const h = parseNodeAgentOptions({}, ['--bogus', '--help']);
    assert.ok(h.ok && h.value.mode === 'help');
    for (const flag of ['--cleanup', '--node-name', '--masquerade-bit', 'NODE_NAME', 'MASQUERADE_BIT', 'default 13']) assert.ok(HELP.includes(flag), flag);
  });
  void test('bad values name the variable, the value and the fix; all problems at once', () => {
    const r = parseNodeAgentOptions({ HEALTH_PORT: 'x', MASQUERADE_BIT: '32', IPTABLES_BACKEND: 'ipfw' }, []);
    assert.ok(!r.ok);
    assert.match(r.error, /HEALTH_PORT \(--health-port\) "x": is not a whole number from 0 to 65535; write e\.g\. 9190/);
    assert.match(r.error, /MASQUERADE_BIT \(--masquerade-bit\) "32"/);
    assert.match(r.error, /IPTABLES_BACKEND \(--iptables-backend\) "ipfw": is not a back end; write auto, nft or legacy/);
    assert.match(r.error, /NODE_NAME \(--node-name\) "": is not set; set it from the downward API \(fieldRef spec\.nodeName\)/);
    const u = parseNodeAgentOptions({ NODE_NAME: 'a' }, ['--nope']);
    assert.ok(!u.ok && /known flags: --cleanup/.test(u.error));
  });
});

void test('--backend: auto (default), iptables or nftables; another value is refused with the choices', () => {
  const pick = (env: Record<string, string>, argv: string[]): string | undefined => {
    const r = parseNodeAgentOptions({ NODE_NAME: 'a', ...env }, argv);
    return r.ok ? r.value.backend : undefined;
  };
  assert.equal(pick({}, []), 'auto');
  assert.equal(pick({}, ['--backend', 'iptables']), 'iptables');
  assert.equal(pick({ DATAPLANE_BACKEND: 'nftables' }, []), 'nftables');
  assert.equal(pick({ DATAPLANE_BACKEND: 'nftables' }, ['--backend', 'iptables']), 'iptables', 'the flag wins');
  const r = parseNodeAgentOptions({ NODE_NAME: 'a', DATAPLANE_BACKEND: 'nft' }, []);
  assert.equal(r.ok, false);
  if (!r.ok) assert.match(r.error, /DATAPLANE_BACKEND \(--backend\) "nft": is not a known rule back end; write one of auto, iptables, nftables/);
});

void test('--parent-from-nad (upgrades): off by default; the switch or PARENT_FROM_NAD=true turns it on; another value is refused with the fix', () => {
  const on = (env: Record<string, string>, argv: string[]): boolean | undefined => {
    const r = parseNodeAgentOptions({ NODE_NAME: 'a', ...env }, argv);
    return r.ok ? r.value.parentFromNad : undefined;
  };
  assert.equal(on({}, []), false);
  assert.equal(on({}, ['--parent-from-nad']), true);
  assert.equal(on({ PARENT_FROM_NAD: 'true' }, []), true);
  assert.equal(on({ PARENT_FROM_NAD: 'False' }, []), false);
  const r = parseNodeAgentOptions({ NODE_NAME: 'a', PARENT_FROM_NAD: 'yes please' }, []);
  assert.ok(!r.ok && /PARENT_FROM_NAD \(--parent-from-nad\) "yes please": is not true or false; write true or false/.test(r.error));
  assert.ok(HELP.includes('--parent-from-nad') && HELP.includes('PARENT_FROM_NAD'));
});
