/**
 * Installing and uninstalling multus-proxy on the real node exactly as the README says, with the
 * image built from the project's Dockerfile (served by the node's local registry).
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { RealNode } from '../harness/node.js';
import { INSTALL_NAMESPACE } from '../../src/keys.js';

/** `kustomize build deploy/overlays/bootstrap | kubectl apply -f -` (README, without cert-manager). */
export const INSTALL_BOOTSTRAP = 'kustomize build deploy/overlays/bootstrap | kubectl apply -f -';
/** The default install (README): needs cert-manager. */
export const INSTALL_DEFAULT = 'kubectl apply -k deploy/';
const REPO = resolve(import.meta.dirname, '..', '..');

/**
 * The uninstall commands exactly as docs/operate.md ("Uninstall", linked from the README) gives
 * them, read from its sh block so the test and the document cannot drift. For the bootstrap
 * install, the commented alternative line replaces `kubectl delete ... -k deploy/`.
 */
export function uninstallCommands(install: 'bootstrap' | 'default' | { deleteInstall: string }): string[] {
  const doc = readFileSync(join(REPO, 'docs', 'operate.md'), 'utf8');
  const block = /## Uninstall\n\n```sh\n([\s\S]*?)```/.exec(doc)?.[1];
  if (!block) throw new Error('docs/operate.md has no "## Uninstall" sh block');
  const lines = block.split('\n').map((l) => l.trim());
  const bootstrap = lines.find((l) => /^#\s+kustomize build deploy\/overlays\/bootstrap \| kubectl delete/.test(l))?.replace(/^#\s+/, '');
  if (!bootstrap) throw new Error('docs/operate.md: no bootstrap alternative in the Uninstall block');
  return lines.filter((l) => l !== '' && !l.startsWith('#')).map((l) => (/ -k deploy\/?$/.test(l) && install !== 'default' ? (install === 'bootstrap' ? bootstrap : install.deleteInstall) : l));
}

export async function waitInstalled(node: RealNode, opts: { certsJob: boolean }): Promise<void> {
  if (opts.certsJob) await node.wait('job/multus-proxy-certs', 'condition=Complete', { namespace: INSTALL_NAMESPACE, timeoutMs: 180_000 });
  await node.wait('deployment/multus-proxy-controller', 'condition=Available', { namespace: INSTALL_NAMESPACE, timeoutMs: 180_000 });
  await node.wait('deployment/multus-proxy-webhook', 'condition=Available', { namespace: INSTALL_NAMESPACE, timeoutMs: 180_000 });
}

export async function installBootstrap(node: RealNode): Promise<void> {
  await node.sh(INSTALL_BOOTSTRAP);
  await waitInstalled(node, { certsJob: true });
}

/** `deleteInstall`: the line that deletes another overlay than the two the document names. */
export async function uninstall(node: RealNode, install: 'bootstrap' | 'default' | { deleteInstall: string }): Promise<void> {
  for (const c of uninstallCommands(install)) await node.sh(c, { timeoutMs: 300_000 });
}

/** Everything of the project still in the cluster, as "kind namespace/name" lines. */
export async function projectLeftovers(node: RealNode): Promise<string[]> {
  const kinds = [
    'mutatingwebhookconfigurations',
    'validatingwebhookconfigurations',
    'clusterroles',
    'clusterrolebindings',
    'roles',
    'rolebindings',
    'serviceaccounts',
    'configmaps',
    'secrets',
    'deployments',
    'daemonsets',
    'jobs',
    'cronjobs',
    'services',
    'endpointslices',
    'customresourcedefinitions',
    'namespaces',
  ];
  const out: string[] = [];
  const list = async (kind: string, selector?: string): Promise<{ metadata: { name: string; namespace?: string; labels?: Record<string, string> } }[]> => {
    const r = await node.kubectlResult(['get', kind, '-A', '-o', 'json', ...(selector ? ['-l', selector] : [])], { allowFail: true });
    if (r.code !== 0) return [];
    return (JSON.parse(r.stdout) as { items: { metadata: { name: string; namespace?: string; labels?: Record<string, string> } }[] }).items;
  };
  for (const kind of kinds) {
    for (const o of await list(kind)) {
      const m = o.metadata;
      const labels = m.labels ?? {};
      const ours =
        m.name.startsWith('multus-proxy') ||
        m.namespace === INSTALL_NAMESPACE ||
        labels['app.kubernetes.io/part-of'] === 'multus-proxy' ||
        labels['app.kubernetes.io/managed-by'] === 'multus-proxy-controller' ||
        labels['endpointslice.kubernetes.io/managed-by'] === 'multus-proxy-controller' ||
        (kind === 'customresourcedefinitions' && m.name.endsWith('multus-proxy.k8s.cni.cncf.io'));
      if (ours) out.push(`${kind} ${m.namespace ? `${m.namespace}/` : ''}${m.name}`);
    }
  }
  return out.sort();
}
