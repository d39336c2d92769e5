/**
 * The webhook as a process (cmd/webhook/main.ts), configured as the Deployment configures it:
 * --config with a sibling sidecarImage file, --tls-cert-file/--tls-key-file, --port, and a
 * kubeconfig for the apiserver. Start-up errors exit with a message; SIGTERM drains, then exits.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { freePort, useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import type { AdmissionReview } from '../../cmd/webhook/responses.js';
import { httpsRequest, type Reply } from '../certs/tls-client.js';
import { admissionRequest, applyResponse, servingPairFolder, WEBHOOK_DNS_NAME } from './fixtures.js';

const ROOT = join(import.meta.dirname, '..', '..');
const MAIN = join(ROOT, 'cmd', 'webhook', 'main.ts');

function call(port: number, ca: string, method: string, path: string, body?: string): Promise<Reply> {
  return httpsRequest(port, WEBHOOK_DNS_NAME, ca, method, path, body);
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? NaN) / 1024;
}

void describe('webhook/main as a process', () => {
  let cp: ControlPlane;
  let dir: string;
  let ca: string;
  let child: ChildProcess | undefined;
  let stderr = '';
  const ns = uniqueName('wh-main');

  before(async () => {
    cp = await useControlPlane();
    await cp.createNamespace(ns, { 'multus-proxy-injection': 'enabled' });
    ({ dir, caPem: ca } = servingPairFolder('webhook-main-'));
    writeFileSync(join(dir, 'config.yaml'), 'logLevel: warn\nsidecar:\n  mode: regular\n  healthPort: 9181\n');
    writeFileSync(join(dir, 'sidecarImage'), 'registry.example/multus-proxy:main-test\n');
  });
  after(async () => {
    child?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    await cp.stop();
  });

  void test('bad configuration and missing certificates stop the start with a message', () => {
    const bad = spawnSync(process.execPath, ['--import', 'tsx', MAIN, '--port=0', '--sidecar-mode=maybe', '--sidecar-image=x'], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /webhook options: --port "0": is not a whole number in range/);
    assert.match(bad.stderr, /--sidecar-mode "maybe": is not one of the known values/);
    const noCert = spawnSync(
      process.execPath,
      ['--import', 'tsx', MAIN, '--sidecar-image=x', `--tls-cert-file=${join(dir, 'none.crt')}`, `--tls-key-file=${join(dir, 'tls.key')}`, `--kubeconfig=${cp.kubeconfigPath}`],
      { cwd: ROOT, encoding: 'utf8' },
    );
    assert.equal(noCert.status, 1);
    assert.match(noCert.stderr, /webhook: serving certificate: cannot read .*none\.crt/);
  });

  void test('serves admission, health and metrics; SIGTERM drains (still answering, still ready) and exits 0', async () => {
    const port = await freePort();
    child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        MAIN,
        `--config=${join(dir, 'config.yaml')}`,
        `--tls-cert-file=${join(dir, 'tls.crt')}`,
        `--tls-key-file=${join(dir, 'tls.key')}`,
        `--port=${port}`,
        '--host=127.0.0.1',
        `--kubeconfig=${cp.kubeconfigPath}`,
        '--shutdown-drain-ms=1500',
      ],
      { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => child?.once('exit', (code) => resolve(code)));
    let up = false;
    for (let i = 0; i < 100 && !up; i++) {
      up = await call(port, ca, 'GET', '/healthz').then(
        (r) => r.status === 200,
        () => false,
      );
      if (!up) await delay(100);
    }
    assert.ok(up, `webhook did not come up: ${stderr}`);

    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { generateName: 'c-', annotations: { 'k8s.v1.cni.cncf.io/service-network': 'net-a', 'k8s.v1.cni.cncf.io/networks': 'net-a' } },
      spec: { containers: [{ name: 'app', image: 'busybox' }] },
    };
    const r = await call(port, ca, 'POST', '/mutate-pods', JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: admissionRequest(pod, ns) }));
    assert.equal(r.status, 200, r.text);
    const out = applyResponse(pod, (JSON.parse(r.text) as AdmissionReview).response ?? { uid: '', allowed: false }) as typeof pod & { metadata: { annotations: Record<string, string> } };
    assert.deepEqual(
      out.spec.containers.map((c) => [c.name, c.image]),
      [
        ['multus-proxy', 'registry.example/multus-proxy:main-test'],
        ['app', 'busybox'],
      ],
    );
    assert.equal(out.metadata.annotations['kubectl.kubernetes.io/default-container'], 'app');
    const metrics = await call(port, ca, 'GET', '/metrics');
    assert.match(metrics.text, /multus_proxy_webhook_requests_total\{endpoint="\/mutate-pods",outcome="injected",reason="regular"\} 1/);
    assert.match(metrics.text, /multus_proxy_webhook_certificate_expiry_timestamp_seconds \d+/);
    const rss = rssMiB(child.pid ?? 0);
    console.log(`webhook RSS after one admission: ${rss.toFixed(1)} MiB`);
    assert.ok(rss < 150, `RSS ${rss} MiB`);

    child.kill('SIGTERM');
    await delay(300);
    // Ready while draining: the deleted pod's endpoint is already not ready in the slices, and a
    // failing /readyz only left an Unhealthy Event per deletion.
    assert.equal((await call(port, ca, 'GET', '/readyz')).status, 200, 'still ready while draining');
    assert.equal(
      (await call(port, ca, 'POST', '/mutate-pods', JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: admissionRequest(pod, ns) }))).status,
      200,
      'still answering while draining',
    );
    assert.equal(await exited, 0);
    child = undefined;
  });
});
