/**
 * The fake back ends themselves: they load every rule shape the sidecar's renderers write, full
 * and partial; they refuse what iptables-restore and nft refuse (the cheap cases), as one
 * transaction; and they fail loudly on syntax they do not model instead of guessing.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeIptables, RestoreError } from '../../harness/tracer/iptables.js';
import { FakeNft, NftError } from '../../harness/tracer/nftables.js';
import { BACKENDS, FakeSidecar } from '../../harness/tracer/sidecar.js';
import { summarize } from '../../harness/tracer/walk.js';
import { SHAPE_STATES, sampleState } from '../../sidecar/render-fixtures.js';

const pkt = (dst: string, dport: number, protocol: 'tcp' | 'udp' = 'tcp') => ({ family: 4 as const, protocol, src: '192.168.101.2', dst, dport });

void describe("fake back ends: the renderers' texts", () => {
  for (const kind of BACKENDS)
    void test(`${kind}: every golden shape loads whole, then as a change from the one before, and back`, () => {
      const states = [sampleState(), ...Object.values(SHAPE_STATES), sampleState()];
      const ns = new FakeSidecar(kind);
      states.forEach((s, i) => {
        ns.sync(s, i === 0);
        assert.ok(
          ns.texts.some((t) => t !== ''),
          `state ${i}: some text`,
        );
      });
      const fresh = new FakeSidecar(kind);
      fresh.sync(sampleState(), true);
      for (const p of [pkt('10.96.0.10', 80), pkt('10.96.0.53', 53, 'udp'), pkt('10.96.0.30', 8080), pkt('10.96.0.20', 443)])
        assert.deepEqual(summarize(ns.trace(p)), summarize(fresh.trace(p)), `${p.dst}:${p.dport} after the changes`);
    });
});

const restore = (f: FakeIptables, lines: readonly string[]): void => f.restore(`${lines.join('\n')}\n`);

void describe('fake iptables: refuses what iptables-restore refuses', () => {
  const refuses = (name: string, lines: readonly string[], message: RegExp) =>
    void test(name, () => {
      const f = new FakeIptables(4);
      assert.throws(
        () => restore(f, lines),
        (e: unknown) => e instanceof RestoreError && message.test(e.message),
      );
    });
  refuses('a rule in a chain that does not exist', ['*nat', '-A MPX-NONE -j ACCEPT', 'COMMIT'], /line 2: .*chain MPX-NONE does not exist/);
  refuses('a jump to a chain that does not exist', ['*nat', '-A OUTPUT -j MPX-NONE', 'COMMIT'], /Couldn't load target `MPX-NONE'/);
  refuses('deleting a rule that is not there', ['*nat', ':MPX-A - [0:0]', '-D MPX-A -j ACCEPT', 'COMMIT'], /Bad rule/);
  refuses('deleting a chain that is used', ['*nat', ':MPX-A - [0:0]', '-A OUTPUT -j MPX-A', '-X MPX-A', 'COMMIT'], /still used by OUTPUT/);
  refuses('deleting a chain that has rules', ['*nat', ':MPX-A - [0:0]', '-A MPX-A -j ACCEPT', '-X MPX-A', 'COMMIT'], /not empty/);
  refuses('DNAT outside the nat table', ['*filter', '-A OUTPUT -p tcp -j DNAT --to-destination 10.0.0.1:80', 'COMMIT'], /only valid in the nat table/);
  refuses('--dport without a protocol', ['*nat', '-A OUTPUT --dport 80 -j ACCEPT', 'COMMIT'], /--dport needs -p/);
  refuses('an address of the other family', ['*nat', '-A OUTPUT -d fd00::1/128 -j ACCEPT', 'COMMIT'], /not an IPv4 prefix/);
  refuses('a section without COMMIT', ['*nat', ':MPX-A - [0:0]'], /COMMIT expected/);
  refuses('a match it does not model (fails loudly)', ['*nat', '-A OUTPUT -m addrtype --dst-type LOCAL -j ACCEPT', 'COMMIT'], /match module addrtype is not modelled/);
  refuses('an option it does not model (fails loudly)', ['*filter', '-A FORWARD --fragment -j ACCEPT', 'COMMIT'], /unknown option "--fragment"/);
  refuses('a target option it does not model (fails loudly)', ['*nat', '-A OUTPUT -j MARK --set-xmark 0x1/0x1', 'COMMIT'], /MARK: option --set-xmark is not modelled/);

  void test('each table commits on its own: an error in nat leaves the filter section before it applied', () => {
    const f = new FakeIptables(4);
    assert.throws(
      () => restore(f, ['*filter', ':MPX-R - [0:0]', '-A MPX-R -p tcp -j REJECT --reject-with tcp-reset', '-A OUTPUT -j MPX-R', 'COMMIT', '*nat', ':MPX-S - [0:0]', '-A MPX-NONE -j ACCEPT', 'COMMIT']),
      RestoreError,
    );
    assert.deepEqual(f.listing('filter').get('MPX-R'), ['-p tcp -j REJECT --reject-with tcp-reset']);
    assert.equal(f.listing('nat').has('MPX-S'), false);
    assert.deepEqual(summarize(f.trace(pkt('10.96.0.1', 80))), [{ verdict: { kind: 'reject', with: 'tcp-reset' }, share: 1 }]);
  });
});

const TABLE = 'table inet t {\n\tchain c {\n\t\ttype nat hook output priority -100; policy accept;\n\t\tip daddr 10.96.0.1 meta l4proto tcp dnat ip to 192.168.101.3:8080\n\t}\n}\n';

void describe('fake nftables: refuses what nft refuses, all or nothing', () => {
  const refuses = (name: string, text: string, message: RegExp) =>
    void test(name, () => {
      const f = new FakeNft();
      f.apply(TABLE);
      assert.throws(
        () => f.apply(`add chain inet t extra\n${text}`),
        (e: unknown) => e instanceof NftError && message.test(e.message),
      );
      // Nothing of the failed text is left: not even its first line.
      assert.equal(f.table('t')?.chains.has('extra'), false);
      assert.deepEqual(summarize(f.trace(pkt('10.96.0.1', 80))), [{ verdict: { kind: 'dnat', ip: '192.168.101.3', port: 8080, masquerade: false }, share: 1 }]);
    });
  refuses('a goto to a chain that does not exist', 'add chain inet t d {\n\tgoto nowhere\n}\n', /No such file or directory: chain nowhere/);
  refuses('a set that does not exist', 'add chain inet t d {\n\tip saddr @none accept\n}\n', /No such file or directory: set none/);
  refuses('deleting what is not there', 'delete chain inet t none\n', /No such file or directory: chain none/);
  refuses('deleting a chain with rules', 'delete chain inet t c\n', /not empty/);
  refuses(
    'deleting a chain a map still sends to',
    'add map inet t m { type ipv4_addr . inet_proto . inet_service : verdict; elements = { 10.0.0.1 . tcp . 80 : goto extra }; }\ndelete chain inet t extra\n',
    /used by map m/,
  );
  refuses('an element of the other family', 'add set inet t s { type ipv4_addr; elements = { fd00::1 }; }\n', /"fd00::1" is not a ipv4_addr/);
  refuses('overlapping intervals', 'add map inet t m { typeof numgen random mod 4 : ip daddr . tcp dport; flags interval; elements = { 0-2 : 10.0.0.1 . 80, 2-3 : 10.0.0.2 . 80 }; }\n', /overlaps/);
  refuses('a set declared again with another type', 'add set inet t s { type ipv4_addr; }\nadd set inet t s { type ipv6_addr; }\n', /File exists: set s/);
  refuses(
    'a lookup with the wrong key type',
    'add set inet t s { type ipv4_addr; }\nadd chain inet t d {\n\tip daddr . th dport @s accept\n}\n',
    /s has key ipv4_addr, the rule looks up ipv4_addr . inet_service/,
  );
  refuses('a statement it does not model (fails loudly)', 'add chain inet t d {\n\tmeta mark set 0x1\n}\n', /only "meta mark set meta mark \| BITS" is modelled/);
  refuses('an expression it does not model (fails loudly)', 'add chain inet t d {\n\tfib daddr type local accept\n}\n', /"fib daddr" is not modelled/);

  void test('a numgen map with a gap: the uncovered values fall through to the next rule', () => {
    const f = new FakeNft();
    f.apply(
      'table inet t {\n\tmap m {\n\t\ttypeof numgen random mod 4 : ip daddr . tcp dport\n\t\tflags interval\n\t\telements = { 0-0 : 192.168.101.3 . 8080 }\n\t}\n\tchain c {\n\t\ttype nat hook output priority -100; policy accept;\n\t\tmeta l4proto tcp dnat ip to numgen random mod 4 map @m\n\t\tmeta l4proto tcp dnat ip to 192.168.101.4:8080\n\t}\n}\n',
    );
    assert.deepEqual(summarize(f.trace(pkt('10.96.0.1', 80))), [
      { verdict: { kind: 'dnat', ip: '192.168.101.3', port: 8080, masquerade: false }, share: 0.25 },
      { verdict: { kind: 'dnat', ip: '192.168.101.4', port: 8080, masquerade: false }, share: 0.75 },
    ]);
  });
});
