/**
 * The sentinel line after a restore's input (src/dataplane/iptables.ts): only a report naming the
 * sentinel alone counts as "everything before it committed". Messages are real iptables-nft-restore
 * 1.8.9 output.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sentinelOnly } from '../../src/dataplane/tuning/spare-exec.js';

void test('sentinelOnly: the sentinel line alone, a complete line', () => {
  assert.equal(sentinelOnly('iptables-nft-restore: line 5 failed\n', 5), true);
  assert.equal(sentinelOnly('iptables-nft-restore: line 5 failed', 5), false, 'not yet a whole line');
  assert.equal(sentinelOnly('iptables-nft-restore: line 4 failed\n', 5), false, 'a line of the input failed');
  assert.equal(
    sentinelOnly("iptables-nft-restore v1.8.9 (nf_tables): Chain 'X' does not exist\nError occurred at line: 3\nTry `iptables-restore -h' or 'iptables-restore --help' for more information.\n", 5),
    false,
  );
  assert.equal(sentinelOnly('iptables-restore: line 3 failed: CHAIN_DEL failed (Device or resource busy): chain MPX-SVC-X\niptables-restore: line 5 failed\n', 5), false);
  assert.equal(sentinelOnly('Could not fetch rule set generation id: Permission denied (you must be root)\n', 5), false, 'no line named');
  assert.equal(sentinelOnly('', 5), false);
});
