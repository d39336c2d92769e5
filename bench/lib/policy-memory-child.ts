/**
 * The policy benchmark's memory cell (bench/policy.ts): the sidecar's dataplane in a process of its
 * own, started inside a memory cgroup by the benchmark, writes one pod's rules (no Services, one
 * secondary interface) with the given policy in one full sync, then prints its own private memory
 * and exits. Its `nft` children run in the same cgroup, so the cgroup is charged for them and for
 * the kernel memory of the rules they load, as a sidecar container is.
 *
 * env POLICY_MEMORY_CELL: {"netns": "...", "policy": "none" | {"rules": n, "perRule": n, "addresses": n} | {"peers": n}, "services"?: n}
 * (`services`: that many Services of 10 endpoints each beside the policy, on the same interface).
 */
import { readFileSync } from 'node:fs';
import { createDataplane, policyRenderWarnings, withPodPolicy } from '../../src/dataplane/index.js';
import { baseState, budgetPolicy, egressPolicy, peerAddresses } from './policy-load.js';
import { desiredState } from './services.js';

export type MemoryPolicy = 'none' | { readonly peers: number } | { readonly rules: number; readonly perRule: number; readonly addresses: number };

const cell = JSON.parse(process.env['POLICY_MEMORY_CELL'] ?? '{}') as { netns: string; policy: MemoryPolicy; services?: number };
const p = cell.policy;
const policy = p === 'none' ? undefined : 'peers' in p ? egressPolicy(peerAddresses(p.peers)) : budgetPolicy(p);
const dp = createDataplane({ netns: cell.netns, backendKind: 'nftables' });
const r = await dp.sync(withPodPolicy(cell.services === undefined ? baseState() : desiredState(cell.services, 10), policy), { full: true });
dp.close();
const anon = /^Anonymous:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/smaps_rollup', 'utf8'));
process.stdout.write(
  `${JSON.stringify({ syncMs: r.durationMs, rules: r.rules, warnings: r.warnings.length + policyRenderWarnings('nftables', policy).length, privateBytes: Number(anon?.[1] ?? 0) * 1024 })}\n`,
);
