/**
 * One tree's policy peer change, for bench/side-by-side.ts: in a namespace of its own, the tree's
 * dataplane (`<tree>/src/dataplane/index.ts`, nftables) writes one egress rule of N peer addresses
 * (bench/lib/policy-load.ts, as bench/policy.ts), then replaces one peer `changes` times (a pod
 * leaving the selector and another joining), each a partial sync. Prints `RESULT {json}`: the
 * median partial sync and its `nft -f`, ms, and the transaction text's size.
 *
 *   node --import tsx bench/lib/policy-change-child.ts <tree> <peers> <changes>
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { summarize } from '../../test/harness/stats.js';
import type * as Dataplane from '../../src/dataplane/index.js';
import { createClientNetns } from './netns.js';
import { baseState, CLIENT_IP, egressPolicy, fillerAddress, IFACE, peerAddresses, PREFIX_LEN } from './policy-load.js';
import { withCleanup } from './proc.js';
import { REPORT } from './rule-sync-inside.js';

const [tree, peersArg, changesArg] = process.argv.slice(2);
if (tree === undefined) throw new Error('policy-change-child: give a tree, peers and changes');
const n = Number(peersArg ?? 10000);
const changes = Number(changesArg ?? 7);
const dpOf = (await import(pathToFileURL(path.join(tree, 'src', 'dataplane', 'index.ts')).href)) as typeof Dataplane;

const result = await withCleanup(
  (m) => void process.stderr.write(`${m}\n`),
  async (cleanup) => {
    const ns = await createClientNetns(`polab${process.pid % 10000}`, cleanup, IFACE, CLIENT_IP, PREFIX_LEN);
    const dp = dpOf.createDataplane({ netns: ns, backendKind: 'nftables' });
    try {
      await dp.sync(dpOf.withPodPolicy(baseState(), egressPolicy(peerAddresses(n))), { full: true });
      const syncs: Dataplane.SyncResult[] = [];
      for (let i = 0; i < changes; i++) {
        const replaced = egressPolicy([fillerAddress(n + i), ...peerAddresses(n).slice(1)]);
        syncs.push(await dp.sync(dpOf.withPodPolicy(baseState(), replaced), { full: false }));
      }
      return {
        syncMs: summarize(syncs.map((s) => s.durationMs)).median,
        nftMs: summarize(syncs.map((s) => s.phases.restoreMs)).median,
        textBytes: syncs[0]?.families.reduce((k, f) => k + f.text.length, 0) ?? 0,
      };
    } finally {
      dp.close();
    }
  },
);
process.stdout.write(`${REPORT}${JSON.stringify(result)}\n`);
