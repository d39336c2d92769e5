/**
 * The default install with a real cert-manager (v1.11.5, its controller and cainjector run as host
 * processes against the node's apiserver, as docs/node-harness.md checked): `kubectl apply -k
 * deploy/` exactly as the README says, the webhook serving the issued certificate, and a forced
 * renewal (the serving Secret deleted) picked up by the webhook with no failed admission meanwhile.
 *
 * cert-manager's own webhook is not run: it only validates cert-manager's objects, and without its
 * webhook configurations (Helm chart only) the apiserver never calls it.
 */
import { X509Certificate } from 'node:crypto';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import tls from 'node:tls';
import { binDir } from '../harness/controlplane.js';
import { manifestsDir, type RealNode } from '../harness/node.js';
import { INSTALL_DEFAULT, waitInstalled } from './install.js';
import { INSTALL_NAMESPACE } from '../../src/keys.js';

const WEBHOOK_HOST = `multus-proxy-webhook.${INSTALL_NAMESPACE}.svc`;

export interface CertManagerObservations {
  secretBefore: string;
  servedBefore: string;
  secretAfter: string;
  servedAfter: string;
  /** ms from the Secret's deletion until the webhook served the new certificate. */
  pickedUpMs: number;
  admissions: { ok: number; failed: number; failures: string[] };
}

/** The serial of the certificate the webhook serves through its Service's cluster IP. */
async function servedSerial(clusterIP: string, ca: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host: clusterIP, port: 443, servername: WEBHOOK_HOST, ca, timeout: 3_000 }, () => {
      const serial = s.getPeerX509Certificate()?.serialNumber ?? '';
      s.end();
      resolve(serial);
    });
    s.on('timeout', () => s.destroy(new Error('TLS timeout')));
    s.on('error', reject);
  });
}

async function secret(node: RealNode, name: string): Promise<{ crt: string; ca: string } | undefined> {
  const r = await node.kubectlResult(['get', 'secret', '-n', INSTALL_NAMESPACE, name, '-o', 'json'], { allowFail: true });
  if (r.code !== 0) return undefined;
  const d = (JSON.parse(r.stdout) as { data?: Record<string, string> }).data ?? {};
  if (!d['tls.crt']) return undefined;
  return { crt: Buffer.from(d['tls.crt'], 'base64').toString(), ca: Buffer.from(d['ca.crt'] ?? '', 'base64').toString() };
}

const serialOf = (pem: string): string => new X509Certificate(pem).serialNumber;

export async function startCertManager(node: RealNode): Promise<void> {
  await node.kubectl(['create', 'namespace', 'cert-manager']);
  await node.apply(join(manifestsDir(), 'cert-manager-crds.yaml'));
  // Every cert-manager CRD (Issuer too), not only the first: the install names Issuers and Certificates.
  for (const crd of ['certificates', 'issuers', 'clusterissuers', 'certificaterequests']) {
    await node.wait(`crd/${crd}.cert-manager.io`, 'condition=Established', { timeoutMs: 60_000 });
  }
  node.startProcess('cert-manager-controller', join(binDir(), 'cert-manager-controller'), [
    `--kubeconfig=${node.kubeconfigPath}`,
    '--leader-elect=false',
    '--cluster-resource-namespace=cert-manager',
    '--enable-certificate-owner-ref=true',
    '--v=1',
  ]);
  node.startProcess('cert-manager-cainjector', join(binDir(), 'cert-manager-cainjector'), [`--kubeconfig=${node.kubeconfigPath}`, '--leader-elect=false', '--v=1']);
}

export async function runCertManager(node: RealNode, log: (m: string) => void): Promise<CertManagerObservations> {
  await startCertManager(node);
  const t0 = Date.now();
  // kubectl's discovery can lag a just-established CRD by a moment ("no matches for kind"): a
  // user re-runs the command; so does the test, a few times.
  for (let i = 0; ; i++) {
    try {
      await node.sh(INSTALL_DEFAULT);
      break;
    } catch (e) {
      if (i >= 5 || !/no matches for kind/.test((e as Error).message)) throw e;
      await delay(2_000);
    }
  }
  await node.wait('certificate/multus-proxy-webhook', 'condition=Ready', { namespace: INSTALL_NAMESPACE, timeoutMs: 180_000 });
  await waitInstalled(node, { certsJob: false });
  log(`default install (cert-manager) ready in ${Date.now() - t0} ms`);
  // The caBundle injected by cert-manager's cainjector.
  for (let i = 0; i < 100; i++) {
    const b = await node.kubectl(['get', 'validatingwebhookconfiguration', 'multus-proxy-webhook', '-o', 'jsonpath={.webhooks[0].clientConfig.caBundle}']);
    if (b.length > 100) break;
    await delay(300);
  }
  const clusterIP = (await node.kubectl(['get', 'service', '-n', INSTALL_NAMESPACE, 'multus-proxy-webhook', '-o', 'jsonpath={.spec.clusterIP}'])).trim();
  const before = await secret(node, 'multus-proxy-webhook-tls');
  if (!before) throw new Error('cert-manager issued no multus-proxy-webhook-tls Secret');
  const secretBefore = serialOf(before.crt);
  let servedBefore = '';
  for (let i = 0; i < 100 && servedBefore !== secretBefore; i++) {
    servedBefore = await servedSerial(clusterIP, before.ca).catch(() => '');
    if (servedBefore !== secretBefore) await delay(500);
  }

  // Admissions through the webhook all along (server-side dry run: the webhook runs, nothing is stored).
  let stop = false;
  const admissions = { ok: 0, failed: 0, failures: [] as string[] };
  const probe = JSON.stringify({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'renewal-probe', annotations: { 'k8s.v1.cni.cncf.io/service-network': 'macvlan1' } },
    spec: { selector: { app: 'none' }, ports: [{ port: 80 }] },
  });
  const admitting = (async () => {
    while (!stop) {
      const r = await node.kubectlResult(['create', '-n', 'default', '--dry-run=server', '-o', 'jsonpath={.metadata.labels}', '-f', '-'], { input: probe, allowFail: true });
      if (r.code === 0 && r.stdout.includes('multus-proxy')) admissions.ok++;
      else {
        admissions.failed++;
        admissions.failures.push(`${r.stdout}${r.stderr}`.trim().slice(0, 200));
      }
      await delay(200);
    }
  })();

  const tDelete = Date.now();
  await node.kubectl(['delete', 'secret', '-n', INSTALL_NAMESPACE, 'multus-proxy-webhook-tls']);
  let after: { crt: string; ca: string } | undefined;
  let servedAfter = '';
  let pickedUpMs = -1;
  while (Date.now() - tDelete < 240_000) {
    after = await secret(node, 'multus-proxy-webhook-tls');
    if (after && serialOf(after.crt) !== secretBefore) {
      servedAfter = await servedSerial(clusterIP, after.ca).catch(() => '');
      if (servedAfter === serialOf(after.crt)) {
        pickedUpMs = Date.now() - tDelete;
        break;
      }
    }
    await delay(500);
  }
  // Keep admitting a little longer across the switch.
  await delay(3_000);
  stop = true;
  await admitting;
  log(`renewal: webhook served the new certificate ${pickedUpMs} ms after the Secret was deleted; admissions ${admissions.ok} ok, ${admissions.failed} failed`);
  return { secretBefore, servedBefore, secretAfter: after ? serialOf(after.crt) : '', servedAfter, pickedUpMs, admissions };
}
