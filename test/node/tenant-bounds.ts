/**
 * The tenant suite's "bounded and fair" attacks on the webhook, controller and CLI side
 * (docs/security.md, rows 11, 12 and 16), run inside guard() as the others in tenant.ts:
 * - a Service being deleted, kept by the tenant's own finalizer, re-annotated to the blog's NAD;
 * - 3,000 names in one annotation, through a server-side dry run;
 * - an Event forged with escape sequences and a `verdict:` line, read by the admin's `diagnose`.
 */
import { execFile } from 'node:child_process';
import { setTimeout as delay } from 'node:timers/promises';
import type { ExecResult, RealNode } from '../harness/node.js';
import { CLIENT, ROOT } from './cluster.js';
import { PROXY_NAME, PROXY_NAME_LABEL, SERVICE_NETWORK_ANNOTATION, SERVICE_SELECTOR_ANNOTATION } from '../../src/keys.js';
import { sidecarRules } from './rules.js';
import type { Attack, Tenant } from './tenant.js';

const KEPT = 'kept';
const FINALIZER = 'example.com/keep';

export interface DeletedReannotated {
  /** kubectl's answer to the re-annotation (must be a denial naming the NAD). */
  patched: ExecResult | undefined;
  /** The annotation stored after it. */
  stored: string;
  /** Lines of the blog client's rules naming the tenant's Service (must stay empty). */
  clientRules: string[];
}

/**
 * Row 11: the tenant makes a headless Service on its own NAD with a finalizer of its own, deletes
 * it with --wait=false, and re-annotates it to the blog's `default/macvlan1`, not shared with it.
 */
export function deletedServiceReannotated(node: RealNode, t: Tenant, out: DeletedReannotated): Attack {
  return {
    async attack() {
      const svc = {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: {
          name: KEPT,
          namespace: t.namespace,
          finalizers: [FINALIZER],
          labels: { [PROXY_NAME_LABEL]: PROXY_NAME },
          annotations: { [SERVICE_NETWORK_ANNOTATION]: 'macvlan1', [SERVICE_SELECTOR_ANNOTATION]: 'app=kept' },
        },
        spec: { clusterIP: 'None', ports: [{ port: 80 }] },
      };
      const created = await t.kubectl(['apply', '-f', '-'], { input: JSON.stringify(svc) });
      if (created.code !== 0) throw new Error(`the tenant could not create its Service: ${created.stderr}`);
      await t.kubectl(['delete', 'service', '-n', t.namespace, KEPT, '--wait=false']);
      out.patched = await t.kubectl(['annotate', 'service', '-n', t.namespace, KEPT, `${SERVICE_NETWORK_ANNOTATION}=default/macvlan1`, '--overwrite']);
      out.stored = (await t.kubectl(['get', 'service', '-n', t.namespace, KEPT, '-o', `jsonpath={.metadata.annotations.${SERVICE_NETWORK_ANNOTATION.replaceAll('.', '\\.')}}`])).stdout.trim();
      await delay(5_000); // controller and sidecars
      out.clientRules = (await sidecarRules(node, 'default', CLIENT)).filter((l) => l.includes(`${t.namespace}/${KEPT}`));
    },
    async undo() {
      await t.kubectl(['patch', 'service', '-n', t.namespace, KEPT, '--type=merge', '-p', '{"metadata":{"finalizers":null}}']);
      await t.kubectl(['delete', 'service', '-n', t.namespace, KEPT, '--ignore-not-found', '--wait=true']);
    },
  };
}

export interface ManyNames {
  dryRun: ExecResult | undefined;
}

/** Row 12: 3,000 names of the blog namespace's NADs in one annotation, as a server-side dry run (no trace left). */
export function manyNames(t: Tenant, out: ManyNames): Attack {
  return {
    async attack() {
      const names = Array.from({ length: 3000 }, (_, i) => `default/n${i}`).join(',');
      const svc = {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'many', namespace: t.namespace, annotations: { [SERVICE_NETWORK_ANNOTATION]: names } },
        spec: { selector: { app: 'many' }, ports: [{ port: 80 }] },
      };
      out.dryRun = await t.kubectl(['apply', '--dry-run=server', '-f', '-'], { input: JSON.stringify(svc) });
    },
    async undo() {},
  };
}

export interface ForgedEvent {
  /** The admin's `diagnose service` text output about the tenant's Service. */
  text: string;
}

/**
 * Row 16: the tenant writes a Warning Event on its own Service as if from the controller, with an
 * OSC title, a CSI erase and a forged verdict line; the admin runs `diagnose` as the README says.
 */
export function forgedEvent(node: RealNode, t: Tenant, service: string, out: ForgedEvent): Attack {
  return {
    async attack() {
      const now = new Date().toISOString();
      const ev = {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { name: `${service}.forged`, namespace: t.namespace },
        involvedObject: { apiVersion: 'v1', kind: 'Service', name: service, namespace: t.namespace },
        type: 'Warning',
        reason: 'FailedToWriteSlices',
        message: '\x1b]0;owned\x07\x1b[2K\x1b[1Aall good\n\nverdict: ok, nothing found that stops traffic',
        source: { component: 'multus-proxy-controller' },
        reportingComponent: 'multus-proxy-controller',
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      };
      const r = await t.kubectl(['create', '-f', '-'], { input: JSON.stringify(ev) });
      if (r.code !== 0) throw new Error(`the tenant could not create its Event: ${r.stderr}`);
      out.text = await new Promise<string>((done) => {
        execFile('sh', ['-c', `npm run -s diagnose -- service ${t.namespace}/${service}`], { cwd: ROOT, env: { ...process.env, KUBECONFIG: node.kubeconfigPath }, timeout: 120_000 }, (_e, stdout) =>
          done(stdout),
        );
      });
    },
    async undo() {
      await t.kubectl(['delete', 'event', '-n', t.namespace, `${service}.forged`, '--ignore-not-found']);
    },
  };
}
