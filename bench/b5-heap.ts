/**
 * Where B5's private memory goes, for two source trees in one run: each tree's sidecar (its own
 * bundle, the injected command, one back end forced) at N Services × 10 endpoints, as
 * bench/b5-ab.ts runs it; after its window, the private (Anonymous) memory of each process of the
 * sidecar's tree (the node process and its spare commands), the node process's Anonymous memory by
 * mapping (brk heap, stacks, and the other anonymous mappings by size), and a V8 heap snapshot
 * (--heapsnapshot-signal, taken after a full GC) grouped by constructor; then the groups that
 * differ most between the two trees. Not a numbered benchmark: figures go in docs/benchmarks.md by hand.
 *
 *   node --import tsx bench/b5-heap.ts <before tree> <after tree> [services=1000] [backend=nftables]
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createServices, createSlices } from './lib/cluster.js';
import { startSidecar, startSidecarEnv, treeSidecarCommand, type SidecarCommand } from './lib/sidecar-env.js';
import { descendants, sleep, smaps, withCleanup } from './lib/proc.js';
import { groupSnapshot, totalBytes, type HeapGroup } from './lib/heap-snapshot.js';

const ENDPOINTS = 10;
const SETTLE_S = 5;
const WINDOW_S = 20;
const KIB = 1024;
const MIB = 2 ** 20;

const [before, after] = [process.argv[2], process.argv[3]];
if (before === undefined || after === undefined) throw new Error('b5-heap: give two source trees: node --import tsx bench/b5-heap.ts <before tree> <after tree> [services] [backend]');
const n = Number(process.argv[4] ?? 1000);
// One back end for both trees, or `<before>,<after>` (e.g. iptables,nftables).
const backends = (process.argv[5] ?? 'nftables').split(',');
const backendOf = (i: number): string => backends[i] ?? backends[0] ?? 'nftables';

/** Anonymous kB of one process by mapping: `[heap]`, `[stack]`, else `anon <size class>`. */
function anonByMapping(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  let key = '';
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      const size = (parseInt(head[2] ?? '0', 16) - parseInt(head[1] ?? '0', 16)) / KIB;
      const name = head[3] ?? '';
      key =
        name !== ''
          ? name.startsWith('/')
            ? 'file-backed (their anonymous COW pages)'
            : name
          : size >= 65536
            ? 'anon >= 64 MiB mapping'
            : size >= 1024
              ? 'anon 1-64 MiB mapping'
              : size >= 256
                ? 'anon 256 KiB-1 MiB mapping'
                : 'anon < 256 KiB mapping';
      continue;
    }
    const m = /^Anonymous:\s+(\d+) kB$/.exec(line);
    if (m) out.set(key, (out.get(key) ?? 0) + Number(m[1]));
  }
  return out;
}

interface Taken {
  readonly anonymous: number;
  readonly procs: string[];
  readonly mappings: Map<string, number>;
  readonly heap: Map<string, HeapGroup>;
}

const mib = (b: number): string => (b / MIB).toFixed(2);

await withCleanup(
  (m) => process.stderr.write(`${m}\n`),
  async (cleanup) => {
    const trees = [before, after];
    // B5HEAP_KEEP=<dir> keeps the snapshots there (for a retainer analysis in DevTools).
    const keep = process.env['B5HEAP_KEEP'];
    const snapDir = keep ?? mkdtempSync(path.join(os.tmpdir(), 'mp-b5heap-snap-'));
    if (keep === undefined) cleanup.add('snapshot dir', () => rmSync(snapDir, { recursive: true, force: true }));
    const cmds = await Promise.all(trees.map((t, i) => treeSidecarCommand(cleanup, t, backendOf(i), ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${snapDir}`])));
    const env = await startSidecarEnv(cleanup);
    await createServices(env.cp.client, n);
    await createSlices(env.cp.client, n, ENDPOINTS);
    const taken: Taken[] = [];
    for (const [i, tree] of trees.entries()) {
      const cmd = cmds[i] as SidecarCommand;
      const sidecar = startSidecar(env, cleanup, 'info', cmd);
      await sidecar.waitFor((l) => l.msg === 'first sync done; ready', 300_000, 'first sync');
      await sleep((SETTLE_S + WINDOW_S) * 1000);
      const pid = sidecar.child.pid ?? 0;
      const pids = descendants(pid);
      const procs = pids.map((p) => `${readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0').slice(0, 3).join(' ')}: ${mib(smaps(p).anonymous)}`);
      const anonymous = pids.reduce((s, p) => s + smaps(p).anonymous, 0);
      const nodePid = pids.find((p) => readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('sidecar.js') && readFileSync(`/proc/${p}/comm`, 'utf8').trim() === 'node') ?? pid;
      const mappings = anonByMapping(nodePid);
      const known = new Set(readdirSync(snapDir));
      process.kill(nodePid, 'SIGUSR2');
      let file: string | undefined;
      for (let w = 0; w < 120 && file === undefined; w++) {
        await sleep(1000);
        file = readdirSync(snapDir).find((f) => f.endsWith('.heapsnapshot') && !known.has(f));
      }
      if (file === undefined) throw new Error(`b5-heap: ${tree}: no heap snapshot within 120 s`);
      // The writer is done when the file parses (it is created empty, then written).
      let json: Parameters<typeof groupSnapshot>[0] | undefined;
      for (let w = 0; w < 60 && json === undefined; w++) {
        await sleep(2000);
        try {
          json = JSON.parse(readFileSync(path.join(snapDir, file), 'utf8')) as Parameters<typeof groupSnapshot>[0];
        } catch {
          // still being written
        }
      }
      if (json === undefined) throw new Error(`b5-heap: ${tree}: the heap snapshot ${file} did not parse within 120 s`);
      const heap = groupSnapshot(json);
      if (keep !== undefined) process.stderr.write(`b5-heap: ${tree}'s snapshot is ${path.join(snapDir, file)}\n`);
      taken.push({ anonymous, procs, mappings, heap });
      await sidecar.stop();
    }
    const [a, b] = taken as [Taken, Taken];
    for (const [i, t] of taken.entries()) {
      process.stdout.write(`\n${trees[i]} (${backendOf(i)}): private ${mib(t.anonymous)} MiB; processes (MiB): ${t.procs.join('; ')}\n`);
      process.stdout.write(
        `  node process Anonymous by mapping (MiB): ${[...t.mappings]
          .sort((x, y) => y[1] - x[1])
          .map(([k, v]) => `${k} ${(v / KIB).toFixed(2)}`)
          .join('; ')}\n`,
      );
      process.stdout.write(`  V8 heap snapshot (retained, after GC): ${mib(totalBytes(t.heap))} MiB\n`);
    }
    const keys = new Set([...a.heap.keys(), ...b.heap.keys()]);
    const none: HeapGroup = { count: 0, bytes: 0 };
    const diffs = [...keys].map((k) => ({ k, x: a.heap.get(k) ?? none, y: b.heap.get(k) ?? none })).sort((p, q) => Math.abs(q.y.bytes - q.x.bytes) - Math.abs(p.y.bytes - p.x.bytes));
    process.stdout.write(`\nheap groups that differ most (before -> after: objects, KiB):\n`);
    for (const d of diffs.slice(0, 30))
      process.stdout.write(`  ${d.k}: ${d.x.count} -> ${d.y.count}, ${(d.x.bytes / KIB).toFixed(1)} -> ${(d.y.bytes / KIB).toFixed(1)} (${((d.y.bytes - d.x.bytes) / KIB).toFixed(1)})\n`);
    process.stdout.write(`\nlargest groups after:\n`);
    for (const [k, g] of [...b.heap].sort((p, q) => q[1].bytes - p[1].bytes).slice(0, 25)) process.stdout.write(`  ${k}: ${g.count} objects, ${(g.bytes / KIB).toFixed(1)} KiB\n`);
    process.stdout.write(
      `node ${process.version}, ${n} Services, back ends ${backends.join(',')}, load average ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}\n`,
    );
  },
);
