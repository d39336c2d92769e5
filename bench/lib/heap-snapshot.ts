/**
 * What a V8 heap snapshot (`--heapsnapshot-signal`, the .heapsnapshot JSON) holds, grouped by
 * constructor: how many objects and how many bytes of each. Two snapshots of one process taken
 * minutes apart show what grows: a snapshot is taken after a full GC, so it counts only what is
 * retained, never garbage a lazy collector has not swept yet.
 */
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** Objects of one group: a constructor's name for objects, `(type)` for the rest (strings, code, …). */
export interface HeapGroup {
  readonly count: number;
  readonly bytes: number;
}

interface SnapshotJson {
  readonly snapshot: { readonly meta: { readonly node_fields: readonly string[]; readonly node_types: readonly unknown[] } };
  readonly nodes: readonly number[];
  readonly strings: readonly string[];
}

/** Groups a parsed snapshot's nodes. Objects by constructor name; closures by function name (`closure foo`); others by V8's type. */
export function groupSnapshot(json: SnapshotJson): Map<string, HeapGroup> {
  const fields = json.snapshot.meta.node_fields;
  const types = json.snapshot.meta.node_types[0];
  if (!Array.isArray(types)) throw new Error('heap snapshot: meta.node_types[0] is not the list of node types');
  const at = (f: string): number => {
    const i = fields.indexOf(f);
    if (i < 0) throw new Error(`heap snapshot: no node field ${f} in meta.node_fields`);
    return i;
  };
  const [typeAt, nameAt, sizeAt, width] = [at('type'), at('name'), at('self_size'), fields.length];
  const out = new Map<string, { count: number; bytes: number }>();
  for (let i = 0; i + width <= json.nodes.length; i += width) {
    const type = String(types[json.nodes[i + typeAt] ?? -1]);
    const name = json.strings[json.nodes[i + nameAt] ?? -1] ?? '';
    const key = type === 'object' ? name : type === 'closure' ? `closure ${name || '(anonymous)'}` : `(${type})`;
    const g = out.get(key) ?? { count: 0, bytes: 0 };
    g.count += 1;
    g.bytes += json.nodes[i + sizeAt] ?? 0;
    out.set(key, g);
  }
  return out;
}

export interface GroupGrowth {
  readonly key: string;
  readonly before: HeapGroup;
  readonly after: HeapGroup;
}

/** Groups whose count or bytes grew from `before` to `after`, most bytes grown first. */
export function growth(before: ReadonlyMap<string, HeapGroup>, after: ReadonlyMap<string, HeapGroup>): GroupGrowth[] {
  const none: HeapGroup = { count: 0, bytes: 0 };
  return [...after]
    .map(([key, a]) => ({ key, before: before.get(key) ?? none, after: a }))
    .filter((g) => g.after.count > g.before.count || g.after.bytes > g.before.bytes)
    .sort((x, y) => y.after.bytes - y.before.bytes - (x.after.bytes - x.before.bytes));
}

/** Total bytes of all groups (the snapshot's retained heap). */
export function totalBytes(groups: ReadonlyMap<string, HeapGroup>): number {
  let n = 0;
  for (const g of groups.values()) n += g.bytes;
  return n;
}

/**
 * Sends SIGUSR2 to a process started with `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=<dir>`
 * and waits for the snapshot it writes there; returns its groups and deletes the file.
 */
export async function signalSnapshot(pid: number, dir: string, what: string, timeoutMs = 120_000): Promise<Map<string, HeapGroup>> {
  const before = new Set(readdirSync(dir));
  process.kill(pid, 'SIGUSR2');
  const deadline = Date.now() + timeoutMs;
  for (let last = -1; Date.now() < deadline;) {
    await new Promise((r) => setTimeout(r, 1000));
    const file = readdirSync(dir).find((f) => f.endsWith('.heapsnapshot') && !before.has(f));
    if (file === undefined) continue;
    const full = join(dir, file);
    const size = statSync(full).size;
    if (size > 0 && size === last) {
      try {
        return groupSnapshot(JSON.parse(readFileSync(full, 'utf8')) as SnapshotJson);
      } catch {
        // still being written (a pause longer than a second): wait for more
      } finally {
        if (existsSync(full)) rmSync(full, { force: true });
      }
    }
    last = size;
  }
  throw new Error(`no heap snapshot from ${what} (pid ${pid}) in ${dir} within ${timeoutMs / 1000} s`);
}
