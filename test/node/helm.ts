/**
 * The Helm chart's whole life on the real node, with the real helm (scripts/setup.sh builds it):
 * the chart packaged and pushed as an OCI artifact to the node's local registry, installed from
 * there (bootstrap certificates, node agent on), the blog scenario on it, `helm upgrade` to a new
 * image tag while the blog client sends ~10 requests a second (none may fail), and `helm
 * uninstall` (its pre-delete hook runs the node agent's cleanup) leaving nothing of the project in
 * the cluster or on the host. It runs in the real-node suite once the kustomize installs are
 * uninstalled, on the same node (a node of its own cost a bring-up and a teardown, about a minute).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import type { RealNode } from '../harness/node.js';
import { NODE } from '../harness/node-config.js';
import { INSTALL_NAMESPACE } from '../../src/keys.js';
import { CHART } from '../deploy/helm.js';
import { projectLeftovers } from './install.js';
import { cleanupBlog, runBlog } from './blog.js';
import { startTraffic, until } from './tenant.js';
import { NODE_ADDRESS } from './nodeport.js';
import { NODE_AGENT_RULES_SH } from './rules.js';
import { NODE_ADDRESSES_ANNOTATION, NODE_PARENTS_ANNOTATION } from '../../src/keys.js';

const RELEASE = 'multus-proxy';
const REPO_PATH = `oci://${NODE.registry}/charts`;
const NEW_TAG = '0.1.0-upgrade';

/** OCI install, the blog scenario, an upgrade under load without a lost request, and an uninstall that leaves nothing; asserts as it goes. */
export async function runHelmLife(node: RealNode, log: (m: string) => void): Promise<void> {
  const home = join(node.dir, 'helm');
  /** helm with its caches and registry login inside the node's directory, never the user's. */
  const helm = (args: string): Promise<string> => node.sh(`HELM_CACHE_HOME=${home}/cache HELM_CONFIG_HOME=${home}/config HELM_DATA_HOME=${home}/data helm ${args}`, { timeoutMs: 600_000 });

  // Package and push the chart like a release pipeline; install from the registry like a user.
  await helm(`package ${CHART} -d ${node.dir}`);
  const pushed = await helm(`push ${node.dir}/multus-proxy-0.1.0.tgz ${REPO_PATH} --plain-http 2>&1`);
  assert.match(pushed, /Digest: sha256:/, pushed);
  // The new tag: the same image under another name in the registry (a manifest PUT), so the
  // upgrade rolls every pod of the release onto a new image reference.
  await node.sh(
    `set -e; m=http://${NODE.registry}/v2/library/multus-proxy/manifests; ` +
      `ct=$(curl -sfI -H 'Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json' $m/0.1.0 | tr -d '\\r' | sed -n 's/^[Cc]ontent-[Tt]ype: //p'); ` +
      `curl -sf -H "Accept: $ct" $m/0.1.0 -o ${node.dir}/manifest.json; curl -sf -X PUT -H "Content-Type: $ct" --data-binary @${node.dir}/manifest.json $m/${NEW_TAG}`,
  );

  let t0 = Date.now();
  await helm(
    `install ${RELEASE} ${REPO_PATH}/multus-proxy --version 0.1.0 --plain-http -n ${INSTALL_NAMESPACE} --create-namespace ` +
      `--set certificates.mode=bootstrap --set nodeAgent.enabled=true --wait --timeout 5m`,
  );
  const installMs = Date.now() - t0;
  log(`helm install from ${REPO_PATH} (--wait) in ${installMs} ms`);
  await node.wait('daemonset/multus-proxy-node', 'jsonpath={.status.numberReady}=1', { namespace: 'multus-proxy-node', timeoutMs: 180_000 });
  const status = await helm(`status ${RELEASE} -n ${INSTALL_NAMESPACE}`);
  assert.match(status, /STATUS: deployed/);
  assert.match(status, /deliberately leaves/, 'NOTES say what an uninstall leaves');

  const o = await runBlog(node, { step: (t) => log(t), info: (t) => log(`  ${t}`) });
  assert.deepEqual(o.curls, Array(20).fill('ok'), 'the blog scenario on the Helm install');
  assert.deepEqual(o.sliceAddresses, Object.values(o.backends).sort());
  // The admin gives the node its address and parent on the blog's network: the agent programs the
  // host (an interface holding the address, its chains), which the uninstall hook must remove.
  await node.kubectl(['annotate', 'node', NODE.name, '--overwrite', `${NODE_ADDRESSES_ANNOTATION}=default/macvlan1=${NODE_ADDRESS}/24`, `${NODE_PARENTS_ANNOTATION}=default/macvlan1=${NODE.parent}`]);
  // Chains of either back end: iptables' MPXN lines, or our nftables table's lines.
  const hostState = `(${NODE_AGENT_RULES_SH}) | grep -c . || true; ip -o link | grep -c -e mpxh -e mpxb || true; ip route show table all proto 242 | wc -l`;
  const programmed = await until('the node agent programs the host', 60_000, async () => {
    const [chains = 0, links = 0] = (await node.sh(hostState)).trim().split('\n').map(Number);
    return chains > 0 && links > 0 ? { chains, links } : undefined;
  });
  log(`node agent on the host: ${programmed.chains} MPXN lines, ${programmed.links} interface(s)`);

  // Upgrade to the new tag while the client curls its Service about 10 times a second.
  const trafficStart = Date.now();
  // 60 ms between requests plus the curl itself: about 10 a second.
  const traffic = startTraffic(node, 0.06);
  t0 = Date.now();
  await helm(`upgrade ${RELEASE} ${REPO_PATH}/multus-proxy --version 0.1.0 --plain-http -n ${INSTALL_NAMESPACE} --reuse-values --set image.tag=${NEW_TAG} --wait --timeout 5m`);
  const upgradeMs = Date.now() - t0;
  for (const d of ['multus-proxy-controller', 'multus-proxy-webhook']) {
    await node.sh(`kubectl -n ${INSTALL_NAMESPACE} rollout status deployment/${d} --timeout=180s`);
  }
  await node.sh('kubectl -n multus-proxy-node rollout status daemonset/multus-proxy-node --timeout=180s');
  const curls = await traffic.stop();
  const seconds = (Date.now() - trafficStart) / 1000;
  // Pods of the release that are not on their way out (rollout status returns while the old
  // ones still terminate).
  const live = (
    JSON.parse(await node.kubectl(['get', 'pods', '-n', INSTALL_NAMESPACE, '-o', 'json'])) as {
      items: { metadata: { name: string; deletionTimestamp?: string }; spec: { containers: { image: string }[] } }[];
    }
  ).items.filter((p) => p.metadata.deletionTimestamp === undefined && /^multus-proxy-(controller|webhook)-/.test(p.metadata.name));
  const images = live.map((p) => p.spec.containers[0]?.image ?? '').join(' ');
  log(
    `helm upgrade to ${NEW_TAG} (--wait) in ${upgradeMs} ms; ${curls.length} requests in ${seconds.toFixed(1)} s (${(curls.length / seconds).toFixed(1)}/s), ${curls.filter((c) => c !== 'ok').length} failed`,
  );
  assert.equal(live.length, 4, `2 controller and 2 webhook pods: ${live.map((p) => p.metadata.name).join(', ')}`);
  for (const i of images.split(' ')) assert.equal(i, `multus-proxy:${NEW_TAG}`, `every pod runs the new tag: ${images}`);
  // Paced at 10 req/s; a loaded 2-core node runs the pacer late, so the check is that load kept flowing (half the pace), not the rate.
  assert.ok(curls.length / seconds >= 5, `at least 5 of the paced 10 req/s: ${curls.length} in ${seconds.toFixed(1)} s`);
  assert.deepEqual(
    curls.filter((c) => c !== 'ok'),
    [],
    'no request lost during the upgrade',
  );

  await cleanupBlog(node);
  t0 = Date.now();
  const out = await helm(`uninstall ${RELEASE} -n ${INSTALL_NAMESPACE} --wait --timeout 10m`);
  log(`helm uninstall (pre-delete cleanup hook, --wait) in ${Date.now() - t0} ms: ${out.trim()}`);
  // Helm never deletes the namespace that --create-namespace made (docs/install.md says so); in
  // it only what Kubernetes puts into every namespace remains.
  assert.deepEqual(await projectLeftovers(node), [`configmaps ${INSTALL_NAMESPACE}/kube-root-ca.crt`, `namespaces ${INSTALL_NAMESPACE}`, `serviceaccounts ${INSTALL_NAMESPACE}/default`]);
  await node.kubectl(['delete', 'namespace', INSTALL_NAMESPACE, '--wait=true', '--timeout=120s'], { timeoutMs: 130_000 });
  assert.deepEqual(await projectLeftovers(node), [], 'nothing of the project left in the cluster');
  const host = await node.sh(hostState);
  assert.deepEqual(host.trim().split('\n'), ['0', '0', '0'], 'no chain, interface or route of the node agent on the host');
  // What the uninstall deliberately leaves: the admin's Node annotations (docs/install.md).
  for (const key of [NODE_ADDRESSES_ANNOTATION, NODE_PARENTS_ANNOTATION]) {
    assert.match(await node.kubectl(['get', 'node', NODE.name, '-o', `jsonpath={.metadata.annotations.${key.replace(/\./g, '\\.')}}`]), /default\/macvlan1=/, key);
  }
  await node.sh(`kubectl annotate node --all ${NODE_ADDRESSES_ANNOTATION}- ${NODE_PARENTS_ANNOTATION}-`);
}
