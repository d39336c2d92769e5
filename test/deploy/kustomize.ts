/**
 * Renders the project's kustomizations with the kustomize binary that scripts/setup.sh installs,
 * and small accessors over the rendered objects, shared by the deploy tests.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { loadAll } from 'js-yaml';
import { binDir } from '../harness/controlplane.js';
import type { KubeObject } from '../../src/kube/types.js';

export const REPO = resolve(import.meta.dirname, '..', '..');
export const DEPLOY = join(REPO, 'deploy');

/** Every kustomization a user may build, relative to the repository. */
export const KUSTOMIZATIONS = ['deploy', 'deploy/base', 'deploy/overlays/cert-manager', 'deploy/overlays/bootstrap'] as const;

export interface Rendered extends KubeObject {
  [key: string]: unknown;
}

export function kustomizeBinary(): string {
  const path = join(binDir(), 'kustomize');
  if (!existsSync(path)) {
    throw new Error(`kustomize not found at ${path}: run scripts/setup.sh (it builds kustomize with Go into ${binDir()}; set MULTUS_PROXY_BIN_DIR to use another folder)`);
  }
  return path;
}

/** `kustomize build <dir>` parsed into objects; a kustomize error fails with its own message. */
export async function render(dir: string): Promise<Rendered[]> {
  const abs = resolve(REPO, dir);
  let stdout: string;
  try {
    ({ stdout } = await promisify(execFile)(kustomizeBinary(), ['build', abs], { maxBuffer: 16 * 1024 * 1024 }));
  } catch (e) {
    const err = e as Error & { stderr?: string };
    throw new Error(`kustomize build ${dir} failed: ${err.stderr ?? err.message}`, { cause: e });
  }
  return loadAll(stdout).filter((o): o is Rendered => typeof o === 'object' && o !== null);
}

export function id(o: KubeObject): string {
  const ns = o.metadata?.namespace;
  return `${o.kind ?? '?'} ${ns ? `${ns}/` : ''}${o.metadata?.name ?? '?'}`;
}

/** The one object of that kind and name; fails naming what is there instead. */
export function find(objects: readonly Rendered[], kind: string, name: string): Rendered {
  const hits = objects.filter((o) => o.kind === kind && o.metadata?.name === name);
  if (hits.length !== 1 || hits[0] === undefined) {
    throw new Error(`expected one ${kind} ${name}, found ${hits.length}; rendered: ${objects.map(id).join(', ')}`);
  }
  return hits[0];
}

export function ofKind(objects: readonly Rendered[], kind: string): Rendered[] {
  return objects.filter((o) => o.kind === kind);
}

/** Walks a path of keys and array indexes; undefined where it breaks off. */
export function at(obj: unknown, ...path: (string | number)[]): unknown {
  let cur: unknown = obj;
  for (const k of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string | number, unknown>)[k];
  }
  return cur;
}

export interface PodSpecLike {
  containers?: ContainerLike[];
  initContainers?: ContainerLike[];
  volumes?: { name: string; secret?: { secretName?: string }; configMap?: { name?: string } }[];
  securityContext?: Record<string, unknown>;
  serviceAccountName?: string;
  [key: string]: unknown;
}

export interface ContainerLike {
  name: string;
  image?: string;
  command?: string[];
  args?: string[];
  ports?: { name?: string; containerPort: number }[];
  securityContext?: Record<string, unknown>;
  volumeMounts?: { name: string; mountPath: string }[];
  [key: string]: unknown;
}

/** The pod template of a Deployment, Job or CronJob (undefined for other kinds). */
export function podSpec(o: Rendered): PodSpecLike | undefined {
  switch (o.kind) {
    case 'Deployment':
    case 'Job':
    case 'DaemonSet':
    case 'StatefulSet':
      return at(o, 'spec', 'template', 'spec') as PodSpecLike | undefined;
    case 'CronJob':
      return at(o, 'spec', 'jobTemplate', 'spec', 'template', 'spec') as PodSpecLike | undefined;
    default:
      return undefined;
  }
}

export function podTemplateMeta(o: Rendered): { labels?: Record<string, string>; annotations?: Record<string, string> } | undefined {
  const path = o.kind === 'CronJob' ? ['spec', 'jobTemplate', 'spec', 'template', 'metadata'] : ['spec', 'template', 'metadata'];
  return at(o, ...path) as { labels?: Record<string, string> } | undefined;
}

/** The value of `--flag=value` (or `--flag value`) in a container's args. */
export function flag(c: ContainerLike, name: string): string | undefined {
  const args = [...(c.command ?? []), ...(c.args ?? [])];
  for (let i = 0; i < args.length; i++) {
    const a = args[i] ?? '';
    if (a.startsWith(`--${name}=`)) return a.slice(name.length + 3);
    if (a === `--${name}`) return args[i + 1];
  }
  return undefined;
}

/**
 * A container's args and env as the kubelet gives them: downward-API fields simulated for a pod
 * of that name in that namespace, `$(VAR)` references expanded.
 */
export function containerArgs(c: ContainerLike, pod: { name: string; namespace: string }): { args: string[]; env: Record<string, string> } {
  const env: Record<string, string> = {};
  for (const e of (c['env'] as { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[] | undefined) ?? []) {
    const field = e.valueFrom?.fieldRef?.fieldPath;
    env[e.name] = e.value ?? (field === 'metadata.name' ? pod.name : field === 'metadata.namespace' ? pod.namespace : '');
  }
  const args = (c.args ?? []).map((a) => a.replace(/\$\(([A-Z_][A-Z0-9_]*)\)/g, (m, v: string) => env[v] ?? m));
  return { args, env };
}
