/**
 * `diagnose` on the real node, beside the blog scenario: the command as the
 * README shows it (`npm run -s diagnose -- ...` with the admin's kubeconfig), and as it runs in
 * the cluster from the project's image (`kubectl exec deploy/multus-proxy-controller -- node
 * /app/dist/controller.js diagnose ...`, with the controller's own ServiceAccount). The blog is
 * broken twice and restored each time:
 * - one nginx replica's network-status names another network (what a wrong `networks`
 *   annotation leaves): the Service's report lists that pod as missing with NetworkNotAttached;
 * - the Service's annotation names a NAD that does not exist (the webhook admits that with a
 *   warning): NadMissing, and once the controller withdrew the slice, NoReadyEndpoints, exit 1.
 */
import { execFile } from 'node:child_process';
import type { RealNode } from '../harness/node.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1Pod, V1Service } from '../../src/kube/types.js';
import type { PodReport, Report, ServiceReport } from '../../cmd/controller/diagnose/report.js';
import { INSTALL_NAMESPACE, NETWORK_STATUS_ANNOTATION, SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import { CLIENT, ROOT, SERVICE, pods, sliceAddresses } from './cluster.js';
import { until } from './tenant.js';

const NS = 'default';

export interface DiagnoseRun<R extends Report> {
  readonly code: number;
  readonly report: R | undefined;
  readonly stderr: string;
}

export interface DiagnoseObservations {
  /** The blog as it works: the Service and its client, from the README command. */
  readonly service: DiagnoseRun<ServiceReport>;
  readonly client: DiagnoseRun<PodReport>;
  /** The same Service diagnosed from inside the cluster with the image's bundle. */
  readonly inCluster: DiagnoseRun<ServiceReport>;
  /** One replica's network-status names another network. */
  readonly brokenPod: string;
  readonly podBroken: DiagnoseRun<ServiceReport>;
  /** The Service names a NAD that does not exist. */
  readonly annotationBroken: DiagnoseRun<ServiceReport>;
  /** Ready slice addresses before, and after both repairs. */
  readonly before: string[];
  readonly after: string[];
}

function parsed<R extends Report>(code: number, stdout: string, stderr: string): DiagnoseRun<R> {
  try {
    return { code, report: JSON.parse(stdout) as R, stderr };
  } catch {
    return { code, report: undefined, stderr: `${stderr}\n${stdout}` };
  }
}

/** A command line as a user types it in the repository, with the admin's kubeconfig: exit status and the JSON report. */
function run<R extends Report>(node: RealNode, command: string): Promise<DiagnoseRun<R>> {
  return new Promise((done) => {
    execFile('sh', ['-c', command], { cwd: ROOT, env: { ...process.env, KUBECONFIG: node.kubeconfigPath }, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 }, (e, stdout, stderr) => {
      done(parsed<R>(e === null ? 0 : typeof e.code === 'number' ? e.code : -1, stdout, stderr));
    });
  });
}

const readme = (args: string): string => `npm run -s diagnose -- ${args} -o json`;

export async function runDiagnoseOnNode(node: RealNode, log: (m: string) => void): Promise<DiagnoseObservations> {
  const before = await sliceAddresses(node, NS, SERVICE);
  log(`blog slice before: ${before.join(' ')}`);
  const service = await run<ServiceReport>(node, readme(`service ${NS}/${SERVICE}`));
  const client = await run<PodReport>(node, readme(`pod ${CLIENT} -n ${NS}`));
  const exec = await node.kubectlResult(
    ['-n', INSTALL_NAMESPACE, 'exec', 'deploy/multus-proxy-controller', '--', 'node', '/app/dist/controller.js', 'diagnose', 'service', `${NS}/${SERVICE}`, '-o', 'json'],
    { allowFail: true },
  );
  const inCluster = parsed<ServiceReport>(exec.code, exec.stdout, exec.stderr);
  log(`healthy: service exit ${service.code}, client exit ${client.code}, in-cluster exit ${inCluster.code}`);

  // 1. One replica's network-status names another network.
  const replica = (await pods(node, NS, `app=${SERVICE}`)).find((p) => !p.metadata?.deletionTimestamp);
  const brokenPod = replica?.metadata?.name ?? '';
  const original = replica?.metadata?.annotations?.[NETWORK_STATUS_ANNOTATION];
  if (original === undefined || !original.includes(`"${NS}/macvlan1"`)) throw new Error(`${brokenPod}: no network-status entry "${NS}/macvlan1" to break: ${String(original)}`);
  const podPath = apiPath('', 'v1', 'pods', NS, brokenPod);
  const setStatus = (value: string): Promise<V1Pod> => node.client.patch<V1Pod>(podPath, { metadata: { annotations: { [NETWORK_STATUS_ANNOTATION]: value } } }, 'merge');
  let podBroken: DiagnoseRun<ServiceReport>;
  try {
    await setStatus(original.replaceAll(`"${NS}/macvlan1"`, `"${NS}/macvlan2"`));
    await until(`${brokenPod} to leave the blog slice`, 30_000, async () => ((await sliceAddresses(node, NS, SERVICE)).length === before.length - 1 ? true : undefined));
    podBroken = await run<ServiceReport>(node, readme(`service ${NS}/${SERVICE}`));
  } finally {
    await setStatus(original);
  }
  await until('the blog slice to be whole again', 30_000, async () => (JSON.stringify(await sliceAddresses(node, NS, SERVICE)) === JSON.stringify(before) ? true : undefined));

  // 2. The Service names a NAD that does not exist.
  const svcPath = apiPath('', 'v1', 'services', NS, SERVICE);
  const network = (await node.client.get<V1Service>(svcPath)).metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION] ?? 'macvlan1';
  const setNetwork = (value: string): Promise<V1Service> => node.client.patch<V1Service>(svcPath, { metadata: { annotations: { [SERVICE_NETWORK_ANNOTATION]: value } } }, 'merge');
  let annotationBroken: DiagnoseRun<ServiceReport>;
  try {
    await setNetwork('macvlan-typo');
    await until('the controller to withdraw the blog slice', 30_000, async () => ((await sliceAddresses(node, NS, SERVICE)).length === 0 ? true : undefined));
    annotationBroken = await run<ServiceReport>(node, readme(`service ${NS}/${SERVICE}`));
  } finally {
    await setNetwork(network);
  }
  let after: string[] = [];
  await until('the blog slice to be back', 30_000, async () => {
    after = await sliceAddresses(node, NS, SERVICE);
    return JSON.stringify(after) === JSON.stringify(before) ? true : undefined;
  }).catch(() => undefined);
  return { service, client, inCluster, brokenPod, podBroken, annotationBroken, before, after };
}
