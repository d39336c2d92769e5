/**
 * The chart's monitoring objects (deploy/components/monitoring): every metric an alert or a
 * dashboard query names exists in the programs' registries (built as scripts/reference.ts builds
 * them), so renaming a metric breaks this test; promtool (Debian's prometheus package; scripts/setup.sh installs it) accepts the
 * rendered PrometheusRule and the dashboard's queries, and each alert fires on synthetic series
 * where its condition holds and stays silent where it does not.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { programMetrics } from '../../scripts/reference.js';
import { requireBinary } from '../harness/controlplane.js';
import { template } from './helm.js';
import { REPO, type Rendered } from './kustomize.js';
import { dataRules, dataTest, failedAlerts, inputSeries, parseExposition, withoutThreshold, type Scrape } from './monitoring-eval.js';

const run = promisify(execFile);

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface RuleGroup {
  name: string;
  rules: Rule[];
}
interface Dashboard {
  panels: { title: string; targets: { refId: string; expr: string }[] }[];
}

const SET = ['monitoring.prometheusRule.enabled=true', 'monitoring.dashboard.enabled=true'];

/** Every series name a program can serve: histograms also as _bucket, _sum and _count. */
function knownSeries(): Set<string> {
  const names = new Set<string>();
  for (const { rows } of programMetrics()) {
    for (const r of rows) {
      names.add(r.name);
      if (r.type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(r.name + s);
    }
  }
  return names;
}

const metricNames = (expr: string): string[] => [...expr.matchAll(/\bmultus_proxy_[a-z0-9_]+/g)].map((m) => m[0]);

/** A case of an alert: series (name{labels} → promtool values) and when to evaluate. */
interface Case {
  series: Record<string, string>;
  at: string;
}
interface AlertCase {
  fires: Case & { labels: Record<string, string> };
  silent: Case;
}

const APP = { namespace: 'app', pod: 'web-1' };
const CTL = { namespace: 'multus-proxy-system', pod: 'multus-proxy-controller-0' };
const WH = { namespace: 'multus-proxy-system', pod: 'multus-proxy-webhook-0' };
const NODE = { namespace: 'multus-proxy-node', pod: 'multus-proxy-node-a' };
const sel = (l: Record<string, string>): string => `{${Object.entries(l).map(([k, v]) => `${k}="${v}"`).join(',')}}`;

/** Failures in a row: 3 and growing fires; failures that stop before 3 do not. */
const syncFailing = (metric: string, who: Record<string, string>): AlertCase => ({
  fires: { series: { [`${metric}${sel(who)}`]: '0 1 2 3+1x20' }, at: '15m', labels: { ...who, severity: 'warning' } },
  silent: { series: { [`${metric}${sel(who)}`]: '0 1 2 0x20' }, at: '15m' },
});

/** A gauge held above 0 for 30 min fires (labels kept); held at 0, not. */
const aboveZero = (metric: string, labels: Record<string, string>, severity: string, value = '1'): AlertCase => ({
  fires: { series: { [`${metric}${sel(labels)}`]: `${value}x30` }, at: '20m', labels: { ...labels, severity } },
  silent: { series: { [`${metric}${sel(labels)}`]: '0x30' }, at: '20m' },
});

/** Each alert, with series on which it must fire (and its labels) and series on which it must not. */
const CASES: Record<string, AlertCase> = {
  MultusProxySidecarSyncFailing: syncFailing('multus_proxy_sidecar_sync_consecutive_failures', APP),
  MultusProxySidecarInputUnusable: {
    fires: { series: { [`multus_proxy_sidecar_invalid_pod_annotation${sel({ ...APP, annotation: 'network-status' })}`]: '1x30' }, at: '15m', labels: { ...APP, annotation: 'network-status', severity: 'warning' } },
    silent: { series: { [`multus_proxy_sidecar_invalid_pod_annotation${sel({ ...APP, annotation: 'network-status' })}`]: '1x5 0x25' }, at: '15m' },
  },
  MultusProxySidecarServicesDropped: aboveZero('multus_proxy_sidecar_services_dropped', { ...APP, network: 'app/net1' }, 'warning', '2'),
  MultusProxySlicesNotWritten: {
    fires: { series: { [`multus_proxy_controller_errors_total${sel({ ...CTL, stage: 'reconcile' })}`]: '0+1x30' }, at: '20m', labels: { ...CTL, severity: 'critical' } },
    // Errors of other stages (Events, RBAC) do not stop slices.
    silent: { series: { [`multus_proxy_controller_errors_total${sel({ ...CTL, stage: 'event' })}`]: '0+1x30', [`multus_proxy_controller_errors_total${sel({ ...CTL, stage: 'reconcile' })}`]: '0x30' }, at: '20m' },
  },
  MultusProxySliceWritesRefused: {
    fires: { series: { [`multus_proxy_controller_slice_writes_refused_total${sel({ ...CTL, verb: 'create' })}`]: '0 0 0 1x10' }, at: '5m', labels: { ...CTL, verb: 'create', severity: 'warning' } },
    silent: { series: { [`multus_proxy_controller_slice_writes_refused_total${sel({ ...CTL, verb: 'create' })}`]: '0 0 0 1x30' }, at: '25m' },
  },
  MultusProxyControllerNoLeader: {
    fires: { series: { [`multus_proxy_controller_leader${sel(CTL)}`]: '0x20', [`multus_proxy_controller_leader${sel({ ...CTL, pod: 'multus-proxy-controller-1' })}`]: '0x20' }, at: '10m', labels: { severity: 'critical' } },
    silent: { series: { [`multus_proxy_controller_leader${sel(CTL)}`]: '0x20', [`multus_proxy_controller_leader${sel({ ...CTL, pod: 'multus-proxy-controller-1' })}`]: '1x20' }, at: '10m' },
  },
  MultusProxyWebhookErrors: {
    fires: { series: { [`multus_proxy_webhook_requests_total${sel({ ...WH, endpoint: '/mutate', outcome: 'error', reason: 'internal' })}`]: '0+1x30' }, at: '20m', labels: { ...WH, severity: 'warning' } },
    // Denials are the webhook doing its job.
    silent: { series: { [`multus_proxy_webhook_requests_total${sel({ ...WH, endpoint: '/mutate', outcome: 'denied', reason: 'bad-annotation' })}`]: '0+1x30' }, at: '20m' },
  },
  MultusProxyWebhookSlow: {
    fires: {
      series: {
        [`multus_proxy_webhook_request_duration_seconds_bucket${sel({ ...WH, endpoint: '/mutate', le: '0.5' })}`]: '0x30',
        [`multus_proxy_webhook_request_duration_seconds_bucket${sel({ ...WH, endpoint: '/mutate', le: '2.5' })}`]: '0+10x30',
        [`multus_proxy_webhook_request_duration_seconds_bucket${sel({ ...WH, endpoint: '/mutate', le: '+Inf' })}`]: '0+10x30',
      },
      at: '20m',
      labels: { severity: 'warning' },
    },
    silent: {
      series: {
        [`multus_proxy_webhook_request_duration_seconds_bucket${sel({ ...WH, endpoint: '/mutate', le: '0.5' })}`]: '0+10x30',
        [`multus_proxy_webhook_request_duration_seconds_bucket${sel({ ...WH, endpoint: '/mutate', le: '2.5' })}`]: '0+10x30',
        [`multus_proxy_webhook_request_duration_seconds_bucket${sel({ ...WH, endpoint: '/mutate', le: '+Inf' })}`]: '0+10x30',
      },
      at: '20m',
    },
  },
  // promtool's clock starts at 0: time() is the evaluation time.
  MultusProxyWebhookCertificateExpiring: {
    fires: { series: { [`multus_proxy_webhook_certificate_expiry_timestamp_seconds${sel(WH)}`]: `${3 * 86400}x200` }, at: '2h', labels: { ...WH, severity: 'critical' } },
    silent: { series: { [`multus_proxy_webhook_certificate_expiry_timestamp_seconds${sel(WH)}`]: `${60 * 86400}x200` }, at: '2h' },
  },
  MultusProxyWebhookCertificateLoadFailing: {
    fires: { series: { [`multus_proxy_webhook_certificate_loads_total${sel({ ...WH, result: 'failed' })}`]: '0 0 1x10' }, at: '4m', labels: { ...WH, severity: 'warning' } },
    silent: { series: { [`multus_proxy_webhook_certificate_loads_total${sel({ ...WH, result: 'loaded' })}`]: '0+1x10' }, at: '4m' },
  },
  MultusProxyNodeAgentSyncFailing: syncFailing('multus_proxy_node_sync_consecutive_failures', NODE),
  MultusProxyNodeAgentRefusedNetworks: aboveZero('multus_proxy_node_refused_networks', { ...NODE, reason: 'ParentRefused' }, 'warning'),
  MultusProxyNodeAgentUnservableNetworks: aboveZero('multus_proxy_node_unservable_networks', { ...NODE, network: 'app/net1', type: 'ipvlan' }, 'info'),
};

void describe('monitoring: alerts and dashboard', () => {
  let groups: RuleGroup[] = [];
  let dashboard: Dashboard = { panels: [] };
  let tmp = '';
  before(async () => {
    const objs: Rendered[] = await template(SET);
    const rule = objs.find((o) => o.kind === 'PrometheusRule') as (Rendered & { spec: { groups: RuleGroup[] } }) | undefined;
    const cm = objs.find((o) => o.kind === 'ConfigMap' && o.metadata?.name === 'multus-proxy-dashboard') as (Rendered & { data: Record<string, string> }) | undefined;
    assert.ok(rule !== undefined && cm !== undefined, 'the chart renders the PrometheusRule and the dashboard ConfigMap');
    assert.equal(cm.metadata?.labels?.grafana_dashboard, '1');
    groups = rule.spec.groups;
    dashboard = JSON.parse(cm.data['multus-proxy.json'] ?? '') as Dashboard;
    tmp = mkdtempSync(join(tmpdir(), 'mp-monitoring-'));
  });
  after(() => {
    if (tmp !== '') rmSync(tmp, { recursive: true, force: true });
  });

  const alerts = (): Rule[] => groups.flatMap((g) => g.rules);
  const queries = (): { where: string; expr: string }[] => dashboard.panels.flatMap((p) => p.targets.map((t) => ({ where: `panel "${p.title}" query ${t.refId}`, expr: t.expr })));

  void test('every metric an alert or a dashboard query names is served by a program', () => {
    const known = knownSeries();
    const used = [...alerts().map((r) => ({ where: `alert ${r.alert}`, expr: r.expr })), ...queries()];
    assert.ok(alerts().length >= 10 && queries().length >= 10, 'the rule and the dashboard were read');
    const unknown = used.flatMap(({ where, expr }) => metricNames(expr).filter((n) => !known.has(n)).map((n) => `${where}: ${n}`));
    assert.deepEqual(unknown, [], 'metrics no registry defines (renamed or removed?): see docs/reference/metrics.md');
    for (const { where, expr } of used) assert.ok(metricNames(expr).length > 0, `${where} names no multus-proxy metric`);
  });

  void test('the dashboard has the panels operators look for', () => {
    const titles = dashboard.panels.map((p) => p.title);
    for (const want of [/sync latency/i, /endpoints per service/i, /drops/i, /webhook latency/i, /memory per component/i]) assert.ok(titles.some((t) => want.test(t)), `a panel matching ${want}: ${titles.join(', ')}`);
  });

  void test('every alert is explained in docs/operate.md and has a promtool case here', () => {
    const doc = readFileSync(join(REPO, 'docs', 'operate.md'), 'utf8');
    for (const r of alerts()) {
      assert.ok(doc.includes(`\`${r.alert}\``), `docs/operate.md explains ${r.alert}`);
      assert.ok(CASES[r.alert] !== undefined, `a case for ${r.alert}`);
    }
    assert.deepEqual(Object.keys(CASES).sort(), alerts().map((r) => r.alert).sort(), 'no case for an alert that does not exist');
  });

  void test('promtool check rules accepts the rule and every dashboard query', async () => {
    const promtool = requireBinary('promtool');
    const rules = join(tmp, 'rules.yaml');
    writeFileSync(rules, JSON.stringify({ groups }));
    const { stdout } = await run(promtool, ['check', 'rules', rules]);
    assert.match(stdout, new RegExp(`SUCCESS: ${alerts().length} rules found`));
    // The dashboard's queries as recording rules: promtool parses each.
    const recorded = join(tmp, 'dashboard-rules.yaml');
    const qs = queries();
    writeFileSync(recorded, JSON.stringify({ groups: [{ name: 'dashboard', rules: qs.map((q, i) => ({ record: `dashboard:query:${i}`, expr: q.expr })) }] }));
    const out = await run(promtool, ['check', 'rules', recorded]);
    assert.match(out.stdout, new RegExp(`SUCCESS: ${qs.length} rules found`));
  });

  void test('the real-node evaluation through promtool: a query returning a number passes; an empty one, a NaN quantile and a missing metric do not', async () => {
    const promtool = requireBinary('promtool');
    const text = (syncs: number): string =>
      ['# TYPE multus_proxy_sidecar_syncs_total counter', `multus_proxy_sidecar_syncs_total{kind="full",result="success"} ${syncs}`, '# TYPE multus_proxy_x_seconds histogram', 'multus_proxy_x_seconds_bucket{le="+Inf"} 0', 'multus_proxy_x_seconds_count 0'].join('\n');
    const round = (syncs: number): Scrape[] => [{ target: APP, exposition: parseExposition(text(syncs)) }];
    const queries = [
      { where: 'rate', expr: withoutThreshold('sum by (namespace, pod) (rate(multus_proxy_sidecar_syncs_total[5m])) > 0') },
      { where: 'empty selection', expr: 'sum(rate(multus_proxy_sidecar_syncs_total{result="error"}[5m]))' },
      { where: 'NaN', expr: 'histogram_quantile(0.99, sum by (le) (rate(multus_proxy_x_seconds_bucket[5m])))' },
      { where: 'missing', expr: 'max(multus_proxy_nothing)' },
    ];
    const rules = join(tmp, 'data-rules.yaml');
    writeFileSync(rules, JSON.stringify(dataRules(queries)));
    const file = join(tmp, 'data-test.yaml');
    writeFileSync(file, JSON.stringify(dataTest(rules, queries, inputSeries([round(3), round(5)]), '1m')));
    const out = await run(promtool, ['test', 'rules', file]).catch((e: unknown) => e as { stdout: string; stderr: string });
    assert.deepEqual([...failedAlerts(`${out.stdout}${out.stderr}`)].sort(), ['Q1', 'Q2', 'Q3'], out.stdout);
  });

  void test('promtool test rules: each alert fires when its condition holds, and not otherwise', async () => {
    const promtool = requireBinary('promtool');
    // Annotations are templates of the firing value; check rules parsed them, here only the
    // condition and the labels count.
    const rules = join(tmp, 'rules-bare.yaml');
    writeFileSync(rules, JSON.stringify({ groups: groups.map((g) => ({ ...g, rules: g.rules.map(({ annotations: _, ...r }) => r) })) }));
    const series = (s: Record<string, string>): { series: string; values: string }[] => Object.entries(s).map(([k, values]) => ({ series: k, values }));
    const tests = Object.entries(CASES).flatMap(([alertname, c]) => [
      { name: `${alertname} fires`, interval: '1m', input_series: series(c.fires.series), alert_rule_test: [{ eval_time: c.fires.at, alertname, exp_alerts: [{ exp_labels: c.fires.labels }] }] },
      { name: `${alertname} silent`, interval: '1m', input_series: series(c.silent.series), alert_rule_test: [{ eval_time: c.silent.at, alertname, exp_alerts: [] }] },
    ]);
    const file = join(tmp, 'rules-test.yaml');
    writeFileSync(file, JSON.stringify({ rule_files: [rules], evaluation_interval: '1m', tests }));
    // promtool exits 1 when a case fails; its output says which.
    const result = await run(promtool, ['test', 'rules', file]).catch((e: unknown) => {
      const out = e as { stdout?: string; stderr?: string; message?: string };
      return { stdout: out.stdout ?? '', stderr: out.stderr ?? out.message ?? '' };
    });
    assert.match(result.stdout, /SUCCESS/, `promtool test rules failed:\n${result.stdout}\n${result.stderr}`);
  });
});
