/**
 * The host state a real node changes, saved before it starts and put back when it stops.
 *
 * Everything here is synchronous on purpose: the same `teardown()` runs from `stop()`, from a
 * process 'exit' hook (where nothing asynchronous runs), and from the detached reaper
 * (test/harness/node-reap.ts) when the test process was killed outright.
 *
 * What is saved (docs/node-harness.md, "What the node changes on the host"): sysctls, every
 * iptables/ip6tables table of both back ends (only what the node added is removed, so rules of
 * anything else running meanwhile survive), network links, mounts, cgroups, and the paths the
 * binaries hard-code outside the node's own directory.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const SYSCTLS = [
  'net/ipv4/ip_forward',
  'net/ipv6/conf/all/forwarding',
  'net/ipv4/conf/all/route_localnet',
  'kernel/panic',
  'kernel/panic_on_oops',
  'vm/overcommit_memory',
  'vm/panic_on_oom',
  'kernel/keys/root_maxkeys',
  'kernel/keys/root_maxbytes',
  'net/netfilter/nf_conntrack_max',
  'net/netfilter/nf_conntrack_tcp_timeout_established',
  'net/netfilter/nf_conntrack_tcp_timeout_close_wait',
  'net/bridge/bridge-nf-call-iptables',
  'net/bridge/bridge-nf-call-ip6tables',
] as const;

/** Paths outside the node's directory that kubelet, containerd and the CNI plugins hard-code. */
export const HOST_PATHS = [
  '/var/lib/kubelet',
  '/var/log/pods',
  '/var/log/containers',
  '/run/containerd',
  '/var/lib/cni',
  '/etc/cni',
  '/etc/cni/net.d',
  '/etc/cni/net.d/whereabouts.d',
  '/opt/cni',
  '/var/run/netns',
] as const;

/** netns entries the node may leave: containerd names its sandboxes' namespaces cni-<uuid>. */
const NETNS_DIR = '/var/run/netns';

/**
 * A mount the node may have made: under its own directory or the paths kubelet and containerd
 * hard-code, and in the network-namespace folder only containerd's cni-* entries (other tests on
 * this machine create and mount their own namespaces there meanwhile; those are never touched).
 */
function ownedMount(m: string, dir: string): boolean {
  for (const ns of ['/run/netns/', '/var/run/netns/']) if (m.startsWith(ns)) return m.slice(ns.length).startsWith('cni-');
  return [dir, ...HOST_PATHS.filter((p) => p !== NETNS_DIR)].some((w) => m === w || m.startsWith(`${w}/`));
}

/** iptables-nft's tables: iptables-save covers them. */
const IPTABLES_NFT_TABLE = /^(ip|ip6|arp|bridge) (filter|nat|mangle|raw|security)$/;

/** The host's nftables tables that are not iptables-nft's (a missing nft: none). */
function nftTables(): string[] {
  const r = run('nft', ['list', 'tables']);
  if (!r.ok) return [];
  return r.out
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith('table '))
    .map((l) => l.slice('table '.length))
    .filter((t) => !IPTABLES_NFT_TABLE.test(t));
}

/** Tables in `now` that `before` did not have (the node agent's, when its cleanup did not run). Pure. */
export function newNftTables(before: readonly string[], now: readonly string[]): string[] {
  const had = new Set(before);
  return now.filter((t) => !had.has(t) && !IPTABLES_NFT_TABLE.test(t));
}

/** iptables-save front ends: the default (nft here) and legacy, IPv4 and IPv6. */
const IPTABLES = [
  { save: 'iptables-save', restore: 'iptables-restore' },
  { save: 'ip6tables-save', restore: 'ip6tables-restore' },
  { save: 'iptables-legacy-save', restore: 'iptables-legacy-restore' },
  { save: 'ip6tables-legacy-save', restore: 'ip6tables-legacy-restore' },
] as const;

export interface HostSnapshot {
  sysctls: Record<string, string>;
  /** iptables-save output per front end ('' when that front end is missing). */
  iptables: Record<string, string>;
  /** nftables tables (`family name`) other than iptables-nft's own; absent in older saved states. */
  nftTables?: string[];
  links: string[];
  mounts: string[];
  /** For each HOST_PATHS entry: undefined when missing, else its entries. */
  paths: Record<string, string[] | null>;
  /** Top-level directories of each cgroup v1 hierarchy. */
  cgroups: Record<string, string[]>;
  /** Files the node overwrites, with their earlier content. */
  files: Record<string, string | null>;
}

/** What the node created, recorded as it goes so a teardown of a half-started node knows. */
export interface NodeState {
  dir: string;
  snapshot?: HostSnapshot;
  /** Links this node created (deleted at teardown even if they existed before? never: only these). */
  links: string[];
  /** pid -> program name, for every process started (each has the node's dir in its command line). */
  pids: Record<string, string>;
  containerdSocket?: string;
  crictl?: string;
  /** The second node's containerd socket (startNode({ nodes: 2 })): its pods are removed too. */
  moreContainerdSockets?: string[];
  /** cgroup roots besides '/' whose kubepods subtree holds pods (the second node's '/realnode2'). */
  moreCgroupRoots?: string[];
  /** Network namespaces this node created (the second node's, the segment's): deleted last. */
  netns?: string[];
}

export const stateFile = (dir: string): string => join(dir, 'state.json');

export function saveState(s: NodeState): void {
  writeFileSync(stateFile(s.dir), JSON.stringify(s));
}

export function loadState(dir: string): NodeState | undefined {
  try {
    return JSON.parse(readFileSync(stateFile(dir), 'utf8')) as NodeState;
  } catch {
    return undefined;
  }
}

function run(cmd: string, args: string[], input?: string): { ok: boolean; out: string; err: string } {
  const r = spawnSync(cmd, args, { input, encoding: 'utf8', timeout: 60_000, maxBuffer: 64 * 1024 * 1024 });
  return { ok: r.status === 0, out: r.stdout ?? '', err: r.stderr ?? (r.error ? r.error.message : '') };
}

function readSysctl(name: string): string | undefined {
  try {
    return readFileSync(`/proc/sys/${name}`, 'utf8').trim();
  } catch {
    return undefined;
  }
}

export function links(): string[] {
  return readdirSync('/sys/class/net').sort();
}

/** Mount points of this mount namespace. */
export function mounts(): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => (l.split(' ')[4] ?? '').replace(/\\040/g, ' '));
}

function entries(path: string): string[] | null {
  try {
    return readdirSync(path).sort();
  } catch {
    return null;
  }
}

const CGROUP_ROOT = '/sys/fs/cgroup';

function cgroupHierarchies(): string[] {
  return (entries(CGROUP_ROOT) ?? []).filter((h) => {
    try {
      return statSync(join(CGROUP_ROOT, h)).isDirectory();
    } catch {
      return false;
    }
  });
}

function cgroupDirs(h: string): string[] {
  return (entries(join(CGROUP_ROOT, h)) ?? []).filter((e) => {
    try {
      return statSync(join(CGROUP_ROOT, h, e)).isDirectory();
    } catch {
      return false;
    }
  });
}

export function takeSnapshot(files: readonly string[]): HostSnapshot {
  const sysctls: Record<string, string> = {};
  for (const s of SYSCTLS) {
    const v = readSysctl(s);
    if (v !== undefined) sysctls[s] = v;
  }
  const iptables: Record<string, string> = {};
  for (const t of IPTABLES) iptables[t.save] = run(t.save, []).out;
  const paths: Record<string, string[] | null> = {};
  for (const p of HOST_PATHS) paths[p] = entries(p);
  const cgroups: Record<string, string[]> = {};
  for (const h of cgroupHierarchies()) cgroups[h] = cgroupDirs(h);
  const saved: Record<string, string | null> = {};
  for (const f of files) saved[f] = existsSync(f) ? readFileSync(f, 'utf8') : null;
  return { sysctls, iptables, nftTables: nftTables(), links: links(), mounts: mounts(), paths, cgroups, files: saved };
}

/**
 * The iptables-restore input that removes what `after` added to `before`: new rules are deleted
 * (-D), then new chains are flushed and deleted. Pure, so it is unit-tested.
 */
export function iptablesUndo(before: string, after: string): string {
  const parse = (dump: string): Map<string, { chains: Set<string>; rules: string[] }> => {
    const tables = new Map<string, { chains: Set<string>; rules: string[] }>();
    let cur: { chains: Set<string>; rules: string[] } | undefined;
    for (const line of dump.split('\n')) {
      if (line.startsWith('*')) {
        cur = { chains: new Set(), rules: [] };
        tables.set(line.slice(1).trim(), cur);
      } else if (cur && line.startsWith(':') && line.split(' ')[1] === '-') {
        // Only user chains (policy "-"): built-in ones exist even where a table never showed up before.
        cur.chains.add(line.slice(1).split(' ')[0] ?? '');
      } else if (cur && line.startsWith('-A ')) cur.rules.push(line);
    }
    return tables;
  };
  const b = parse(before);
  const a = parse(after);
  const out: string[] = [];
  for (const [table, t] of a) {
    const old = b.get(table) ?? { chains: new Set<string>(), rules: [] };
    const remaining = new Map<string, number>();
    for (const r of old.rules) remaining.set(r, (remaining.get(r) ?? 0) + 1);
    const newChains = [...t.chains].filter((c) => !old.chains.has(c));
    const dels: string[] = [];
    for (const r of t.rules) {
      const n = remaining.get(r) ?? 0;
      if (n > 0) {
        remaining.set(r, n - 1);
        continue;
      }
      const chain = r.split(' ')[1] ?? '';
      // Rules inside new chains go with the flush below.
      if (!newChains.includes(chain)) dels.push(`-D ${r.slice(3)}`);
    }
    if (dels.length === 0 && newChains.length === 0) continue;
    out.push(`*${table}`, ...dels.reverse(), ...newChains.map((c) => `-F ${c}`), ...newChains.map((c) => `-X ${c}`), 'COMMIT');
  }
  return out.length > 0 ? `${out.join('\n')}\n` : '';
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Running, not a zombie: our own children stay zombies while this synchronous code runs. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

function cmdline(pid: number): string {
  if (!alive(pid)) return '';
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}

/** Kills pid if its command line still names dir (a reused pid is never hit); waits up to graceMs. */
export function killOwned(pid: number, dir: string, graceMs: number): void {
  if (!cmdline(pid).includes(dir)) return;
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    return;
  }
  const deadline = Date.now() + graceMs;
  while (alive(pid) && Date.now() < deadline) sleepSync(100);
  if (alive(pid)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
    const hard = Date.now() + 5_000;
    while (alive(pid) && Date.now() < hard) sleepSync(50);
  }
}

/** Every process whose command line names dir (containerd's shims re-parent to init). */
function ownedPids(dir: string): number[] {
  return readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .map(Number)
    .filter((p) => p !== process.pid && cmdline(p).includes(dir));
}

function cgroupTree(path: string): string[] {
  const out: string[] = [];
  const walk = (p: string): void => {
    for (const e of entries(p) ?? []) {
      const c = join(p, e);
      try {
        if (statSync(c).isDirectory()) walk(c);
      } catch {
        /* raced */
      }
    }
    out.push(p);
  };
  walk(path);
  return out; // children before parents
}

/**
 * The top-level cgroups a node makes: the first kubelet's kubepods and each further node's root.
 * Only these are removed or reported: other tests on the machine make top-level cgroups of their
 * own meanwhile (seen: mpx-imgtest-<pid>), and those are not the node's to delete. Pure.
 */
export function ownedCgroups(newDirs: readonly string[], state: Pick<NodeState, 'moreCgroupRoots'>): string[] {
  const owned = new Set(['kubepods', ...(state.moreCgroupRoots ?? []).map((r) => r.replace(/^\/+/, '').split('/')[0] ?? '')]);
  return newDirs.filter((d) => owned.has(d));
}

/** Order of stopping: the kubelet first so it recreates nothing, containerd's pods next. */
const STOP_ORDER = ['kubelet', 'kube-proxy', 'containerd', 'coredns', 'kube-scheduler', 'kube-controller-manager', 'cert-manager', 'kube-apiserver', 'etcd', 'registry'];

/**
 * Stops everything the node started and puts the host back. Returns what could not be restored
 * (empty when the host is as it was), so callers can fail loudly.
 */
export function teardown(state: NodeState, log: (m: string) => void = () => {}): string[] {
  const { dir } = state;
  let mark = Date.now();
  const timed = (what: string): void => {
    log(`teardown ${what}: ${Date.now() - mark} ms`);
    mark = Date.now();
  };
  // A second node's programs are named '<program>@<node>' (kubelet@realnode2).
  const byName = (n: string): number[] =>
    Object.entries(state.pids)
      .filter(([, name]) => name === n || name.startsWith(`${n}@`) || (n === 'cert-manager' && name.startsWith('cert-manager')))
      .map(([p]) => Number(p));
  const rank = (name: string): number => {
    const i = STOP_ORDER.findIndex((n) => name === n || name.startsWith(n));
    return i < 0 ? STOP_ORDER.length : i;
  };
  // 1. kubelet, then every pod sandbox through the CRI so CNI DEL runs (whereabouts frees its addresses).
  for (const p of byName('kubelet')) killOwned(p, dir, 15_000);
  for (const sock of [state.containerdSocket, ...(state.moreContainerdSockets ?? [])]) {
    if (!state.crictl || !sock || !existsSync(sock)) continue;
    const ep = `unix://${sock}`;
    const r = run(state.crictl, ['--runtime-endpoint', ep, '--image-endpoint', ep, '--timeout', '60s', 'rmp', '-fa']);
    if (!r.ok) log(`crictl rmp -fa (${sock}): ${r.err.trim()}`);
  }
  timed('kubelet + crictl rmp -fa');
  // 2. The container processes crictl could not stop: every pid in the kubepods cgroups.
  for (const h of cgroupHierarchies())
    for (const top of ['', ...(state.moreCgroupRoots ?? [])]) {
      const root = join(CGROUP_ROOT, h, top, 'kubepods');
      if (!existsSync(root)) continue;
      for (const cg of cgroupTree(root)) {
        for (const pid of (readFileSyncSafe(join(cg, 'cgroup.procs')) ?? '').split('\n').filter(Boolean)) {
          try {
            process.kill(Number(pid), 'SIGKILL');
          } catch {
            /* gone */
          }
        }
      }
    }
  // 3. Every process the node started, in order, then anything else naming dir (shims).
  const ordered = Object.entries(state.pids).sort(([, a], [, b]) => rank(a) - rank(b));
  for (const [pid, name] of ordered) {
    const t = Date.now();
    killOwned(Number(pid), dir, 10_000);
    log(`teardown: ${name} stopped in ${Date.now() - t} ms`);
  }
  for (const pid of ownedPids(dir)) killOwned(pid, dir, 3_000);

  timed('processes');
  const left: string[] = [];
  const snap = state.snapshot;
  // 4. Mounts made since the snapshot (netns binds, kubelet tmpfs, overlay rootfs), deepest first.
  const before = new Set(snap?.mounts ?? []);
  const newMounts = mounts()
    .filter((m) => !before.has(m) && ownedMount(m, dir))
    .sort((a, b) => b.length - a.length);
  for (const m of newMounts) {
    if (!run('umount', [m]).ok) run('umount', ['-l', m]);
  }
  timed('mounts');
  // 4b. Network namespaces (the second node's, the segment's): their links, routes and iptables go
  // with them once no process holds them (every one was killed above, the pods' mounts are gone).
  for (const ns of state.netns ?? []) {
    if (existsSync(join(NETNS_DIR, ns)) && !run('ip', ['netns', 'del', ns]).ok) log(`ip netns del ${ns} failed`);
  }
  // 5. cgroups the kubelet and runc created.
  if (snap) {
    for (const h of cgroupHierarchies()) {
      const old = new Set(snap.cgroups[h] ?? []);
      for (const d of ownedCgroups(
        cgroupDirs(h).filter((d) => !old.has(d)),
        state,
      )) {
        for (const cg of cgroupTree(join(CGROUP_ROOT, h, d))) {
          for (let i = 0; i < 20; i++) {
            try {
              rmdirSync(cg);
              break;
            } catch (e) {
              if ((e as NodeJS.ErrnoException).code === 'ENOENT') break;
              sleepSync(100);
            }
          }
        }
      }
    }
  }
  timed('cgroups');
  // 6. iptables: remove what was added (kube-proxy, kubelet, CNI, the harness's own drop rules).
  if (snap) {
    for (const t of IPTABLES) {
      const now = run(t.save, []);
      if (!now.ok) continue;
      const undo = iptablesUndo(snap.iptables[t.save] ?? '', now.out);
      if (undo) {
        const r = run(t.restore, ['--noflush'], undo);
        if (!r.ok) log(`${t.restore}: ${r.err.trim()}`);
      }
    }
  }
  // 6b. nftables tables the node added (the node agent's nftables back end), deleted whole.
  if (snap) {
    for (const t of newNftTables(snap.nftTables ?? [], nftTables())) {
      const r = run('nft', ['delete', 'table', ...t.split(' ')]);
      if (!r.ok) log(`nft delete table ${t}: ${r.err.trim()}`);
    }
  }
  timed('iptables');
  // 7. Links: veths still on the pod bridge, then what the harness created.
  const bridge = state.links.find((l) => l.startsWith('rnbr'));
  if (bridge && existsSync(`/sys/class/net/${bridge}/brif`)) {
    for (const port of entries(`/sys/class/net/${bridge}/brif`) ?? []) run('ip', ['link', 'del', port]);
  }
  for (const l of state.links) if (existsSync(`/sys/class/net/${l}`)) run('ip', ['link', 'del', l]);
  // 8. sysctls.
  if (snap) {
    for (const [name, value] of Object.entries(snap.sysctls)) {
      if (readSysctl(name) === value) continue;
      try {
        writeFileSync(`/proc/sys/${name}`, value);
      } catch (e) {
        log(`sysctl ${name}: ${(e as Error).message}`);
      }
    }
  }
  // 9. Hard-coded paths: created ones go entirely, existing ones lose only their new entries.
  if (snap) {
    for (const f of Object.keys(snap.files)) {
      const old = snap.files[f];
      if (old === null || old === undefined) rmSync(f, { force: true });
      else writeFileSync(f, old);
    }
    for (const p of [...HOST_PATHS].reverse()) {
      const old = snap.paths[p];
      if (old === null || old === undefined) {
        rmSync(p, { recursive: true, force: true });
        continue;
      }
      const keep = new Set(old);
      for (const e of entries(p) ?? []) {
        if (keep.has(e)) continue;
        // Other programs' network namespaces may come and go meanwhile: only containerd's.
        if (p === NETNS_DIR && !e.startsWith('cni-')) continue;
        rmSync(join(p, e), { recursive: true, force: true });
      }
    }
  }
  timed('links, sysctls, paths');
  // Checked before the folder goes: removing it lets the reaper release the machine-wide lock, and
  // a waiting node would then start changing the same host state while this one still checks.
  if (snap) left.push(...leftovers(snap, state));
  rmSync(dir, { recursive: true, force: true });
  if (existsSync(dir)) left.push(`directory ${dir}`);
  for (const l of left) log(`left behind: ${l}`);
  return left;
}

function readFileSyncSafe(p: string): string | undefined {
  try {
    return readFileSync(p, 'utf8');
  } catch {
    return undefined;
  }
}

/** What differs from the snapshot in everything the node owns. */
export function leftovers(snap: HostSnapshot, state: NodeState): string[] {
  const out: string[] = [];
  const pids = ownedPids(state.dir);
  if (pids.length > 0) out.push(`processes ${pids.map((p) => `${p} (${cmdline(p).slice(0, 60)})`).join(', ')}`);
  for (const l of state.links) if (existsSync(`/sys/class/net/${l}`)) out.push(`link ${l}`);
  for (const ns of state.netns ?? []) if (existsSync(join(NETNS_DIR, ns))) out.push(`network namespace ${ns}`);
  const oldLinks = new Set(snap.links);
  for (const l of links()) if (!oldLinks.has(l) && /^veth/.test(l) && readFileSyncSafe(`/sys/class/net/${l}/master`)) out.push(`link ${l}`);
  const oldMounts = new Set(snap.mounts);
  for (const m of mounts()) if (!oldMounts.has(m) && ownedMount(m, state.dir)) out.push(`mount ${m}`);
  for (const [name, value] of Object.entries(snap.sysctls)) {
    const now = readSysctl(name);
    if (now !== value) out.push(`sysctl ${name}=${now} (was ${value})`);
  }
  for (const t of IPTABLES) {
    const now = run(t.save, []);
    if (!now.ok) continue;
    const undo = iptablesUndo(snap.iptables[t.save] ?? '', now.out);
    if (undo)
      out.push(
        `${t.save}: ${undo
          .split('\n')
          .filter((l) => l.startsWith('-'))
          .join('; ')}`,
      );
  }
  for (const t of newNftTables(snap.nftTables ?? [], nftTables())) out.push(`nft table ${t}`);
  for (const p of HOST_PATHS) {
    const old = snap.paths[p];
    const now = entries(p);
    if (old === null || old === undefined) {
      if (now !== null) out.push(`path ${p}`);
    } else {
      const keep = new Set(old);
      for (const e of now ?? []) if (!keep.has(e) && !(p === NETNS_DIR && !e.startsWith('cni-'))) out.push(`path ${join(p, e)}`);
    }
  }
  for (const h of cgroupHierarchies()) {
    const old = new Set(snap.cgroups[h] ?? []);
    for (const d of ownedCgroups(
      cgroupDirs(h).filter((d) => !old.has(d)),
      state,
    ))
      out.push(`cgroup ${h}/${d}`);
  }
  return out;
}

/** The interface the default routes leave by: forwarding from the pod network to it is dropped. */
export function uplinks(): string[] {
  const devs = new Set<string>();
  for (const fam of ['-4', '-6']) {
    const r = run('ip', [fam, 'route', 'show', 'default']);
    for (const m of r.out.matchAll(/\bdev (\S+)/g)) if (m[1]) devs.add(m[1]);
  }
  return [...devs];
}

/** Runs a host command, throwing with its stderr (start-up only; teardown never throws). */
export function host(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    const err = e as Error & { stderr?: string };
    throw new Error(`${cmd} ${args.join(' ')}: ${err.stderr?.trim() || err.message}`, { cause: e });
  }
}
