/**
 * The pure parts of evaluating the chart's alerts and dashboard on scraped series
 * (test/deploy/monitoring-eval.ts, monitoring-targets.ts): the exposition parser, scrape rounds as
 * promtool input series, thresholds cut from alert expressions, and the monitors' targets.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cumulative, dataRules, failedAlerts, foundWithoutData, inputSeries, parseExposition, seriesText, withoutThreshold, withTarget, type Scrape } from '../deploy/monitoring-eval.js';
import { podMonitorTargets, relabel, serviceMonitorTargets, type PodMonitor, type ServiceMonitor } from '../deploy/monitoring-targets.js';
import type { V1EndpointSlice, V1Pod, V1Service } from '../../src/kube/types.js';

const TEXT = [
  '# HELP multus_proxy_sidecar_sync_consecutive_failures Failed syncs in a row.',
  '# TYPE multus_proxy_sidecar_sync_consecutive_failures gauge',
  'multus_proxy_sidecar_sync_consecutive_failures 0',
  '# TYPE multus_proxy_sidecar_syncs_total counter',
  'multus_proxy_sidecar_syncs_total{kind="full",result="success"} 4',
  '# TYPE multus_proxy_x_seconds histogram',
  'multus_proxy_x_seconds_bucket{le="0.5"} 1',
  'multus_proxy_x_seconds_bucket{le="+Inf"} 2',
  'multus_proxy_x_seconds_sum 0.75',
  'multus_proxy_x_seconds_count 2',
  '# TYPE multus_proxy_webhook_requests_total counter',
  'multus_proxy_sidecar_invalid_pod_annotation{annotation="a\\"b\\\\c\\nd",namespace="app"} NaN 1700000000',
].join('\n');

void test('parseExposition reads samples, label escapes, special values and the declared families', () => {
  const e = parseExposition(TEXT);
  assert.equal(e.samples.length, 7);
  assert.deepEqual(e.samples[1], { name: 'multus_proxy_sidecar_syncs_total', labels: { kind: 'full', result: 'success' }, value: 4 });
  assert.deepEqual(e.samples[3], { name: 'multus_proxy_x_seconds_bucket', labels: { le: '+Inf' }, value: 2 });
  assert.equal(parseExposition('x -Inf').samples[0]?.value, -Infinity);
  assert.ok(Number.isNaN(parseExposition('x Nan').samples[0]?.value), "prom-client writes NaN as 'Nan'");
  assert.equal(parseExposition('x +inf').samples[0]?.value, Infinity);
  assert.deepEqual(e.samples[6]?.labels, { annotation: 'a"b\\c\nd', namespace: 'app' });
  assert.ok(Number.isNaN(e.samples[6]?.value));
  assert.equal(e.types.get('multus_proxy_webhook_requests_total'), 'counter', 'a family with no series yet is declared');
  assert.throws(() => parseExposition('x{a="b} 1'), /unterminated/);
  assert.throws(() => parseExposition('x{a=b} 1'), /bad labels/);
  assert.throws(() => parseExposition('x abc'), /not a sample value/);
});

void test('cumulative: counters and histogram parts grow, gauges do not', () => {
  const { types } = parseExposition(TEXT);
  assert.equal(cumulative('multus_proxy_sidecar_syncs_total', types), true);
  assert.equal(cumulative('multus_proxy_x_seconds_bucket', types), true);
  assert.equal(cumulative('multus_proxy_x_seconds_count', types), true);
  assert.equal(cumulative('multus_proxy_sidecar_sync_consecutive_failures', types), false);
});

void test('withTarget: the target labels win; a scraped label they clash with is kept as exported_', () => {
  assert.deepEqual(withTarget({ namespace: 'app', kind: 'full' }, { namespace: 'mp', pod: 'p' }), { exported_namespace: 'app', kind: 'full', namespace: 'mp', pod: 'p' });
  assert.equal(seriesText('m', { b: 'x"y', a: '1' }), 'm{a="1",b="x\\"y"}');
});

void test('inputSeries: one value per round, _ where a series is missing, the last step held (gauges flat, counters growing)', () => {
  const t = { namespace: 'app', pod: 'web' };
  const round = (failures: number, syncs: number | undefined): Scrape[] => [
    {
      target: t,
      exposition: parseExposition(
        ['# TYPE g gauge', `g ${failures}`, '# TYPE c_total counter', syncs === undefined ? '' : `c_total ${syncs}`, '# TYPE d_total counter', `d_total ${10 - failures}`].join('\n'),
      ),
    },
  ];
  const s = inputSeries([round(0, undefined), round(3, 5), round(4, 9)], 20);
  assert.deepEqual(s, [
    { series: 'g{namespace="app",pod="web"}', values: '0 3 4+0x20' },
    { series: 'd_total{namespace="app",pod="web"}', values: '10 7 6-1x20' },
    { series: 'c_total{namespace="app",pod="web"}', values: '_ 5 9+4x20' },
  ]);
  assert.deepEqual(inputSeries([round(1, 2)]), [
    { series: 'g{namespace="app",pod="web"}', values: '1' },
    { series: 'c_total{namespace="app",pod="web"}', values: '2' },
    { series: 'd_total{namespace="app",pod="web"}', values: '9' },
  ]);
});

void test('withoutThreshold cuts the last top-level comparison, not one in a selector, a string or a function', () => {
  assert.equal(withoutThreshold('max by (namespace, pod) (x) >= 3'), 'max by (namespace, pod) (x)');
  assert.equal(withoutThreshold('min by (pod) (x) - time() < 7 * 86400'), 'min by (pod) (x) - time()');
  assert.equal(withoutThreshold('sum(rate(x{outcome!="error",a=~"b>c"}[5m])) > 0'), 'sum(rate(x{outcome!="error",a=~"b>c"}[5m]))');
  assert.equal(withoutThreshold('count(x > 0) or vector(0)'), 'count(x > 0) or vector(0)');
  assert.equal(withoutThreshold('sum(x) != 1'), 'sum(x)');
  assert.equal(withoutThreshold('histogram_quantile(0.99, sum by (le) (rate(b[5m]))) > 1'), 'histogram_quantile(0.99, sum by (le) (rate(b[5m])))');
});

void test('dataRules and failedAlerts: one label-free alert per query, NaN excluded; failures read from promtool output', () => {
  assert.deepEqual(dataRules([{ where: 'w', expr: 'sum(x)' }]).groups[0]?.rules, [{ alert: 'Q0', expr: 'count((sum(x)) >= -Inf)' }]);
  const out = '  FAILED:\n    name: returns-data,\n    alertname: Q1, time: 1m, \n        exp:[...], \n        got:[]\n    alertname: Q12, time: 1m,';
  assert.deepEqual([...failedAlerts(out)], ['Q1', 'Q12']);
});

void test('foundWithoutData: series served, only declared, or absent', () => {
  const scrapes: Scrape[] = [{ target: {}, exposition: parseExposition(TEXT) }];
  assert.equal(foundWithoutData('sum(rate(multus_proxy_sidecar_syncs_total{result="error"}[5m]))', scrapes), 'series');
  assert.equal(foundWithoutData('sum(rate(multus_proxy_x_seconds_bucket[5m]))', scrapes), 'series');
  assert.equal(foundWithoutData('sum(rate(multus_proxy_webhook_requests_total{outcome="error"}[5m]))', scrapes), 'declared');
  assert.equal(foundWithoutData('sum(multus_proxy_nothing) + sum(multus_proxy_sidecar_syncs_total)', scrapes), 'none');
});

void test('relabel: keep, drop and replace with groups, anchored', () => {
  const l = { __meta_kubernetes_pod_container_name: 'multus-proxy', __meta_kubernetes_pod_ip: 'fd00::1' };
  assert.deepEqual(relabel(l, { sourceLabels: ['__meta_kubernetes_pod_container_name'], regex: 'multus-proxy', action: 'keep' }), l);
  assert.equal(relabel(l, { sourceLabels: ['__meta_kubernetes_pod_container_name'], regex: 'multus', action: 'keep' }), undefined, 'anchored');
  assert.equal(relabel(l, { sourceLabels: ['__meta_kubernetes_pod_container_name'], regex: 'multus-proxy', action: 'drop' }), undefined);
  assert.equal(relabel(l, { sourceLabels: ['__meta_kubernetes_pod_ip'], regex: '([0-9.]+)', targetLabel: '__address__', replacement: '$1:9180' })?.['__address__'], undefined);
  assert.equal(relabel(l, { sourceLabels: ['__meta_kubernetes_pod_ip'], regex: '(.*:.*)', targetLabel: '__address__', replacement: '[$1]:9180' })?.['__address__'], '[fd00::1]:9180');
});

const PM: PodMonitor = {
  metadata: { name: 'multus-proxy-sidecars', namespace: 'multus-proxy-system' },
  spec: {
    namespaceSelector: { any: true },
    selector: {},
    podMetricsEndpoints: [
      {
        path: '/metrics',
        relabelings: [
          { sourceLabels: ['__meta_kubernetes_pod_container_name'], regex: 'multus-proxy', action: 'keep' },
          { sourceLabels: ['__meta_kubernetes_pod_ip'], regex: '([0-9.]+)', targetLabel: '__address__', replacement: '$1:9180' },
        ],
      },
    ],
  },
};

void test("podMonitorTargets: the injected sidecar (a native sidecar is an init container) of running pods, at the pod IP and the sidecar's port", () => {
  const p = (name: string, phase: string, sidecar: boolean): V1Pod => ({
    metadata: { name, namespace: 'default' },
    spec: { initContainers: sidecar ? [{ name: 'multus-proxy' }] : [], containers: [{ name: 'app' }] },
    status: { phase, podIP: '10.244.0.7' },
  });
  const targets = podMonitorTargets(PM, [p('client', 'Running', true), p('plain', 'Running', false), p('done', 'Succeeded', true)]);
  assert.deepEqual(targets, [
    {
      url: 'http://10.244.0.7:9180/metrics',
      labels: { namespace: 'default', pod: 'client', container: 'multus-proxy', job: 'multus-proxy-system/multus-proxy-sidecars', instance: '10.244.0.7:9180' },
    },
  ]);
});

void test('serviceMonitorTargets: the selected Services in its namespace, their slice addresses on the named port', () => {
  const sm: ServiceMonitor = {
    metadata: { name: 'multus-proxy-webhook', namespace: 'mp' },
    spec: { selector: { matchLabels: { c: 'webhook' } }, endpoints: [{ port: 'https', path: '/metrics', scheme: 'https' }] },
  };
  const svc = (ns: string, name: string, c: string): V1Service => ({ metadata: { namespace: ns, name, labels: { c } } });
  const slice = (ns: string, svcName: string): V1EndpointSlice => ({
    addressType: 'IPv4',
    metadata: { namespace: ns, name: `${svcName}-x`, labels: { 'kubernetes.io/service-name': svcName } },
    ports: [{ name: 'https', port: 8443 }],
    endpoints: [
      { addresses: ['10.0.0.1'], conditions: { ready: true }, targetRef: { kind: 'Pod', name: 'wh-1' } },
      { addresses: ['10.0.0.2'], conditions: { ready: false }, targetRef: { kind: 'Pod', name: 'wh-2' } },
      { addresses: ['10.0.0.3'], conditions: { ready: false, terminating: true }, targetRef: { kind: 'Pod', name: 'wh-3' } },
    ],
  });
  const t = serviceMonitorTargets(sm, [svc('mp', 'wh', 'webhook'), svc('mp', 'ctl', 'controller'), svc('other', 'wh', 'webhook')], [slice('mp', 'wh'), slice('mp', 'ctl'), slice('other', 'wh')]);
  assert.deepEqual(
    t.map((x) => x.url),
    ['https://10.0.0.1:8443/metrics', 'https://10.0.0.2:8443/metrics'],
    'unready but not terminating endpoints are scraped, as Prometheus does',
  );
  assert.deepEqual(t[0]?.labels, { namespace: 'mp', service: 'wh', endpoint: 'https', job: 'wh', instance: '10.0.0.1:8443', pod: 'wh-1' });
});
