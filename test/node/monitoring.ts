/**
 * The chart's monitoring objects on the real node, judged against real series: the Prometheus
 * Operator's CRDs (minimal ones, test fixture: no operator runs here), then the chart's
 * ServiceMonitors, PodMonitor, PrometheusRule and dashboard ConfigMap as `helm template` renders
 * them. The targets the installed monitors select (test/deploy/monitoring-targets.ts) are scraped
 * from the host twice, with a pod replaced and admissions between, and every alert expression (its
 * threshold cut) and every dashboard query is evaluated by promtool on those two rounds. Then two
 * alerts are made true: each webhook replica is sent a review of the wrong kind (it answers with an
 * error), so MultusProxyWebhookErrors must fire for both; and the controller loses its EndpointSlice
 * write access, so slices are not written, and MultusProxySlicesNotWritten must fire for the leader.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { dump, loadAll } from 'js-yaml';
import type { RealNode } from '../harness/node.js';
import { requireBinary } from '../harness/controlplane.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1EndpointSlice, V1Lease, V1Pod, V1Service } from '../../src/kube/types.js';
import { INSTALL_NAMESPACE } from '../../src/keys.js';
import { template } from '../deploy/helm.js';
import type { Rendered } from '../deploy/kustomize.js';
import { dataRules, dataTest, failedAlerts, foundWithoutData, inputSeries, parseExposition, withoutThreshold, type Found, type Query, type Scrape } from '../deploy/monitoring-eval.js';
import { podMonitorTargets, serviceMonitorTargets, type PodMonitor, type ServiceMonitor, type Target } from '../deploy/monitoring-targets.js';
import { CLIENT, pods, ROOT, SERVICE, sliceAddresses } from './cluster.js';
import { waitFor } from './blog.js';
import { uninstallAgent } from './nodeport.js';
import { installAgent } from './tenant.js';

const run = promisify(execFile);
const GROUP = 'monitoring.coreos.com';
const KINDS = [
  { kind: 'ServiceMonitor', plural: 'servicemonitors' },
  { kind: 'PodMonitor', plural: 'podmonitors' },
  { kind: 'PrometheusRule', plural: 'prometheusrules' },
] as const;
const COMPONENT = join(ROOT, 'deploy', 'components', 'monitoring');
const DASHBOARD = 'multus-proxy-dashboard';
const CONTROLLER_ROLE = 'multus-proxy-controller';
const CONTROLLER_LEASE = 'multus-proxy-controller';
/** The alert made true here, by taking the controller's EndpointSlice writes away. */
export const FIRED_ALERT = 'MultusProxySlicesNotWritten';
/** The alert made true by sending each webhook replica a review it must answer with an error. */
export const WEBHOOK_ALERT = 'MultusProxyWebhookErrors';
const WEBHOOK_JOB = 'multus-proxy-webhook';

/**
 * The CRDs as a fixture: group, version, kind and scope as the operator's, with a schema that keeps
 * any spec. The apiserver then stores the chart's objects as an operator cluster would; the field
 * schema of the real CRDs is not checked here (promtool and the parity test check the content).
 */
export function minimalCrds(): object[] {
  return KINDS.map(({ kind, plural }) => ({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${GROUP}` },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
      versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } } } }],
    },
  }));
}

/** kind/name of every object the monitoring component defines (the chart renders the same from files/monitoring). */
function componentKeys(): Set<string> {
  const keys = new Set([`ConfigMap/${DASHBOARD}`]);
  for (const f of ['servicemonitors.yaml', 'podmonitor.yaml', 'prometheusrule.yaml', join('node-agent', 'servicemonitor.yaml')]) {
    for (const o of loadAll(readFileSync(join(COMPONENT, f), 'utf8')) as Rendered[]) if (o) keys.add(`${o.kind}/${o.metadata?.name ?? ''}`);
  }
  return keys;
}

/** The chart's monitoring objects: `helm template` with every monitoring.* switch and the node agent on. */
export async function chartMonitoring(): Promise<Rendered[]> {
  const keys = componentKeys();
  const set = ['monitoring.serviceMonitor.enabled=true', 'monitoring.podMonitor.enabled=true', 'monitoring.prometheusRule.enabled=true', 'monitoring.dashboard.enabled=true', 'nodeAgent.enabled=true'];
  return (await template(set)).filter((o) => keys.has(`${o.kind}/${o.metadata?.name ?? ''}`));
}

/** GET a target's /metrics from the host, or POST a body (the webhook's certificate is for the apiserver: not verified, as the ServiceMonitor says). */
function get(url: string, body?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const opts = body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' } };
    const req = request(url, { ...opts, rejectUnauthorized: false, timeout: 10_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`${url}: HTTP ${res.statusCode}`))));
    });
    req.on('timeout', () => req.destroy(new Error(`${url}: no answer in 10 s`)));
    req.on('error', reject);
    req.end(body);
  });
}

async function fetchText(url: string): Promise<string> {
  if (url.startsWith('https:')) return get(url);
  const r = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.text();
}

interface Installed {
  serviceMonitors: ServiceMonitor[];
  podMonitors: PodMonitor[];
  groups: { name: string; rules: { alert: string; expr: string; for?: string; labels?: Record<string, string> }[] }[];
  dashboard: { panels: { title: string; targets: { refId: string; expr: string }[] }[] };
}

/** The monitoring objects as the apiserver stores them. */
async function readInstalled(node: RealNode): Promise<Installed> {
  const list = async <T>(plural: string): Promise<T[]> => (JSON.parse(await node.kubectl(['get', `${plural}.${GROUP}`, '-A', '-o', 'json'])) as { items: T[] }).items;
  const rules = await list<{ spec: { groups: Installed['groups'] } }>('prometheusrules');
  const cm = JSON.parse(await node.kubectl(['get', 'configmap', '-n', INSTALL_NAMESPACE, DASHBOARD, '-o', 'json'])) as { data: Record<string, string> };
  return {
    serviceMonitors: await list<ServiceMonitor>('servicemonitors'),
    podMonitors: await list<PodMonitor>('podmonitors'),
    groups: rules.flatMap((r) => r.spec.groups),
    dashboard: JSON.parse(cm.data['multus-proxy.json'] ?? '{}') as Installed['dashboard'],
  };
}

/** Every target the installed monitors select, from the cluster's Services, slices and pods now. */
async function discover(node: RealNode, m: Installed): Promise<Target[]> {
  const services = (await node.client.list<V1Service>(apiPath('', 'v1', 'services'))).items;
  const slices = (await node.client.list<V1EndpointSlice>(apiPath('discovery.k8s.io', 'v1', 'endpointslices'))).items;
  const all = (await node.client.list<V1Pod>(apiPath('', 'v1', 'pods'))).items;
  return [...m.serviceMonitors.flatMap((sm) => serviceMonitorTargets(sm, services, slices)), ...m.podMonitors.flatMap((pm) => podMonitorTargets(pm, all))];
}

/** One scrape round: the targets discovered now (pods come and go between rounds, as for Prometheus), each scraped once. */
async function scrapeAll(node: RealNode, m: Installed): Promise<Scrape[]> {
  const targets = await discover(node, m);
  return Promise.all(targets.map(async (t) => ({ target: t.labels, exposition: parseExposition(await fetchText(t.url)) })));
}

type Labels = Readonly<Record<string, string>>;

/** A counter or a histogram's count, summed over the targets `where` picks. */
function total(round: readonly Scrape[], name: string, where: (t: Labels) => boolean = () => true, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const s of round) {
    if (!where(s.target)) continue;
    for (const x of s.exposition.samples) if (x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v)) sum += x.value;
  }
  return sum;
}

async function promtool(dir: string, name: string, rules: unknown, test: (ruleFile: string) => unknown): Promise<string> {
  const ruleFile = join(dir, `${name}-rules.yaml`);
  writeFileSync(ruleFile, JSON.stringify(rules));
  const testFile = join(dir, `${name}-test.yaml`);
  writeFileSync(testFile, JSON.stringify(test(ruleFile)));
  const r = await run(requireBinary('promtool'), ['test', 'rules', testFile], { maxBuffer: 64 << 20 }).catch((e: unknown) => e as { stdout?: string; stderr?: string });
  return `${r.stdout ?? ''}\n${r.stderr ?? ''}`;
}

export interface Evaluated extends Query {
  readonly found: Found;
  readonly kind: 'alert' | 'panel';
  readonly panel?: string;
}

export interface MonitoringObservations {
  installed: string[];
  targets: Target[];
  evaluated: Evaluated[];
  /** Each webhook replica's error answers before and after it was sent a review of the wrong kind, and the alert on those rounds. */
  webhookFired: { alert: string; errors: { pod: string; before: number; after: number }[]; promtool: string };
  fired: { alert: string; leader: string; errorsBefore: number; errorsAfter: number; promtool: string };
  sliceRestored: boolean;
}

/** Evaluates every query on two scrape rounds: each one a data alert, then what the failed ones still have. */
async function evaluate(dir: string, m: Installed, rounds: readonly (readonly Scrape[])[]): Promise<Evaluated[]> {
  const queries: (Query & { kind: 'alert' | 'panel'; panel?: string })[] = [
    ...m.groups.flatMap((g) => g.rules.map((r) => ({ where: `alert ${r.alert}`, expr: withoutThreshold(r.expr), kind: 'alert' as const }))),
    ...m.dashboard.panels.flatMap((p) => p.targets.map((t) => ({ where: `panel "${p.title}" ${t.refId}`, expr: t.expr, kind: 'panel' as const, panel: p.title }))),
  ];
  const series = inputSeries(rounds);
  const out = await promtool(dir, 'data', dataRules(queries), (f) => dataTest(f, queries, series, `${rounds.length - 1}m`));
  if (!/SUCCESS|FAILED/.test(out)) throw new Error(`promtool test rules did not run:\n${out}`);
  const failed = failedAlerts(out);
  const last = rounds[rounds.length - 1] ?? [];
  return queries.map((q, i) => ({ ...q, found: failed.has(`Q${i}`) ? foundWithoutData(q.expr, last) : 'data' }));
}

/** The real alert on rounds held for 30 more minutes: the alerts promtool reports at `at` (none expected, so it lists them). */
async function alertsAt(dir: string, m: Installed, alert: string, rounds: readonly (readonly Scrape[])[], at: string, expected: Record<string, string>[]): Promise<string> {
  const rules = {
    groups: m.groups.map((g) => ({
      ...g,
      rules: g.rules.filter((r) => r.alert === alert).map(({ alert: a, expr, for: f, labels }) => ({ alert: a, expr, ...(f ? { for: f } : {}), ...(labels ? { labels } : {}) })),
    })),
  };
  return promtool(dir, 'fire', rules, (f) => ({
    rule_files: [f],
    evaluation_interval: '1m',
    tests: [{ name: 'fires', interval: '1m', input_series: inputSeries(rounds, 30), alert_rule_test: [{ eval_time: at, alertname: alert, exp_alerts: expected.map((l) => ({ exp_labels: l })) }] }],
  }));
}

/**
 * Sends every webhook replica (by its target's address, as a client of the apiserver would not) an
 * AdmissionReview of a Pod on the Service validation endpoint: the webhook answers it with an error
 * (outcome "error", reason "wrong-kind"), the condition of its error alert.
 */
async function wrongKindReviews(targets: readonly Target[]): Promise<void> {
  const review = JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: { uid: 'monitoring-wrong-kind', kind: { group: '', version: 'v1', kind: 'Pod' }, operation: 'CREATE', namespace: 'default', object: { metadata: { name: 'wrong-kind' } } },
  });
  await Promise.all(targets.map((t) => get(new URL('/validate-services', t.url).href, review)));
}

/** A Service the webhook admits, and one it denies (a bad service-network annotation), both server-side dry runs. */
async function admissions(node: RealNode): Promise<void> {
  const svc = (name: string, network: string): string =>
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, annotations: { 'k8s.v1.cni.cncf.io/service-network': network } },
      spec: { selector: { app: 'none' }, ports: [{ port: 80 }] },
    });
  await node.kubectl(['create', '-n', 'default', '--dry-run=server', '-o', 'name', '-f', '-'], { input: svc('monitoring-probe', 'macvlan1') });
  await node.kubectlResult(['create', '-n', 'default', '--dry-run=server', '-o', 'name', '-f', '-'], { input: svc('monitoring-probe-bad', 'no such/network/x'), allowFail: true });
}

/** One of the blog's backends deleted: its Deployment makes another, so slices, sidecars and the agent all change. */
async function replaceBackend(node: RealNode): Promise<void> {
  const victim = (await pods(node, 'default', `app=${SERVICE}`)).find((p) => p.metadata?.deletionTimestamp === undefined)?.metadata?.name;
  if (victim === undefined) throw new Error(`no pod of ${SERVICE} to replace`);
  await node.kubectl(['delete', 'pod', '-n', 'default', victim, '--wait=false']);
}

const readyBackends = async (node: RealNode): Promise<number> =>
  (await pods(node, 'default', `app=${SERVICE}`)).filter((p) => p.metadata?.deletionTimestamp === undefined && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')).length;

/**
 * Installs, scrapes, evaluates and makes one alert fire; leaves the node as it found it (the CRDs,
 * the objects, the agent and the controller's role restored). Runs after the blog scenario.
 */
export async function runMonitoring(node: RealNode, log: (m: string) => void): Promise<MonitoringObservations> {
  const dir = mkdtempSync(join(tmpdir(), 'mp-monitoring-node-'));
  const objects = await chartMonitoring();
  const role = JSON.parse(await node.kubectl(['get', 'clusterrole', CONTROLLER_ROLE, '-o', 'json'])) as {
    metadata: Record<string, unknown>;
    rules: { apiGroups?: string[]; resources?: string[]; verbs: string[] }[];
  };
  // The role as it was, to put back unconditionally (no resourceVersion, no server-set fields).
  const { name, labels, annotations } = role.metadata as { name: string; labels?: unknown; annotations?: unknown };
  const original = JSON.stringify({ ...role, metadata: { name, labels, annotations } });
  try {
    await installAgent(node);
    await node.apply(
      minimalCrds()
        .map((o) => dump(o))
        .join('---\n'),
    );
    await node.kubectl(['wait', '--for=condition=Established', ...KINDS.map((k) => `crd/${k.plural}.${GROUP}`), '--timeout=60s'], { timeoutMs: 70_000 });
    await node.apply(objects.map((o) => dump(o)).join('---\n'));
    const m = await readInstalled(node);
    const installed = [
      ...m.serviceMonitors.map((x) => `ServiceMonitor/${x.metadata.namespace}/${x.metadata.name}`),
      ...m.podMonitors.map((x) => `PodMonitor/${x.metadata.namespace}/${x.metadata.name}`),
      `PrometheusRule groups ${m.groups.length}`,
    ];
    log(`installed: ${installed.join(', ')}; dashboard panels ${m.dashboard.panels.length}`);

    // Round 1, then a backend replaced and two admissions, round 2 once every program saw it.
    const targets = await waitFor('the monitors to select the agent, both controllers, both webhooks and a sidecar', 60_000, async () => {
      const t = await discover(node, m);
      const jobs = new Set(t.map((x) => x.labels['job']));
      return t.length >= 6 && jobs.size >= 4 ? t : undefined;
    });
    log(`targets: ${targets.map((t) => `${t.labels['job']} ${t.labels['pod'] ?? ''} ${t.url}`).join('; ')}`);
    // Admissions before round 1 as well: a counter series born between the rounds has one sample, and rate() needs two.
    await admissions(node);
    const round1 = await waitFor('a first scrape round', 60_000, () => scrapeAll(node, m));
    const backends = await readyBackends(node);
    await replaceBackend(node);
    await admissions(node);
    const moved = (r: readonly Scrape[]): string[] =>
      (
        [
          ['controller slice writes', 'multus_proxy_controller_change_to_slice_write_seconds_count', () => true],
          ["the blog client's sidecar syncs for slices", 'multus_proxy_sidecar_slice_change_to_rules_seconds_count', (t: Labels) => t['pod'] === CLIENT],
          ['node agent syncs for slices', 'multus_proxy_node_slice_change_to_rules_seconds_count', () => true],
          ['webhook requests', 'multus_proxy_webhook_request_duration_seconds_count', () => true],
        ] as const
      )
        .filter(([, n, where]) => total(r, n, where) <= total(round1, n, where))
        .map(([w]) => w);
    let round2: Scrape[] = [];
    await waitFor('every program to see the replaced backend', 120_000, async () => {
      if ((await readyBackends(node)) < backends) return undefined;
      round2 = await scrapeAll(node, m);
      return moved(round2).length === 0 ? true : undefined;
    }).catch((e: Error) => log(`  not every program moved (${moved(round2).join(', ')}): ${e.message}`));
    if (round2.length === 0) round2 = await waitFor('a second scrape round', 60_000, () => scrapeAll(node, m));
    const evaluated = await evaluate(dir, m, [round1, round2]);

    // Webhook errors: each replica answers a review of the wrong kind with an error.
    const webhooks = (await discover(node, m)).filter((t) => t.labels['job'] === WEBHOOK_JOB);
    const webhookErrors = (r: readonly Scrape[], pod: string): number => total(r, 'multus_proxy_webhook_requests_total', (t) => t['pod'] === pod, { outcome: 'error' });
    const quiet = await waitFor('a scrape round', 60_000, () => scrapeAll(node, m));
    await wrongKindReviews(webhooks);
    const answered = await waitFor('a scrape round', 60_000, () => scrapeAll(node, m));
    const hookPods = webhooks.map((t) => t.labels['pod'] ?? '');
    const webhookFired = {
      alert: WEBHOOK_ALERT,
      errors: hookPods.map((pod) => ({ pod, before: webhookErrors(quiet, pod), after: webhookErrors(answered, pod) })),
      promtool: await alertsAt(
        dir,
        m,
        WEBHOOK_ALERT,
        [quiet, answered],
        '20m',
        hookPods.map((pod) => ({ namespace: INSTALL_NAMESPACE, pod, severity: 'warning' })),
      ),
    };

    // Slices not written: the controller's role loses EndpointSlice writes, a backend is replaced.
    const leader = (await node.client.get<V1Lease>(apiPath('coordination.k8s.io', 'v1', 'leases', INSTALL_NAMESPACE, CONTROLLER_LEASE))).spec?.holderIdentity ?? '';
    const isLeader = (t: Readonly<Record<string, string>>): boolean => t['pod'] === leader;
    const errors = (r: readonly Scrape[]): number => total(r, 'multus_proxy_controller_errors_total', isLeader, { stage: 'reconcile' });
    const errorsBefore = errors(await waitFor('a scrape round', 60_000, () => scrapeAll(node, m)));
    const readOnly = { ...role, rules: role.rules.map((r) => (r.resources?.includes('endpointslices') === true ? { ...r, verbs: r.verbs.filter((v) => ['get', 'list', 'watch'].includes(v)) } : r)) };
    await node.kubectl(['replace', '-f', '-'], { input: JSON.stringify(readOnly) });
    let firing: Scrape[][] = [];
    try {
      await replaceBackend(node);
      const a = await waitFor('reconcile errors on the leader', 120_000, async () => {
        const r = await scrapeAll(node, m);
        return errors(r) > errorsBefore ? r : undefined;
      });
      const b = await waitFor('more reconcile errors (the retry)', 120_000, async () => {
        const r = await scrapeAll(node, m);
        return errors(r) > errors(a) ? r : undefined;
      });
      firing = [a, b];
    } finally {
      await node.kubectl(['replace', '-f', '-'], { input: original });
    }
    const errorsAfter = errors(firing[1] ?? []);
    const expected = [{ namespace: INSTALL_NAMESPACE, pod: leader, severity: 'critical' }];
    const fired = await alertsAt(dir, m, FIRED_ALERT, firing, '20m', expected);
    const sliceRestored = await waitFor('the blog slice to list every ready backend again', 120_000, async () => {
      const ready = await readyBackends(node);
      return ready >= backends && (await sliceAddresses(node, 'default', SERVICE)).length === ready ? true : undefined;
    });
    return { installed, targets, evaluated, webhookFired, fired: { alert: FIRED_ALERT, leader, errorsBefore, errorsAfter, promtool: fired }, sliceRestored };
  } finally {
    await node.kubectl(['replace', '-f', '-'], { input: original }).catch(() => undefined);
    await node.kubectlResult(['delete', '--ignore-not-found', '--wait=true', '-f', '-'], { input: objects.map((o) => dump(o)).join('---\n'), allowFail: true });
    await node.kubectlResult(['delete', '--ignore-not-found', '--wait=true', ...KINDS.map((k) => `crd/${k.plural}.${GROUP}`)], { allowFail: true });
    await uninstallAgent(node, log);
    rmSync(dir, { recursive: true, force: true });
  }
}
