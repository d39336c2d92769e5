/**
 * What every tenant attack must not cost anyone else (issue "bounded and fair"), read on the node
 * itself before and after each attack by guard() (tenant.ts):
 * - no container of the project restarts: the controller, the webhook, the node agent, and the
 *   sidecar of every injected pod (restart counts per pod uid, for pods present both times);
 * - no injected pod of another namespace loses readiness (its Ready condition is True both times,
 *   with the same transition time, so a flap in between counts too);
 * - no such container goes past its memory limit: the peak of its cgroup (cgroup v1
 *   `memory.max_usage_in_bytes`, reset before the attack so the peak is the attack's; v2
 *   `memory.peak`) stays under `memory.limit_in_bytes` / `memory.max`, and its OOM-kill count
 *   (which counts a killed `nft` child too) does not grow. The cgroup holds everything the
 *   container is charged for, children and kernel memory included.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import type { RealNode } from '../harness/node.js';
import { INSTALL_NAMESPACE, SIDECAR_CONTAINER_NAME } from '../../src/keys.js';
import { AGENT_NAMESPACE } from './nodeport.js';

export type Component = 'sidecar' | 'controller' | 'webhook' | 'node agent';

export interface ContainerMemory {
  readonly component: Component;
  /** `<namespace>/<pod>`. */
  readonly pod: string;
  readonly id: string;
  readonly peakBytes: number;
  readonly limitBytes: number;
  readonly oomKills: number;
}

export interface ComponentState {
  /** `<ns>/<pod>/<uid>/<container>` → restart count, for the project's containers. */
  readonly restarts: ReadonlyMap<string, number>;
  /** Injected pods outside the attacker's namespaces: `<ns>/<pod>/<uid>` → Ready transition time ('' when not Ready). */
  readonly ready: ReadonlyMap<string, string>;
  readonly memory: readonly ContainerMemory[];
}

export interface Costs {
  restarted: string[];
  lostReadiness: string[];
  /** Containers whose peak reached their limit, or that had an OOM kill meanwhile. */
  overBudget: string[];
  /** Highest peak per component in MiB, with the limit: "sidecar": "41.2 of 128". */
  peaks: Record<string, string>;
}

interface CriContainer {
  id: string;
  labels?: Record<string, string>;
}

interface PodList {
  items: {
    metadata?: { name?: string; namespace?: string; uid?: string };
    spec?: { containers?: { name: string }[]; initContainers?: { name: string }[] };
    status?: {
      conditions?: { type: string; status: string; lastTransitionTime?: string }[];
      containerStatuses?: { name: string; restartCount: number }[];
      initContainerStatuses?: { name: string; restartCount: number }[];
    };
  }[];
}

const componentOf = (ns: string, pod: string, container: string): Component | undefined => {
  if (container === SIDECAR_CONTAINER_NAME) return 'sidecar';
  if (ns === AGENT_NAMESPACE) return 'node agent';
  if (ns !== INSTALL_NAMESPACE) return undefined;
  if (pod.startsWith('multus-proxy-controller-')) return 'controller';
  if (pod.startsWith('multus-proxy-webhook-')) return 'webhook';
  return undefined;
};

/** The container's memory cgroup directory and its version, from /proc/<pid>/cgroup. */
function memoryCgroup(pid: number): { dir: string; v1: boolean } {
  const lines = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n');
  const v1 = lines.find((l) => /^\d+:([^:]*,)?memory(,[^:]*)?:/.test(l));
  if (v1 !== undefined) return { dir: `/sys/fs/cgroup/memory${v1.slice(v1.indexOf(':', v1.indexOf(':') + 1) + 1)}`, v1: true };
  const v2 = lines.find((l) => l.startsWith('0::'));
  if (v2 === undefined) throw new Error(`no memory cgroup for pid ${pid}: ${lines.join(' | ')}`);
  return { dir: `/sys/fs/cgroup${v2.slice(3)}`, v1: false };
}

const num = (path: string): number => {
  const t = readFileSync(path, 'utf8').trim();
  return t === 'max' ? Number.POSITIVE_INFINITY : Number(t);
};
const oomKills = (path: string): number => Number(/^oom_kill (\d+)$/m.exec(readFileSync(path, 'utf8'))?.[1] ?? 0);

async function containerMemory(node: RealNode, resetPeaks: boolean): Promise<ContainerMemory[]> {
  const list = (JSON.parse(await node.crictl(['ps', '-o', 'json'])) as { containers?: CriContainer[] }).containers ?? [];
  const out: ContainerMemory[] = [];
  for (const c of list) {
    const ns = c.labels?.['io.kubernetes.pod.namespace'] ?? '';
    const pod = c.labels?.['io.kubernetes.pod.name'] ?? '';
    const component = componentOf(ns, pod, c.labels?.['io.kubernetes.container.name'] ?? '');
    if (component === undefined) continue;
    // A container that went away since the list (a pod of the attack's own, a rollout) is skipped.
    const pid = await node
      .crictl(['inspect', c.id])
      .then((j) => (JSON.parse(j) as { info?: { pid?: number } }).info?.pid)
      .catch(() => undefined);
    if (pid === undefined || pid <= 0) continue;
    try {
      const { dir, v1 } = memoryCgroup(pid);
      if (v1 && resetPeaks) writeFileSync(`${dir}/memory.max_usage_in_bytes`, '0');
      out.push({
        component,
        pod: `${ns}/${pod}`,
        id: c.id,
        peakBytes: num(`${dir}/${v1 ? 'memory.max_usage_in_bytes' : 'memory.peak'}`),
        limitBytes: num(`${dir}/${v1 ? 'memory.limit_in_bytes' : 'memory.max'}`),
        oomKills: oomKills(`${dir}/${v1 ? 'memory.oom_control' : 'memory.events'}`),
      });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
  }
  return out;
}

/**
 * The project's containers as they are now. `attackers`: the attacker's namespaces, whose pods
 * are its own business (readiness); `resetPeaks`: start the cgroup v1 peaks from now.
 */
export async function componentState(node: RealNode, attackers: readonly string[], resetPeaks: boolean): Promise<ComponentState> {
  const pods = JSON.parse(await node.kubectl(['get', 'pods', '-A', '-o', 'json'], { timeoutMs: 60_000 })) as PodList;
  const restarts = new Map<string, number>();
  const ready = new Map<string, string>();
  for (const p of pods.items) {
    const ns = p.metadata?.namespace ?? '';
    const name = p.metadata?.name ?? '';
    const key = `${ns}/${name}/${p.metadata?.uid ?? ''}`;
    for (const c of [...(p.status?.initContainerStatuses ?? []), ...(p.status?.containerStatuses ?? [])])
      if (componentOf(ns, name, c.name) !== undefined) restarts.set(`${key}/${c.name}`, c.restartCount);
    const injected = (p.spec?.initContainers ?? []).some((c) => c.name === SIDECAR_CONTAINER_NAME) || (p.spec?.containers ?? []).some((c) => c.name === SIDECAR_CONTAINER_NAME);
    if (!injected || attackers.includes(ns)) continue;
    const r = p.status?.conditions?.find((c) => c.type === 'Ready');
    ready.set(key, r?.status === 'True' ? (r.lastTransitionTime ?? '?') : '');
  }
  return { restarts, ready, memory: await containerMemory(node, resetPeaks) };
}

const MiB = (b: number): string => (Number.isFinite(b) ? (b / 2 ** 20).toFixed(1) : 'unlimited');

/** What the attack cost others, from the states before and after it. Pure. */
export function costs(before: ComponentState, after: ComponentState): Costs {
  const restarted: string[] = [];
  for (const [k, n] of after.restarts) {
    const was = before.restarts.get(k);
    if (was !== undefined && n > was) restarted.push(`${k}: ${was} -> ${n}`);
  }
  const lostReadiness: string[] = [];
  for (const [k, since] of before.ready) {
    const now = after.ready.get(k);
    if (since !== '' && now !== undefined && now !== since) lostReadiness.push(`${k}: Ready since ${since}, now ${now === '' ? 'not Ready' : `Ready again since ${now}`}`);
  }
  const overBudget: string[] = [];
  const peaks: Record<string, string> = {};
  const top = new Map<Component, ContainerMemory>();
  for (const m of after.memory) {
    const was = before.memory.find((b) => b.id === m.id);
    if (m.peakBytes >= m.limitBytes) overBudget.push(`${m.component} ${m.pod}: peak ${MiB(m.peakBytes)} MiB reached its limit ${MiB(m.limitBytes)} MiB`);
    if (was !== undefined && m.oomKills > was.oomKills) overBudget.push(`${m.component} ${m.pod}: ${m.oomKills - was.oomKills} OOM kill(s) in its cgroup`);
    const t = top.get(m.component);
    if (t === undefined || m.peakBytes > t.peakBytes) top.set(m.component, m);
  }
  for (const [c, m] of top) peaks[c] = `${MiB(m.peakBytes)} of ${MiB(m.limitBytes)} MiB (${m.pod})`;
  return { restarted, lostReadiness, overBudget, peaks };
}
