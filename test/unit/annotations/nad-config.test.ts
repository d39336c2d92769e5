import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { parseNetworkConfig, type NetworkConfig } from '../../../src/annotations/nad-config.js';
import { formatInputError } from '../../../src/result.js';
import { assertNoPollution, assertWellFormed, expectErr, expectOk, ifname, mutated, pathological, RUNS } from './arbitraries.js';

const cfg = (o: unknown): string => JSON.stringify(o);
const servable = (c: NetworkConfig): { plugin: string; parent: string; mode: string } => {
  if (!c.servable) assert.fail(`expected servable, got unservable ${c.type}: ${c.reason}`);
  return { plugin: c.plugin, parent: c.parent, mode: c.mode };
};
const unservable = (c: NetworkConfig): { type: string; reason: string } => {
  if (c.servable) assert.fail(`expected unservable, got ${c.plugin} on ${c.parent}`);
  return { type: c.type, reason: c.reason };
};

void describe('parseNetworkConfig: examples', () => {
  void test('macvlan: master is the parent, mode defaults to bridge', () => {
    assert.deepEqual(servable(expectOk(parseNetworkConfig(cfg({ cniVersion: '0.4.0', type: 'macvlan', master: 'ens4', ipam: { type: 'static' } })))), {
      plugin: 'macvlan',
      parent: 'ens4',
      mode: 'bridge',
    });
    assert.deepEqual(servable(expectOk(parseNetworkConfig(cfg({ type: 'macvlan', master: 'eth1.100', mode: 'vepa' })))), { plugin: 'macvlan', parent: 'eth1.100', mode: 'vepa' });
  });
  void test('ipvlan l2 served, l3 and l3s not', () => {
    assert.deepEqual(servable(expectOk(parseNetworkConfig(cfg({ type: 'ipvlan', master: 'eth1' })))), { plugin: 'ipvlan', parent: 'eth1', mode: 'l2' });
    assert.match(unservable(expectOk(parseNetworkConfig(cfg({ type: 'ipvlan', master: 'eth1', mode: 'l3' })))).reason, /only in "l2"/);
  });
  void test('bridge: the bridge device, cni0 by default', () => {
    assert.deepEqual(servable(expectOk(parseNetworkConfig(cfg({ type: 'bridge', bridge: 'br-sec', isGateway: true })))), { plugin: 'bridge', parent: 'br-sec', mode: '' });
    assert.deepEqual(servable(expectOk(parseNetworkConfig(cfg({ type: 'bridge' })))), { plugin: 'bridge', parent: 'cni0', mode: '' });
  });
  void test('conflist: the first plugin decides, chained ones are ignored', () => {
    const text = cfg({ cniVersion: '1.0.0', name: 'net', plugins: [{ type: 'macvlan', master: 'ens4' }, { type: 'tuning', mtu: 1400 }, { type: 'portmap' }] });
    assert.deepEqual(servable(expectOk(parseNetworkConfig(text))), { plugin: 'macvlan', parent: 'ens4', mode: 'bridge' });
    assert.equal(unservable(expectOk(parseNetworkConfig(cfg({ plugins: [{ type: 'sriov' }, { type: 'macvlan', master: 'x' }] })))).type, 'sriov');
  });
  void test('unservable types are listed with why, not errors', () => {
    for (const type of ['sriov', 'host-device', 'ib-sriov', 'ovs', 'userspace', 'ptp', 'some-new-plugin']) {
      const u = unservable(expectOk(parseNetworkConfig(cfg({ type }))));
      assert.equal(u.type, type);
      assert.ok(u.reason.length > 20, u.reason);
    }
    assert.match(unservable(expectOk(parseNetworkConfig(cfg({ type: 'sriov', deviceID: '0000:00:01.0' })))).reason, /virtual function/);
    assert.match(unservable(expectOk(parseNetworkConfig(cfg({ type: 'macvlan' })))).reason, /set "master"/);
    assert.match(unservable(expectOk(parseNetworkConfig(cfg({ type: 'macvlan', master: 'eth1', mode: 'passthru' })))).reason, /passthru/);
    assert.equal(unservable(expectOk(parseNetworkConfig(undefined))).type, '(none)');
    assert.equal(unservable(expectOk(parseNetworkConfig(''))).type, '(none)');
  });
  void test('malformed configs: key, value, reason and fix, with the NAD named by the caller', () => {
    const notJson = expectErr(parseNetworkConfig('{"type":"macvlan",'));
    assert.equal(notJson.key, 'spec.config');
    assert.match(notJson.reason, /not valid JSON/);
    assert.match(
      formatInputError('NetworkAttachmentDefinition demo/net-a', notJson),
      /^NetworkAttachmentDefinition demo\/net-a: spec.config "\{\\"type\\":\\"macvlan\\",": is not valid JSON .*; write the CNI configuration/,
    );
    const badMaster = expectErr(parseNetworkConfig(cfg({ type: 'macvlan', master: 'a-very-long-interface' })));
    assert.equal(badMaster.key, 'spec.config "master"');
    assert.equal(badMaster.value, 'a-very-long-interface');
    assert.match(badMaster.reason, /more than 15/);
    assert.match(badMaster.fix, /e\.g\. "eth1"/);
    assert.equal(expectErr(parseNetworkConfig(cfg({ type: 'macvlan', master: 7 }))).reason, 'is a number, expected an interface name');
    assert.equal(expectErr(parseNetworkConfig(cfg({ type: 'macvlan', master: 'eth1', mode: 'bridged' }))).key, 'spec.config "mode"');
    assert.equal(expectErr(parseNetworkConfig(cfg({ master: 'eth1' }))).key, 'spec.config "type"');
    assert.equal(expectErr(parseNetworkConfig(cfg({ plugins: [] }))).reason, 'is an empty list');
    assert.equal(expectErr(parseNetworkConfig(cfg({ plugins: {} }))).key, 'spec.config "plugins"');
    assert.equal(expectErr(parseNetworkConfig(cfg({ plugins: [{ type: 'bridge', bridge: 'a/b' }] }))).key, 'spec.config "plugins" item 1 "bridge"');
    assert.match(expectErr(parseNetworkConfig('[1]')).reason, /a list, expected a JSON object/);
    assert.match(expectErr(parseNetworkConfig(42)).reason, /a number, expected a string/);
  });
});

/** Valid configs generated from their parts, so the expected answer is known independently. */
const validConfig = fc
  .record({
    plugin: fc.constantFrom('macvlan', 'ipvlan', 'bridge'),
    parent: ifname,
    macMode: fc.option(fc.constantFrom('bridge', 'private', 'vepa'), { nil: undefined }),
    list: fc.boolean(),
    extra: fc.dictionary(fc.constantFrom('cniVersion', 'name', 'ipam', 'mtu', 'dns'), fc.jsonValue(), { maxKeys: 3 }),
  })
  .map(({ plugin, parent, macMode, list, extra }) => {
    const main: Record<string, unknown> = { ...extra, type: plugin };
    if (plugin === 'bridge') main['bridge'] = parent;
    else main['master'] = parent;
    if (plugin === 'macvlan' && macMode !== undefined) main['mode'] = macMode;
    const mode = plugin === 'bridge' ? '' : plugin === 'ipvlan' ? 'l2' : (macMode ?? 'bridge');
    const text = list ? cfg({ cniVersion: '1.0.0', plugins: [main, { type: 'tuning' }] }) : cfg(main);
    return { text, expected: { plugin, parent, mode } };
  });

void describe('parseNetworkConfig: properties', () => {
  void test('generated valid configs parse to their parent and mode', () => {
    fc.assert(
      fc.property(validConfig, ({ text, expected }) => {
        assert.deepEqual(servable(expectOk(parseNetworkConfig(text))), expected);
      }),
      RUNS,
    );
  });
  void test('mutated configs never throw; every result is well formed', () => {
    fc.assert(
      fc.property(mutated(validConfig.map((v) => v.text)), (text) => {
        const r = parseNetworkConfig(text);
        if (r.ok) {
          if (r.value.servable) assert.ok(r.value.parent.length > 0 && r.value.parent.length <= 15);
          else assert.ok(r.value.reason.length > 0);
        } else assertWellFormed(r, text);
      }),
      RUNS,
    );
  });
  void test('arbitrary JSON never throws', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.boolean(), (v, asText) => {
        const input = asText ? JSON.stringify(v) : v;
        const r = parseNetworkConfig(input);
        if (!r.ok) assertWellFormed(r, input);
      }),
      RUNS,
    );
  });
  void test('pathological inputs', () => {
    for (const input of pathological) {
      const r = parseNetworkConfig(input);
      if (!r.ok) assertWellFormed(r, input);
    }
    // Inherited fields are not fields: a type or master behind __proto__ is missing.
    assert.equal(expectErr(parseNetworkConfig('{"__proto__":{"type":"macvlan","master":"eth1"}}')).key, 'spec.config "type"');
    assert.equal(expectErr(parseNetworkConfig('{"plugins":[{"__proto__":{"type":"bridge"}}]}')).key, 'spec.config "plugins" item 1 "type"');
    assert.deepEqual(servable(expectOk(parseNetworkConfig('{"type":"macvlan","master":"eth1","__proto__":{"polluted":true}}'))), { plugin: 'macvlan', parent: 'eth1', mode: 'bridge' });
    assertNoPollution();
  });
});
