/**
 * Feasibility check for two real nodes (not part of the suite): `startNode({ nodes: 2 })`, one pod pinned
 * to each node with net1 from macvlan + whereabouts, then the pod on the first node curls the
 * nginx on the second over net1 and pings it. Prints each step's time and what teardown left.
 *
 *   node --import tsx scripts/two-node-spike.ts [--keep-ms N]
 */
import { dump } from 'js-yaml';
import { startNode, type RealNode } from '../test/harness/node.js';
import { NODE, NODE2 } from '../test/harness/node-config.js';
import { blogFile, createNamespace, net1Addresses, pod } from '../test/node/cluster.js';

const NS = 'spike';
const log = (m: string): void => console.log(`# ${m}`);

function pinned(name: string, nodeName: string, image: string, command?: string[]): string {
  return dump({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, annotations: { 'k8s.v1.cni.cncf.io/networks': 'macvlan1' } },
    spec: { nodeName, terminationGracePeriodSeconds: 1, containers: [{ name, image, ...(command ? { command } : {}) }] },
  });
}

async function main(): Promise<number> {
  let node: RealNode | undefined;
  const keep = Number(process.argv[process.argv.indexOf('--keep-ms') + 1] ?? 0) || 0;
  try {
    node = await startNode({ log, nodes: 2 });
    log(`first node ${node.startMs} ms, second ${node.second?.startMs} ms`);
    log((await node.kubectl(['get', 'nodes', '-o', 'wide'])).trim());
    await createNamespace(node, NS, false);
    await node.apply(blogFile('net-attach.yml'), NS);
    await node.apply(pinned('client1', NODE.name, 'ghcr.io/redhat-nfvpe/multus-service-demo:fedora-tools', ['/sbin/init']), NS);
    await node.apply(pinned('web2', NODE2.name, 'ghcr.io/redhat-nfvpe/multus-service-demo:fedora-nginx'), NS);
    const t = Date.now();
    await node.wait('pod/web2', 'condition=Ready', { namespace: NS, timeoutMs: 180_000 });
    await node.wait('pod/client1', 'condition=Ready', { namespace: NS, timeoutMs: 180_000 });
    log(`both pods Ready in ${Date.now() - t} ms`);
    log((await node.kubectl(['get', 'pods', '-n', NS, '-o', 'wide'])).trim());
    const web2 = await pod(node, NS, 'web2');
    const client1 = await pod(node, NS, 'client1');
    const a2 = net1Addresses(web2)[0] ?? '';
    log(`web2 on ${web2.spec?.nodeName} net1 ${a2} eth0 ${web2.status?.podIP}; client1 on ${client1.spec?.nodeName} net1 ${net1Addresses(client1)[0]}`);
    log(`node2 containerd sandboxes: ${(await node.second?.crictl(['pods', '-q']))?.trim().split('\n').length}`);
    log(`node2 netns links: ${(await node.second?.inNetns(['ip', '-br', 'link']))?.trim().replace(/\n/g, ' | ')}`);
    const ping = await node.exec(NS, 'client1', ['ping', '-c', '3', '-W', '2', a2]);
    log(`ping net1 ${a2} from node 1: code ${ping.code} ${ping.stdout.split('\n').slice(-3).join(' ')}`);
    const curl = await node.exec(NS, 'client1', ['curl', '-s', '-m', '5', `http://${a2}/`]);
    log(`curl net1 from node 1: code ${curl.code} ${curl.stdout.slice(0, 80).replace(/\n/g, ' ')}`);
    const curlEth0 = await node.exec(NS, 'client1', ['curl', '-s', '-m', '5', '-o', '/dev/null', '-w', '%{http_code}', `http://${web2.status?.podIP}/`]);
    log(`curl eth0 from node 1: code ${curlEth0.code} http ${curlEth0.stdout}`);
    const dns = await node.exec(NS, 'web2', ['getent', 'hosts', 'kubernetes.default.svc.cluster.local']);
    log(`DNS from node 2's pod: code ${dns.code} ${dns.stdout.trim()} ${dns.stderr.trim()}`);
    const logs = await node.kubectl(['logs', '-n', NS, 'web2']);
    log(`node 2 logs through its kubelet: ${logs.trim().split('\n').slice(-2).join(' | ')}`);
    if (keep) await new Promise((r) => setTimeout(r, keep));
    return ping.code === 0 && curl.code === 0 ? 0 : 1;
  } catch (e) {
    console.error((e as Error).message);
    return 1;
  } finally {
    const left = (await node?.stop()) ?? [];
    log(`teardown left: ${left.length === 0 ? 'nothing' : left.join('; ')}`);
  }
}

process.exitCode = await main();
