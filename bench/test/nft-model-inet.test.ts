/**
 * The B3-real model judged on the sidecar's nftables table (inet multus_proxy, render.ts): every
 * line below is real `nft -a monitor` / `nft -a list table` output of nft 1.0.6 (kernel 6.18),
 * captured in a scratch network namespace while render.ts's texts were applied with `nft -f` and
 * endpoint-map refills written by native/nfnl-batch.c (the element writer): one full sync of two
 * Services (2 and 1 endpoints), a partial refill to 3 endpoints by nft -f, a refill to 2 by
 * nfnl-batch, the Service emptied (0 endpoints) and filled again by nft -f, a refill to 12 by
 * nfnl-batch (with the listing after it); then an affinity Service beside an IPv6 one, the former
 * removed. The expected targets are what those commands wrote.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { NftTable, parseElements, parseMonitorLine, sidecarMonitorTable, targetName, type MonitorLine } from '../lib/nft-model.js';

const T = 'inet multus_proxy';

const FULL = [
  'add table inet multus_proxy # handle 1',
  'delete table inet multus_proxy # handle 1',
  'add table inet multus_proxy # handle 2',
  'add chain inet multus_proxy MPX-SVC-AAAAAAAAAAAAAAAA # handle 1',
  'add chain inet multus_proxy MPX-SVC-BBBBBBBBBBBBBBBB # handle 2',
  'add chain inet multus_proxy reject-chain # handle 3',
  'add chain inet multus_proxy nat-output { type nat hook output priority -100; policy accept; } # handle 4',
  'add chain inet multus_proxy filter-output { type filter hook output priority filter; policy accept; } # handle 5',
  'add map inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { # handle 6 typeof numgen random mod 4294967295 : ip daddr . tcp dport; flags interval; } ',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 0-2147483646 : 192.168.1.2 . 80 }',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 2147483647-4294967294 : 192.168.1.3 . 80 }',
  'add map inet multus_proxy MPX-EPS-6WGGXRWGJBJEYPCG { # handle 7 typeof numgen random mod 4294967295 : ip daddr . tcp dport; flags interval; } ',
  'add element inet multus_proxy MPX-EPS-6WGGXRWGJBJEYPCG { 0-4294967294 : 192.168.1.9 . 8080 }',
  'add map inet multus_proxy services-v4 { # handle 8 type ipv4_addr . inet_proto . inet_service : verdict; } ',
  'add element inet multus_proxy services-v4 { 10.96.0.10 . tcp . 80 : goto MPX-SVC-AAAAAAAAAAAAAAAA }',
  'add element inet multus_proxy services-v4 { 10.96.0.11 . tcp . 80 : goto MPX-SVC-BBBBBBBBBBBBBBBB }',
  'add set inet multus_proxy no-endpoints-v4 { # handle 9 type ipv4_addr . inet_proto . inet_service; } ',
  'add map inet multus_proxy services-v6 { # handle 10 type ipv6_addr . inet_proto . inet_service : verdict; } ',
  'add set inet multus_proxy no-endpoints-v6 { # handle 11 type ipv6_addr . inet_proto . inet_service; } ',
  'add rule inet multus_proxy MPX-SVC-AAAAAAAAAAAAAAAA meta l4proto tcp dnat ip to numgen random mod 4294967295 map @MPX-EPS-5UZ2ZCB5JXUZRYNO # handle 12',
  'add rule inet multus_proxy MPX-SVC-BBBBBBBBBBBBBBBB meta l4proto tcp dnat ip to numgen random mod 4294967295 map @MPX-EPS-6WGGXRWGJBJEYPCG # handle 13',
  'add rule inet multus_proxy reject-chain meta l4proto tcp reject with tcp reset # handle 14',
  'add rule inet multus_proxy reject-chain reject # handle 15',
  'add rule inet multus_proxy nat-output ip daddr . meta l4proto . th dport vmap @services-v4 # handle 16',
  'add rule inet multus_proxy nat-output ip6 daddr . meta l4proto . th dport vmap @services-v6 # handle 17',
  'add rule inet multus_proxy filter-output ct state new ip daddr . meta l4proto . th dport @no-endpoints-v4 goto reject-chain # handle 18',
  'add rule inet multus_proxy filter-output ct state new ip6 daddr . meta l4proto . th dport @no-endpoints-v6 goto reject-chain # handle 19',
  '# new generation 2 by process 12262 (nft)',
];

const REFILL_NFT = [
  'delete element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 2147483647-4294967294 : 192.168.1.3 . 80 }',
  'delete element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 0-2147483646 : 192.168.1.2 . 80 }',
  'add map inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { # handle 6 typeof numgen random mod 4294967295 : ip daddr . tcp dport; flags interval; } ',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 0-1431655764 : 192.168.1.2 . 80 }',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 1431655765-2863311529 : 192.168.1.3 . 80 }',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 2863311530-4294967294 : 192.168.1.4 . 80 }',
  '# new generation 3 by process 12263 (nft)',
];

const REFILL_NFNL = [
  'delete element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 2863311530-4294967294 : 192.168.1.4 . 80 }',
  'delete element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 1431655765-2863311529 : 192.168.1.3 . 80 }',
  'delete element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 0-1431655764 : 192.168.1.2 . 80 }',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 0-2147483646 : 192.168.1.2 . 80 }',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 2147483647-4294967294 : 192.168.1.4 . 80 }',
  '# new generation 4 by process 12286 (nfnl-batch)',
];

const EMPTIED = [
  'delete rule inet multus_proxy MPX-SVC-AAAAAAAAAAAAAAAA handle 12',
  'add set inet multus_proxy no-endpoints-v4 { # handle 9 type ipv4_addr . inet_proto . inet_service; } ',
  'add element inet multus_proxy no-endpoints-v4 { 10.96.0.10 . tcp . 80 }',
  'delete set inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO',
  '# new generation 5 by process 12288 (nft)',
];

const REFILLED = [
  'add map inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { # handle 20 typeof numgen random mod 4294967295 : ip daddr . tcp dport; flags interval; } ',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 0-2147483646 : 192.168.1.2 . 80 }',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 2147483647-4294967294 : 192.168.1.4 . 80 }',
  'add chain inet multus_proxy MPX-SVC-AAAAAAAAAAAAAAAA # handle 1',
  'add rule inet multus_proxy MPX-SVC-AAAAAAAAAAAAAAAA meta l4proto tcp dnat ip to numgen random mod 4294967295 map @MPX-EPS-5UZ2ZCB5JXUZRYNO # handle 21',
  'delete element inet multus_proxy no-endpoints-v4 { 10.96.0.10 . tcp . 80 }',
  '# new generation 6 by process 12289 (nft)',
];

const NFNL_TWELVE = [
  'delete element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 2147483647-4294967294 : 192.168.1.4 . 80 }',
  'delete element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 0-2147483646 : 192.168.1.2 . 80 }',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 0-357913940 : 192.168.2.1 . 80 }',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 357913941-715827881 : 192.168.2.2 . 80 }',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 715827882-1073741822 : 192.168.2.3 . 80 }',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 1073741823-1431655764 : 192.168.2.4 . 80 }',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 1431655765-1789569705 : 192.168.2.5 . 80 }',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 1789569706-2147483646 : 192.168.2.6 . 80 }',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 2147483647-2505397587 : 192.168.2.7 . 80 }',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 2505397588-2863311529 : 192.168.2.8 . 80 }',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 2863311530-3221225470 : 192.168.2.9 . 80 }',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 3221225471-3579139411 : 192.168.2.10 . 80 }',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 3579139412-3937053352 : 192.168.2.11 . 80 }',
  'add element inet multus_proxy MPX-EPS-5UZ2ZCB5JXUZRYNO { 3937053353-4294967294 : 192.168.2.12 . 80 }',
  '# new generation 7 by process 12291 (nfnl-batch)',
];

const AFFINITY_FULL = [
  'add table inet multus_proxy # handle 1',
  'delete table inet multus_proxy # handle 1',
  'add table inet multus_proxy # handle 2',
  'add chain inet multus_proxy MPX-SEP-2AE6ZK4H6MEZCM24 # handle 1',
  'add chain inet multus_proxy MPX-SEP-GNFOFNDCZUIGI7IC # handle 2',
  'add chain inet multus_proxy MPX-SVC-AFF # handle 3',
  'add chain inet multus_proxy MPX-SVC-V6 # handle 4',
  'add chain inet multus_proxy reject-chain # handle 5',
  'add chain inet multus_proxy nat-output { type nat hook output priority -100; policy accept; } # handle 6',
  'add chain inet multus_proxy filter-output { type filter hook output priority filter; policy accept; } # handle 7',
  'add set inet multus_proxy MPX-AFF-NTP3KWWTFFKUDWRW { # handle 8 type ipv4_addr; size 65535; flags dynamic,timeout; timeout 3h; } ',
  'add set inet multus_proxy MPX-AFF-4QN72VBO355CXNQY { # handle 9 type ipv4_addr; size 65535; flags dynamic,timeout; timeout 3h; } ',
  'add map inet multus_proxy MPX-EPS-TBSEDEE73GNYOROH { # handle 10 typeof numgen random mod 4294967295 : ip6 daddr . tcp dport; flags interval; } ',
  'add element inet multus_proxy MPX-EPS-TBSEDEE73GNYOROH { 0-4294967294 : fd00:101::2 . 80 }',
  'add map inet multus_proxy services-v4 { # handle 11 type ipv4_addr . inet_proto . inet_service : verdict; } ',
  'add element inet multus_proxy services-v4 { 10.96.0.12 . tcp . 80 : goto MPX-SVC-AFF }',
  'add set inet multus_proxy no-endpoints-v4 { # handle 12 type ipv4_addr . inet_proto . inet_service; } ',
  'add map inet multus_proxy services-v6 { # handle 13 type ipv6_addr . inet_proto . inet_service : verdict; } ',
  'add element inet multus_proxy services-v6 { fd00:96::1 . tcp . 80 : goto MPX-SVC-V6 }',
  'add set inet multus_proxy no-endpoints-v6 { # handle 14 type ipv6_addr . inet_proto . inet_service; } ',
  'add rule inet multus_proxy MPX-SEP-2AE6ZK4H6MEZCM24 update @MPX-AFF-NTP3KWWTFFKUDWRW { ip saddr } # handle 15',
  'add rule inet multus_proxy MPX-SEP-2AE6ZK4H6MEZCM24 meta l4proto tcp dnat ip to 192.168.1.2:80 # handle 16',
  'add rule inet multus_proxy MPX-SEP-GNFOFNDCZUIGI7IC update @MPX-AFF-4QN72VBO355CXNQY { ip saddr } # handle 17',
  'add rule inet multus_proxy MPX-SEP-GNFOFNDCZUIGI7IC meta l4proto tcp dnat ip to 192.168.1.3:80 # handle 18',
  'add rule inet multus_proxy MPX-SVC-AFF ip saddr @MPX-AFF-NTP3KWWTFFKUDWRW goto MPX-SEP-2AE6ZK4H6MEZCM24 # handle 19',
  'add rule inet multus_proxy MPX-SVC-AFF handle 19 ip saddr @MPX-AFF-4QN72VBO355CXNQY goto MPX-SEP-GNFOFNDCZUIGI7IC # handle 20',
  'add rule inet multus_proxy MPX-SVC-AFF handle 20 numgen random mod 2 0 goto MPX-SEP-2AE6ZK4H6MEZCM24 # handle 21',
  'add rule inet multus_proxy MPX-SVC-AFF goto MPX-SEP-GNFOFNDCZUIGI7IC # handle 22',
  'add rule inet multus_proxy MPX-SVC-V6 meta l4proto tcp dnat ip6 to numgen random mod 4294967295 map @MPX-EPS-TBSEDEE73GNYOROH # handle 23',
  'add rule inet multus_proxy reject-chain meta l4proto tcp reject with tcp reset # handle 24',
  'add rule inet multus_proxy reject-chain reject # handle 25',
  'add rule inet multus_proxy nat-output ip daddr . meta l4proto . th dport vmap @services-v4 # handle 26',
  'add rule inet multus_proxy nat-output ip6 daddr . meta l4proto . th dport vmap @services-v6 # handle 27',
  'add rule inet multus_proxy filter-output ct state new ip daddr . meta l4proto . th dport @no-endpoints-v4 goto reject-chain # handle 28',
  'add rule inet multus_proxy filter-output ct state new ip6 daddr . meta l4proto . th dport @no-endpoints-v6 goto reject-chain # handle 29',
  '# new generation 2 by process 13235 (nft)',
];

const AFFINITY_REMOVED = [
  'delete element inet multus_proxy services-v4 { 10.96.0.12 . tcp . 80 : goto MPX-SVC-AFF }',
  'delete rule inet multus_proxy MPX-SVC-AFF handle 19',
  'delete rule inet multus_proxy MPX-SVC-AFF handle 20',
  'delete rule inet multus_proxy MPX-SVC-AFF handle 21',
  'delete rule inet multus_proxy MPX-SVC-AFF handle 22',
  'delete rule inet multus_proxy MPX-SEP-2AE6ZK4H6MEZCM24 handle 15',
  'delete rule inet multus_proxy MPX-SEP-2AE6ZK4H6MEZCM24 handle 16',
  'delete rule inet multus_proxy MPX-SEP-GNFOFNDCZUIGI7IC handle 17',
  'delete rule inet multus_proxy MPX-SEP-GNFOFNDCZUIGI7IC handle 18',
  'delete chain inet multus_proxy MPX-SVC-AFF',
  'delete chain inet multus_proxy MPX-SEP-2AE6ZK4H6MEZCM24',
  'delete chain inet multus_proxy MPX-SEP-GNFOFNDCZUIGI7IC',
  'delete set inet multus_proxy MPX-AFF-NTP3KWWTFFKUDWRW',
  'delete set inet multus_proxy MPX-AFF-4QN72VBO355CXNQY',
  '# new generation 3 by process 13236 (nft)',
];

/**
 * The end of every listing of the table: the reject chain and the two base chains, the same text in
 * each capture but for the handles, which the table's history numbers (`chain` the reject chain's,
 * `rule` its first rule's; the others follow in order).
 */
const outputChains = (chain: number, rule: number): string => `	chain reject-chain { # handle ${chain}
		meta l4proto tcp reject with tcp reset # handle ${rule}
		reject # handle ${rule + 1}
	}

	chain nat-output { # handle ${chain + 1}
		type nat hook output priority -100; policy accept;
		ip daddr . meta l4proto . th dport vmap @services-v4 # handle ${rule + 2}
		ip6 daddr . meta l4proto . th dport vmap @services-v6 # handle ${rule + 3}
	}

	chain filter-output { # handle ${chain + 2}
		type filter hook output priority filter; policy accept;
		ct state new ip daddr . meta l4proto . th dport @no-endpoints-v4 goto reject-chain # handle ${rule + 4}
		ct state new ip6 daddr . meta l4proto . th dport @no-endpoints-v6 goto reject-chain # handle ${rule + 5}
	}
}
`;

const LISTING_TWELVE =
  `table inet multus_proxy { # handle 2
	map MPX-EPS-6WGGXRWGJBJEYPCG { # handle 7
		typeof numgen random mod 4294967295 : ip daddr . tcp dport
		flags interval
		elements = { 0-4294967294 : 192.168.1.9 . 8080 }
	}

	map services-v4 { # handle 8
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 10.96.0.10 . tcp . 80 : goto MPX-SVC-AAAAAAAAAAAAAAAA,
			     10.96.0.11 . tcp . 80 : goto MPX-SVC-BBBBBBBBBBBBBBBB }
	}

	set no-endpoints-v4 { # handle 9
		type ipv4_addr . inet_proto . inet_service
	}

	map services-v6 { # handle 10
		type ipv6_addr . inet_proto . inet_service : verdict
	}

	set no-endpoints-v6 { # handle 11
		type ipv6_addr . inet_proto . inet_service
	}

	map MPX-EPS-5UZ2ZCB5JXUZRYNO { # handle 20
		typeof numgen random mod 4294967295 : ip daddr . tcp dport
		flags interval
		elements = { 0-357913940 : 192.168.2.1 . 80, 357913941-715827881 : 192.168.2.2 . 80, 715827882-1073741822 : 192.168.2.3 . 80, 1073741823-1431655764 : 192.168.2.4 . 80, 1431655765-1789569705 : 192.168.2.5 . 80,
			     1789569706-2147483646 : 192.168.2.6 . 80, 2147483647-2505397587 : 192.168.2.7 . 80, 2505397588-2863311529 : 192.168.2.8 . 80, 2863311530-3221225470 : 192.168.2.9 . 80, 3221225471-3579139411 : 192.168.2.10 . 80,
			     3579139412-3937053352 : 192.168.2.11 . 80, 3937053353-4294967294 : 192.168.2.12 . 80 }
	}

	chain MPX-SVC-AAAAAAAAAAAAAAAA { # handle 1
		meta l4proto tcp dnat ip to numgen random mod 4294967295 map @MPX-EPS-5UZ2ZCB5JXUZRYNO # handle 21
	}

	chain MPX-SVC-BBBBBBBBBBBBBBBB { # handle 2
		meta l4proto tcp dnat ip to numgen random mod 4294967295 map @MPX-EPS-6WGGXRWGJBJEYPCG # handle 13
	}

` + outputChains(3, 14);

const LISTING_V6 =
  `table inet multus_proxy { # handle 2
	map MPX-EPS-TBSEDEE73GNYOROH { # handle 10
		typeof numgen random mod 4294967295 : ip6 daddr . tcp dport
		flags interval
		elements = { 0-4294967294 : fd00:101::2 . 80 }
	}

	map services-v4 { # handle 11
		type ipv4_addr . inet_proto . inet_service : verdict
	}

	set no-endpoints-v4 { # handle 12
		type ipv4_addr . inet_proto . inet_service
	}

	map services-v6 { # handle 13
		type ipv6_addr . inet_proto . inet_service : verdict
		elements = { fd00:96::1 . tcp . 80 : goto MPX-SVC-V6 }
	}

	set no-endpoints-v6 { # handle 14
		type ipv6_addr . inet_proto . inet_service
	}

	chain MPX-SVC-V6 { # handle 4
		meta l4proto tcp dnat ip6 to numgen random mod 4294967295 map @MPX-EPS-TBSEDEE73GNYOROH # handle 23
	}

` + outputChains(5, 24);

/** Feeds lines as the monitor does; returns the generation lines' writers. */
function feed(t: NftTable, lines: readonly string[]): (string | undefined)[] {
  const by: (string | undefined)[] = [];
  for (const l of lines) {
    const p = parseMonitorLine(l, T);
    if (p.kind === 'generation') by.push(p.by);
    else t.apply(p);
  }
  return by;
}

const sorted = (s: Iterable<string>): string[] => [...s].sort();
const A = 'MPX-EPS-5UZ2ZCB5JXUZRYNO';

void describe('nft table model: the sidecar nftables table', () => {
  void test('a full sync from nothing: every endpoint of both Services in place, through their maps', () => {
    const t = new NftTable();
    assert.deepEqual(feed(t, FULL), ['nft']);
    assert.deepEqual(sorted(t.inPlaceTargets()), ['192.168.1.2:80', '192.168.1.3:80', '192.168.1.9:8080']);
    assert.equal(t.elements(A)?.size, 2);
  });

  void test('a refill by nft -f (flush map + add map with elements): mid-transaction the map is empty, at its end it holds the three', () => {
    const t = new NftTable();
    feed(t, FULL);
    const deletes = REFILL_NFT.filter((l) => l.startsWith('delete element'));
    assert.equal(deletes.length, 2);
    feed(t, deletes);
    assert.deepEqual(sorted(t.inPlaceTargets()), ['192.168.1.9:8080'], 'why the monitor judges only at generation lines');
    // The `add map` line of the re-declaration keeps the map (and what follows fills it).
    assert.deepEqual(feed(t, REFILL_NFT.slice(deletes.length)), ['nft']);
    assert.deepEqual(sorted(t.inPlaceTargets()), ['192.168.1.2:80', '192.168.1.3:80', '192.168.1.4:80', '192.168.1.9:8080']);
  });

  void test('a refill by nfnl-batch (DELSETELEM + NEWSETELEM in one batch): the generation names nfnl-batch, .3 goes, .2 and .4 stay', () => {
    const t = new NftTable();
    feed(t, [...FULL, ...REFILL_NFT]);
    assert.deepEqual(feed(t, REFILL_NFNL), ['nfnl-batch']);
    assert.deepEqual(sorted(t.inPlaceTargets()), ['192.168.1.2:80', '192.168.1.4:80', '192.168.1.9:8080']);
    assert.equal(t.dnatInPlace('192.168.1.3', 80), false);
  });

  void test('emptied (the chain flushed, the map deleted, the key in no-endpoints) and filled again (the map declared anew, the chain rewritten)', () => {
    const t = new NftTable();
    feed(t, [...FULL, ...REFILL_NFT, ...REFILL_NFNL]);
    feed(t, EMPTIED);
    assert.deepEqual(sorted(t.inPlaceTargets()), ['192.168.1.9:8080']);
    assert.equal(t.elements(A), undefined, '`delete set` takes the map along');
    assert.deepEqual([...(t.elements('no-endpoints-v4')?.keys() ?? [])], ['10.96.0.10 . tcp . 80']);
    feed(t, REFILLED);
    assert.deepEqual(sorted(t.inPlaceTargets()), ['192.168.1.2:80', '192.168.1.4:80', '192.168.1.9:8080']);
  });

  void test('twelve endpoints by nfnl-batch; the monitor model equals the model of the listing taken after it', () => {
    const t = new NftTable();
    assert.deepEqual(feed(t, [...FULL, ...REFILL_NFT, ...REFILL_NFNL, ...EMPTIED, ...REFILLED, ...NFNL_TWELVE]), ['nft', 'nft', 'nfnl-batch', 'nft', 'nft', 'nfnl-batch']);
    const want = [...Array.from({ length: 12 }, (_, i) => `192.168.2.${i + 1}:80`), '192.168.1.9:8080'].sort();
    assert.deepEqual(sorted(t.inPlaceTargets()), want);
    const fromListing = new NftTable();
    fromListing.load(LISTING_TWELVE);
    assert.deepEqual(sorted(fromListing.inPlaceTargets()), want, 'the listing (elements wrapped over three lines) reads the same');
    assert.equal(fromListing.elements(A)?.size, 12);
    assert.equal(fromListing.size(), t.size());
  });

  void test('a Service whose dispatch element goes takes its endpoints out of place, though its chain and map remain', () => {
    const t = new NftTable();
    feed(t, FULL);
    feed(t, ['delete element inet multus_proxy services-v4 { 10.96.0.10 . tcp . 80 : goto MPX-SVC-AAAAAAAAAAAAAAAA }']);
    assert.deepEqual(sorted(t.inPlaceTargets()), ['192.168.1.9:8080']);
    assert.equal(t.elements(A)?.size, 2);
  });

  void test('a full sync over an existing table: `delete table` clears the model before the new content (handles restart)', () => {
    const t = new NftTable();
    feed(t, [...FULL, ...NFNL_TWELVE]);
    feed(t, FULL);
    assert.deepEqual(sorted(t.inPlaceTargets()), ['192.168.1.2:80', '192.168.1.3:80', '192.168.1.9:8080']);
  });

  void test('affinity: endpoint chains reached by goto from the Service chain; IPv6 map data as [address]:port; removing the Service removes its endpoints', () => {
    const t = new NftTable();
    feed(t, AFFINITY_FULL);
    assert.deepEqual(sorted(t.inPlaceTargets()), ['192.168.1.2:80', '192.168.1.3:80', '[fd00:101::2]:80']);
    assert.ok(t.dnatInPlace('fd00:101::2', 80));
    feed(t, AFFINITY_REMOVED);
    assert.deepEqual(sorted(t.inPlaceTargets()), ['[fd00:101::2]:80']);
    const fromListing = new NftTable();
    fromListing.load(LISTING_V6);
    assert.deepEqual(sorted(fromListing.inPlaceTargets()), ['[fd00:101::2]:80']);
  });

  void test('parseMonitorLine: elements, maps and sets, table deletion, an insert position, the writer of a generation', () => {
    const p = (l: string): MonitorLine => parseMonitorLine(l, T);
    assert.deepEqual(p('add element inet multus_proxy MPX-EPS-X { 0-2147483646 : 192.168.1.2 . 80 }'), {
      kind: 'add-elements',
      set: 'MPX-EPS-X',
      elements: [{ key: '0-2147483646', value: '192.168.1.2 . 80' }],
    });
    assert.deepEqual(p('delete element inet multus_proxy no-endpoints-v4 { 10.96.0.10 . tcp . 80 }'), {
      kind: 'delete-elements',
      set: 'no-endpoints-v4',
      elements: [{ key: '10.96.0.10 . tcp . 80' }],
    });
    assert.deepEqual(p('add map inet multus_proxy MPX-EPS-X { # handle 6 typeof numgen random mod 4294967295 : ip daddr . tcp dport; flags interval; } '), { kind: 'add-set', set: 'MPX-EPS-X' });
    assert.deepEqual(p('delete set inet multus_proxy MPX-EPS-X'), { kind: 'delete-set', set: 'MPX-EPS-X' });
    assert.deepEqual(p('delete map inet multus_proxy MPX-EPS-X'), { kind: 'delete-set', set: 'MPX-EPS-X' });
    assert.deepEqual(p('flush map inet multus_proxy MPX-EPS-X'), { kind: 'flush-set', set: 'MPX-EPS-X' });
    assert.deepEqual(p('delete table inet multus_proxy # handle 1'), { kind: 'delete-table' });
    assert.equal(p('delete table inet multus_proxy_other # handle 1').kind, 'other');
    assert.equal(p('add element inet other MPX-EPS-X { 0-1 : 192.168.1.2 . 80 }').kind, 'other');
    assert.deepEqual(p('add rule inet multus_proxy MPX-SVC-AFF handle 19 ip saddr @S goto MPX-SEP-B # handle 20'), {
      kind: 'add-rule',
      chain: 'MPX-SVC-AFF',
      handle: 20,
      text: 'ip saddr @S goto MPX-SEP-B',
    });
    assert.deepEqual(p('# new generation 4 by process 12286 (nfnl-batch)'), { kind: 'generation', generation: 4, by: 'nfnl-batch' });
    assert.deepEqual(p('# new generation 4'), { kind: 'generation', generation: 4, by: undefined });
  });

  void test('parseElements and targetName', () => {
    assert.deepEqual(parseElements(' 10.96.0.10 . tcp . 80 : goto MPX-SVC-A,  10.96.0.11 . tcp . 80 : goto MPX-SVC-B '), [
      { key: '10.96.0.10 . tcp . 80', value: 'goto MPX-SVC-A' },
      { key: '10.96.0.11 . tcp . 80', value: 'goto MPX-SVC-B' },
    ]);
    assert.deepEqual(parseElements(''), []);
    assert.equal(targetName('10.1.1.2', 80), '10.1.1.2:80');
    assert.equal(targetName('fd00::2', 80), '[fd00::2]:80');
  });

  void test('sidecarMonitorTable: its own table when listed, else ip nat', () => {
    assert.equal(sidecarMonitorTable('table ip nat\ntable inet multus_proxy\n'), 'inet multus_proxy');
    assert.equal(sidecarMonitorTable('table ip nat\ntable inet multus_proxy_x\n'), 'ip nat');
    assert.equal(sidecarMonitorTable(''), 'ip nat');
  });
});
