/**
 * The multus-service blog scenario on the real node, with the blog's four files applied unchanged
 * (test/node/blog/) into a namespace labelled `multus-proxy-injection=enabled`, the only addition.
 * `test/node/realnode.test.ts` asserts the observations; `npm run demo:node` prints them. Both run
 * this one module.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { RealNode } from '../harness/node.js';
import { arrivals, blogFile, CLIENT, curlBurst, net1Addresses, pod, pods, SERVICE, sliceAddresses } from './cluster.js';
import { sidecarRules } from './rules.js';
import { INJECTION_ENABLED, INJECTION_LABEL, SIDECAR_CONTAINER_NAME } from '../../src/keys.js';

export interface Reporter {
  step(title: string): void;
  info(text: string): void;
}

export const URL = `${SERVICE}.default.svc.cluster.local`;

export interface BlogObservations {
  /** nginx pod name -> its net1 address. */
  backends: Record<string, string>;
  sliceAddresses: string[];
  clientNet1: string;
  /** The client pod's init containers as (name, restartPolicy): the native sidecar is one. */
  clientInitContainers: { name: string; restartPolicy?: string }[];
  clientContainers: string[];
  sidecarRules: string[];
  /** 20 curls by name: "ok" or "fail:<code>". */
  curls: string[];
  /** Requests from the client's net1 address per backend during the 20 curls. */
  answeredBy: Record<string, number>;
  /** Arrivals during the 20 curls whose source was not the client's net1 address. */
  otherSources: string[];
  /** Host nat rules (kube-proxy's) naming the Service. */
  kubeProxyRules: string[];
  scaled: { pod: string; address: string; readyToAnswerMs: number; tries: number };
  deleted: { pod: string; address: string; inSliceAfter: boolean; curls: string[]; answeredBy: Record<string, number> };
}

/** Polls f every 200 ms until it returns a value; a throw counts as "not yet" and is named on timeout. */
export async function waitFor<T>(what: string, timeoutMs: number, f: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await f();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await delay(200);
  }
}

const ready = (p: { status?: { conditions?: { type: string; status: string }[] } }): boolean => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;

/** Counts of arrivals from `source` per backend since `before` (line counts per pod). */
async function newArrivals(node: RealNode, ns: string, names: string[], before: Record<string, number>): Promise<{ by: Record<string, { from: string }[]> }> {
  const by: Record<string, { from: string }[]> = {};
  for (const n of names) by[n] = (await arrivals(node, ns, n)).slice(before[n] ?? 0);
  return { by };
}

async function arrivalCounts(node: RealNode, ns: string, names: string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const n of names) out[n] = (await arrivals(node, ns, n)).length;
  return out;
}

export async function runBlog(node: RealNode, r: Reporter): Promise<BlogObservations> {
  const ns = 'default';
  const selector = `app=${SERVICE}`;
  r.step(`label namespace ${ns} ${INJECTION_LABEL}=${INJECTION_ENABLED}, then kubectl apply the blog's four files unchanged`);
  await node.kubectl(['label', 'namespace', ns, `${INJECTION_LABEL}=${INJECTION_ENABLED}`, '--overwrite']);
  for (const f of ['net-attach.yml', 'service.yml', 'deployment.yml', 'pod.yml'] as const) r.info((await node.apply(blogFile(f), ns)).trim());
  await node.wait(`deployment/${SERVICE}`, 'condition=Available', { namespace: ns, timeoutMs: 180_000 });
  await node.wait(`pod/${CLIENT}`, 'condition=Ready', { namespace: ns, timeoutMs: 180_000 });

  r.step('pods and their net1 addresses (Multus network-status, whereabouts IPAM)');
  const backends: Record<string, string> = {};
  for (const p of await pods(node, ns, selector)) backends[p.metadata?.name ?? ''] = net1Addresses(p)[0] ?? '';
  const client = await pod(node, ns, CLIENT);
  const clientNet1 = net1Addresses(client)[0] ?? '';
  for (const [n, a] of Object.entries(backends)) r.info(`${n.padEnd(44)} net1 ${a}`);
  r.info(`${CLIENT.padEnd(44)} net1 ${clientNet1}`);

  r.step("the controller's EndpointSlice");
  const want = Object.values(backends).sort();
  const slice = await waitFor('the slice to list the nginx net1 addresses', 20_000, async () => {
    const a = await sliceAddresses(node, ns, SERVICE);
    return JSON.stringify(a) === JSON.stringify(want) ? a : undefined;
  }).catch(async () => sliceAddresses(node, ns, SERVICE));
  r.info(`ready addresses: ${slice.join(', ')}`);

  r.step('the client pod: native sidecar injected by the webhook');
  const clientInitContainers = (client.spec?.initContainers ?? []).map((c) => ({ name: c.name, restartPolicy: c.restartPolicy }));
  const clientContainers = (client.spec?.containers ?? []).map((c) => c.name);
  r.info(`initContainers: ${clientInitContainers.map((c) => `${c.name} (restartPolicy ${c.restartPolicy ?? '-'})`).join(', ') || 'none'}`);
  const sidecar = clientInitContainers.some((c) => c.name === SIDECAR_CONTAINER_NAME);
  const sidecarRuleLines = (sidecar ? await sidecarRules(node, ns, CLIENT) : []).filter((l) => l.includes('MPX'));
  r.step("the sidecar's nat rules in the client pod");
  for (const l of sidecarRuleLines) r.info(l);

  r.step(`20 × curl ${URL} from the client container`);
  const names = Object.keys(backends);
  const before = await arrivalCounts(node, ns, names);
  const curls = await curlBurst(node, ns, CLIENT, URL, 20);
  const { by } = await newArrivals(node, ns, names, before);
  const answeredBy: Record<string, number> = {};
  const otherSources: string[] = [];
  for (const n of names) {
    answeredBy[n] = (by[n] ?? []).filter((a) => a.from === clientNet1).length;
    otherSources.push(...(by[n] ?? []).filter((a) => a.from !== clientNet1).map((a) => `${n} <- ${a.from}`));
  }
  r.info(`results: ${curls.filter((c) => c === 'ok').length}/20 ok`);
  for (const n of names) r.info(`answered by ${n} (${backends[n]}): ${answeredBy[n]} (nginx log: ${clientNet1} -> ${backends[n]}:80)`);

  r.step('kube-proxy leaves the Service alone (host iptables-save -t nat)');
  const hostNat = await node.sh('iptables-save -t nat');
  const kubeProxyRules = hostNat.split('\n').filter((l) => l.includes(`${ns}/${SERVICE}`));
  r.info(kubeProxyRules.length === 0 ? `no KUBE-SVC rule names ${ns}/${SERVICE}` : kubeProxyRules.join('\n'));

  r.step('scale to 3: the new replica answers');
  await node.kubectl(['scale', '-n', ns, `deployment/${SERVICE}`, '--replicas=3']);
  const newPod = await waitFor('a third ready nginx pod', 120_000, async () => {
    const p = (await pods(node, ns, selector)).find((x) => !names.includes(x.metadata?.name ?? '') && ready(x) && net1Addresses(x).length > 0);
    return p;
  });
  const readyAt = Date.now();
  const newName = newPod.metadata?.name ?? '';
  const newAddress = net1Addresses(newPod)[0] ?? '';
  let tries = 0;
  let answeredAt = 0;
  while (Date.now() - readyAt < 30_000) {
    const sent = Date.now();
    tries++;
    await curlBurst(node, ns, CLIENT, URL, 6);
    if ((await arrivals(node, ns, newName)).some((a) => a.from === clientNet1)) {
      answeredAt = sent;
      break;
    }
  }
  const readyToAnswerMs = answeredAt ? answeredAt - readyAt : -1;
  r.info(`${newName} (${newAddress}) Ready; first answered a burst sent ${readyToAnswerMs} ms later (${tries} burst(s) of 6)`);

  r.step('delete a pod: it leaves the rotation');
  const victim = names[0] ?? '';
  const victimAddress = backends[victim] ?? '';
  await node.kubectl(['delete', 'pod', '-n', ns, victim, '--wait=true', '--timeout=120s'], { timeoutMs: 130_000 });
  const live = await waitFor('the replacement to be ready', 120_000, async () => {
    const ps = await pods(node, ns, selector);
    return ps.length === 3 && ps.every(ready) && ps.every((p) => p.metadata?.deletionTimestamp === undefined) ? ps.map((p) => p.metadata?.name ?? '') : undefined;
  });
  // whereabouts hands the freed address to the replacement at once, so "in the slice" is judged by pod.
  const sliceNow = await sliceAddresses(node, ns, SERVICE);
  const liveAddresses = (await pods(node, ns, selector)).map((p) => net1Addresses(p)[0] ?? '');
  const inSliceAfter = sliceNow.includes(victimAddress) && !liveAddresses.includes(victimAddress);
  await delay(1_500); // the sidecar follows the slice within ~1-1.5 s (docs/node-harness.md)
  const before2 = await arrivalCounts(node, ns, live);
  const curls2 = await curlBurst(node, ns, CLIENT, URL, 20);
  const after2 = await newArrivals(node, ns, live, before2);
  const answeredBy2: Record<string, number> = {};
  for (const n of live) answeredBy2[n] = (after2.by[n] ?? []).filter((a) => a.from === clientNet1).length;
  r.info(`${victim} (${victimAddress}) deleted; 20 curls: ${curls2.filter((c) => c === 'ok').length} ok, answered by ${JSON.stringify(answeredBy2)}`);

  return {
    backends,
    sliceAddresses: slice,
    clientNet1,
    clientInitContainers,
    clientContainers,
    sidecarRules: sidecarRuleLines,
    curls,
    answeredBy,
    otherSources,
    kubeProxyRules,
    scaled: { pod: newName, address: newAddress, readyToAnswerMs, tries },
    deleted: { pod: victim, address: victimAddress, inSliceAfter, curls: curls2, answeredBy: answeredBy2 },
  };
}

/** Removes the blog's objects (and the namespace label) again. */
export async function cleanupBlog(node: RealNode): Promise<void> {
  for (const f of ['pod.yml', 'deployment.yml', 'service.yml', 'net-attach.yml'] as const) {
    await node.kubectl(['delete', '-n', 'default', '--ignore-not-found', '--wait=true', '--timeout=120s', '-f', '-'], { input: blogFile(f), timeoutMs: 130_000 });
  }
  await node.kubectl(['label', 'namespace', 'default', `${INJECTION_LABEL}-`]);
}
