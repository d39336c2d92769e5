/**
 * net-service-controller's sample on the real node: a Deployment in `default` attaching
 * `networks/core` with interface name `core`, and a NetService `corens` with `netAttachDef: core`,
 * resolved by name through CoreDNS to the pods' `core` addresses. multus-proxy is installed with
 * the NetService component on top of the install in place (docs/migration.md, step 2).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { dump } from 'js-yaml';
import type { RealNode } from '../harness/node.js';
import { createNamespace, net1Addresses, pods } from './cluster.js';
import { SERVICE_NAMESPACES_ANNOTATION } from '../../src/keys.js';

const REPO = resolve(import.meta.dirname, '..', '..');

/** An overlay of the bootstrap install plus the NetService component, in the node's folder. */
export function netServiceOverlay(node: RealNode): string {
  const dir = join(node.dir, 'netservice-install');
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'kustomization.yaml'),
    // Relative: kustomize refuses absolute roots (and needs LoadRestrictionsNone to leave this folder).
    dump({ resources: [relative(dir, join(REPO, 'deploy', 'overlays', 'bootstrap'))], components: [relative(dir, join(REPO, 'deploy', 'components', 'netservice'))] }),
  );
  return dir;
}

export const buildOverlay = (dir: string): string => `kustomize build --load-restrictor LoadRestrictionsNone ${dir}`;

export interface NetServiceObservations {
  core: string[];
  eth0: string[];
  answer: string[];
  ready: string;
}

export async function runNetService(node: RealNode): Promise<NetServiceObservations> {
  const overlay = netServiceOverlay(node);
  await node.sh(`${buildOverlay(overlay)} | kubectl apply -f -`);
  await node.wait('crd/netservices.svcctl.metaswitch.com', 'condition=Established', { timeoutMs: 60_000 });
  // The component adds --netservices=true to the controller: wait for that rollout.
  await node.kubectl(['rollout', 'status', '-n', 'multus-proxy-system', 'deployment/multus-proxy-controller', '--timeout=180s'], { timeoutMs: 190_000 });
  await createNamespace(node, 'networks', false);
  const nad = {
    apiVersion: 'k8s.cni.cncf.io/v1',
    kind: 'NetworkAttachmentDefinition',
    // Its owner shares it with the NetService's namespace (docs/migration.md, "Another namespace's NAD").
    metadata: { name: 'core', namespace: 'networks', annotations: { [SERVICE_NAMESPACES_ANNOTATION]: 'default' } },
    spec: { config: JSON.stringify({ cniVersion: '0.3.1', type: 'macvlan', master: 'ens4', mode: 'bridge', ipam: { type: 'whereabouts', range: '10.3.3.0/24' } }) },
  };
  const deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'utils', namespace: 'default' },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: 'utils' } },
      template: {
        metadata: { labels: { app: 'utils' }, annotations: { 'k8s.v1.cni.cncf.io/networks': '[{"name": "core", "namespace": "networks", "interface": "core"}]' } },
        spec: { containers: [{ name: 'utils', image: 'ghcr.io/redhat-nfvpe/multus-service-demo:fedora-tools' }] },
      },
    },
  };
  const netService = {
    apiVersion: 'svcctl.metaswitch.com/v1alpha1',
    kind: 'NetService',
    metadata: { name: 'corens', namespace: 'default' },
    spec: { netAttachDef: 'core', selector: { app: 'utils' } },
  };
  await node.apply([nad, deployment, netService].map((o) => dump(o)).join('---\n'));
  await node.wait('deployment/utils', 'condition=Available', { namespace: 'default', timeoutMs: 180_000 });
  const ps = await pods(node, 'default', 'app=utils');
  const core = ps.map((p) => net1Addresses(p, 'core')[0] ?? '').sort();
  const eth0 = ps.flatMap((p) => (p.status?.podIPs ?? []).map((x) => x.ip));
  const client = ps[0]?.metadata?.name ?? '';
  let answer: string[] = [];
  for (let i = 0; i < 60; i++) {
    const r = await node.exec('default', client, ['dig', '+short', 'corens.default.svc.cluster.local']);
    answer = r.stdout.trim().split('\n').filter(Boolean).sort();
    if (JSON.stringify(answer) === JSON.stringify(core)) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  const ready = await node.kubectl(['get', 'netservice', '-n', 'default', 'corens', '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}']);
  await node.kubectl(['delete', '-n', 'default', 'netservice/corens', 'deployment/utils', '--wait=true', '--timeout=120s'], { timeoutMs: 130_000 });
  await node.kubectl(['delete', 'namespace', 'networks', '--wait=true', '--timeout=120s'], { timeoutMs: 130_000 });
  return { core, eth0, answer, ready };
}
