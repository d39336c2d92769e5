/**
 * `npm run demo:node`: the multus-service blog scenario on a real single-node Kubernetes on this
 * machine (test/harness/node.ts): multus-proxy installed from its own image as the README says,
 * then the blog's four files applied unchanged into a namespace labelled for injection. It prints
 * the pods, the slice, the sidecar's rules, 20 curls by name with the answering backend, the
 * scale-up and a pod deletion, then tears the node down (Ctrl-C too).
 *
 * Needs root and what scripts/setup.sh builds (the first setup takes a while; see the README).
 * test/node/realnode.test.ts asserts what this prints: both run test/node/blog.ts.
 *
 * `npm run demo:node -- --nodes 2`: the blog across two real nodes (one replica per node, a client
 * on each node), as test/node/twonode.test.ts asserts it (both run test/node/twonode.ts).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { binDir } from '../test/harness/controlplane.js';
import { checkPrerequisites, startNode, type RealNode } from '../test/harness/node.js';
import { installBootstrap } from '../test/node/install.js';
import { runBlog, type BlogObservations } from '../test/node/blog.js';
import { runTwoNodeBlog, type TwoNodeBlog } from '../test/node/twonode.js';

function summary(o: BlogObservations): string[] {
  return [
    `backends (net1):         ${Object.entries(o.backends)
      .map(([n, a]) => `${n}=${a}`)
      .join(' ')}`,
    `slice (ready):           ${o.sliceAddresses.join(', ')}`,
    `client net1:             ${o.clientNet1}; native sidecar: ${o.clientInitContainers.some((c) => c.restartPolicy === 'Always') ? 'yes' : 'NO'}`,
    `20 curls by name:        ${o.curls.filter((c) => c === 'ok').length} ok; answered by ${Object.entries(o.answeredBy)
      .map(([n, c]) => `${n}=${c}`)
      .join(' ')}`,
    `kube-proxy rules for it: ${o.kubeProxyRules.length}`,
    `scale to 3:              ${o.scaled.pod} answered ${o.scaled.readyToAnswerMs} ms after Ready`,
    `deleted ${o.deleted.pod}: 20 curls ${o.deleted.curls.filter((c) => c === 'ok').length} ok`,
  ];
}

function twoNodeSummary(o: TwoNodeBlog): string[] {
  return [
    `backends (node, net1):   ${Object.entries(o.backends)
      .map(([n, b]) => `${n} on ${b.node}=${b.net1}`)
      .join(' ')}`,
    `slice (ready):           ${o.slice.join(', ')}`,
    ...o.clients.map(
      (c) =>
        `client on ${c.node.padEnd(10)}    ${c.pod} (net1 ${c.net1}): 20 curls by name ${c.curls.filter((x) => x === 'ok').length} ok; answered by ${Object.entries(c.answeredBy)
          .map(([n, k]) => `${n}=${k}`)
          .join(' ')}`,
    ),
  ];
}

/** `--nodes 2` (or `--nodes=2`): the blog across two real nodes (test/harness/node2.ts). */
function nodesArg(argv: string[]): 1 | 2 {
  const i = argv.findIndex((a) => a === '--nodes' || a.startsWith('--nodes='));
  if (i < 0) return 1;
  const v = argv[i]?.includes('=') ? argv[i]?.split('=')[1] : argv[i + 1];
  if (v === '1' || v === '2') return Number(v) as 1 | 2;
  throw new Error(`--nodes ${String(v)}: the demo runs on 1 or 2 real nodes (npm run demo:node -- --nodes 2)`);
}

async function main(): Promise<number> {
  let nodes: 1 | 2;
  try {
    nodes = nodesArg(process.argv.slice(2));
  } catch (e) {
    console.error((e as Error).message);
    return 2;
  }
  if (process.getuid?.() !== 0) {
    console.error('The real-node demo runs kubelet, containerd and iptables on this machine: run it as root.');
    return 1;
  }
  try {
    checkPrerequisites();
  } catch (e) {
    console.error((e as Error).message);
    if (!existsSync(join(binDir(), 'kubelet'))) console.error('First time? `bash scripts/setup.sh` builds everything once (see README, "Demos").');
    return 1;
  }
  const started = Date.now();
  let n = 0;
  let node: RealNode | undefined;
  process.once('SIGINT', () => {
    console.log('\nInterrupted: tearing the node down ...');
    void node?.stop().finally(() => process.exit(130));
  });
  try {
    console.log(
      `\n[${++n}] start a real node (etcd, kube-apiserver, controller-manager, scheduler, containerd, kubelet, kube-proxy, Multus, whereabouts, CoreDNS, local registry)${nodes === 2 ? ', then a second one (own network and mount namespaces, cgroup root, containerd, kubelet, kube-proxy) on the same control plane' : ''}`,
    );
    node = await startNode({ log: (m) => console.log(`    ${m}`), nodes });
    console.log(`\n[${++n}] install multus-proxy: kustomize build deploy/overlays/bootstrap | kubectl apply -f -`);
    await installBootstrap(node);
    console.log(`    ${(await node.kubectl(['get', 'pods', '-n', 'multus-proxy-system'])).trim().split('\n').join('\n    ')}`);
    const reporter = {
      step: (t: string) => console.log(`\n[${++n}] ${t}`),
      info: (t: string) => console.log(`    ${t}`),
    };
    const lines = nodes === 2 ? twoNodeSummary(await runTwoNodeBlog(node, reporter)) : summary(await runBlog(node, reporter));
    console.log(`\n[${++n}] pods now`);
    console.log(`    ${(await node.kubectl(['get', 'pods', '-o', 'wide'])).trim().split('\n').join('\n    ')}`);
    console.log(`\nSummary (${((Date.now() - started) / 1000).toFixed(0)} s):`);
    for (const line of lines) console.log(`  ${line}`);
    return 0;
  } catch (e) {
    console.error(`\nThe demo failed: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  } finally {
    if (node) {
      console.log('\ntearing the node down ...');
      const left = await node.stop();
      console.log(left.length === 0 ? 'the host is as it was.' : `left behind: ${left.join('; ')}`);
    }
  }
}

process.exitCode = await main();
