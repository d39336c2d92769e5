/**
 * Renders the Helm chart (deploy/helm/multus-proxy) with the helm binary that scripts/setup.sh
 * builds, and maps its objects onto the kustomize install's for the parity test.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import { requireBinary } from '../harness/controlplane.js';
import { DEPLOY, type Rendered } from './kustomize.js';

export const CHART = join(DEPLOY, 'helm', 'multus-proxy');
/** The Kubernetes version of the real node; the chart requires >= 1.28. */
export const KUBE_VERSION = '1.34.4';
export const RELEASE = 'multus-proxy';
export const NAMESPACE = 'multus-proxy-system';

export function helmBinary(): string {
  return requireBinary('helm');
}

/** `helm <args>`; a helm error fails with its own message. */
export async function helm(args: readonly string[]): Promise<{ stdout: string; stderr: string }> {
  try {
    return await promisify(execFile)(helmBinary(), [...args], { maxBuffer: 16 * 1024 * 1024 });
  } catch (e) {
    const err = e as Error & { stderr?: string; stdout?: string };
    throw new Error(`helm ${args.join(' ')} failed: ${err.stderr ?? ''}${err.stdout ?? ''}${err.message}`, { cause: e });
  }
}

/** `helm template` of the chart with these `--set` values, as text. */
export async function templateText(set: readonly string[], revision?: number): Promise<string> {
  const args = ['template', RELEASE, CHART, '--namespace', NAMESPACE, '--kube-version', KUBE_VERSION];
  for (const s of set) args.push('--set', s);
  const { stdout } = await helm(args);
  // `helm template` always renders revision 1; the Job's name carries it.
  return revision === undefined ? stdout : stdout.replace(/multus-proxy-certs-1\b/g, `multus-proxy-certs-${revision}`);
}

export async function template(set: readonly string[]): Promise<Rendered[]> {
  return loadAll(await templateText(set)).filter((o): o is Rendered => typeof o === 'object' && o !== null);
}

/** Labels Helm adds to every object; the kustomize install has none of them. */
const HELM_LABELS = ['helm.sh/chart', 'app.kubernetes.io/instance', 'app.kubernetes.io/version'];

export function isHook(o: Rendered): boolean {
  return o.metadata?.annotations?.['helm.sh/hook'] !== undefined;
}

/**
 * The chart's object as the kustomize install would have it: Helm's own labels dropped, and the
 * per-revision certificate Job named as kustomize names it.
 */
export function asKustomize(o: Rendered): Rendered {
  const copy = structuredClone(o);
  const labels = copy.metadata?.labels;
  if (labels !== undefined) {
    for (const k of HELM_LABELS) delete labels[k];
    if (labels['app.kubernetes.io/managed-by'] === 'Helm') delete labels['app.kubernetes.io/managed-by'];
  }
  if (copy.kind === 'Job' && copy.metadata?.name?.startsWith('multus-proxy-certs-') === true) copy.metadata.name = 'multus-proxy-certs';
  return copy;
}
