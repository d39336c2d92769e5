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
import { INSTALL_NAMESPACE, NETWORK_STATUS_ANNOTATION, PROXY_NAME, PROXY_NAME_LABEL, SERVICE_NAMESPACES_ANNOTATION, SERVICE_NETWORK_ANNOTATION, SERVICE_SELECTOR_ANNOTATION } from '../../src/keys.js';
import { sidecarRules } from './rules.js';
import { metricValues, sidecarHealthPort, sidecarMetrics, until, warningsAbout, type LoweredCap } from './tenant.js';
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

// --- what one object may cost: budgets per object, fair shares, the controller's loop ----------

/** Warning Events in `namespace` with `reason`, read as the admin, as "<kind>/<name>: <message>" (the blog's namespace is not the tenant's to read). */
export async function adminEvents(node: RealNode, namespace: string, reason: string): Promise<string[]> {
  const list = JSON.parse(await node.kubectl(['get', 'events', '-n', namespace, '--field-selector', `reason=${reason}`, '-o', 'json'])) as {
    items: { involvedObject: { kind: string; name: string }; message: string }[];
  };
  return list.items.map((e) => `${e.involvedObject.kind}/${e.involvedObject.name}: ${e.message}`);
}

/** Polls `read` until some line passes `want` (at most `ms`); resolves with the last lines read. */
async function eventsUntil(what: string, ms: number, read: () => Promise<string[]>, want: (line: string) => boolean): Promise<string[]> {
  return until(what, ms, async () => {
    const e = await read();
    return e.some(want) ? e : undefined;
  }).catch(() => read());
}

const labelled = (t: Tenant, name: string, annotations: Record<string, string>, spec: Record<string, unknown>, labels: Record<string, string> = {}): string =>
  JSON.stringify({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: t.namespace, labels: { ...labels, [PROXY_NAME_LABEL]: PROXY_NAME }, annotations }, spec });

/** Lines of the blog client's rules naming the tenant's Service `name` (its name or its cluster IP). */
async function blogClientRulesFor(node: RealNode, t: Tenant, name: string): Promise<string[]> {
  const ip = (await t.kubectl(['get', 'service', '-n', t.namespace, name, '-o', 'jsonpath={.spec.clusterIP}'])).stdout.trim();
  const re = ip === '' || ip === 'None' ? undefined : new RegExp(`(^|[^0-9.])${ip.replaceAll('.', '\\.')}([^0-9]|$)`);
  return (await sidecarRules(node, 'default', CLIENT)).filter((l) => l.includes(`${t.namespace}/${name}`) || (re?.test(l) ?? false));
}

export interface OverBudgetService {
  /** kubectl's answer to the Service with the service-network annotation (the webhook sees it). */
  annotated: ExecResult | undefined;
  /** kubectl's answer to the same Service with only the proxy-name label (the webhook never sees it). */
  labelOnly: ExecResult | undefined;
  /** ServiceOverBudget Events on the blog's client (its sidecar), read by the admin. */
  clientEvents: string[];
  /** Warning Events on the tenant's label-only Service (the node agent's, when it runs). */
  serviceEvents: string[];
  /** multus_proxy_sidecar_services_refused of the blog client, by budget. */
  refused: Record<string, number>;
  /** Lines of the blog client's rules naming the Service (must stay empty). */
  clientRules: string[];
}

export const emptyOverBudget = (): OverBudgetService => ({ annotated: undefined, labelOnly: undefined, clientEvents: [], serviceEvents: [], refused: {}, clientRules: [] });

/**
 * One Service over a budget per object, tried twice: with the service-network annotation naming
 * the blog's network (the webhook denies it up front), then with only the proxy-name label, which
 * the webhook never sees but every sidecar and the node agent cache. Those refuse it whole on
 * entry (ServiceOverBudget on each client pod and on the Service, services_refused{budget}).
 * Written with `kubectl create`: `apply` would copy it into an annotation, past the apiserver's
 * 256 KiB for annotations.
 */
function overBudgetService(node: RealNode, t: Tenant, name: string, spec: Record<string, unknown>, out: OverBudgetService): Attack {
  return {
    async attack() {
      out.annotated = await t.kubectl(['create', '-f', '-'], { input: labelled(t, `${name}-net`, { [SERVICE_NETWORK_ANNOTATION]: 'default/macvlan1' }, spec), timeoutMs: 120_000 });
      const since = Date.now();
      out.labelOnly = await t.kubectl(['create', '-f', '-'], { input: labelled(t, name, {}, spec), timeoutMs: 120_000 });
      if (out.labelOnly.code !== 0) throw new Error(`the apiserver refused the tenant's label-only Service ${name}: ${out.labelOnly.stderr.slice(0, 500)}`);
      // The blog client's own Event: the backends' sidecars say the same, sometimes sooner.
      const names = (l: string): boolean => l.startsWith(`Pod/${CLIENT}: `) && l.includes(`Service ${t.namespace}/${name} `);
      out.clientEvents = await eventsUntil(`a ServiceOverBudget Event on default/${CLIENT} naming ${name}`, 30_000, () => adminEvents(node, 'default', 'ServiceOverBudget'), names);
      out.serviceEvents = await warningsAbout(t, 'Service', name, since);
      const port = await sidecarHealthPort(node, 'default', CLIENT);
      out.refused = metricValues(await sidecarMetrics(node, 'default', CLIENT, port), 'multus_proxy_sidecar_services_refused');
      out.clientRules = await blogClientRulesFor(node, t, name);
    },
    async undo() {
      await t.kubectl(['delete', 'service', '-n', t.namespace, name, `${name}-net`, '--ignore-not-found', '--wait=true'], { timeoutMs: 120_000 });
    },
  };
}

/** 5,000 ports (the 329 KB Service; the budget is 256): every client OOM-killed before. */
export function manyPorts(node: RealNode, t: Tenant, out: OverBudgetService): Attack {
  const ports = Array.from({ length: 5000 }, (_, i) => ({ name: `p${i}`, port: 10000 + i, protocol: 'TCP' }));
  return overBudgetService(node, t, 'ports5k', { selector: { app: 'ports5k' }, ports }, out);
}

/** A LoadBalancer Service with 40,000 source ranges (about 0.8 MB; the budget is 1,000, the webhook's 256). */
export function manySourceRanges(node: RealNode, t: Tenant, out: OverBudgetService): Attack {
  const ranges = Array.from({ length: 40_000 }, (_, i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}/32`);
  return overBudgetService(node, t, 'ranges40k', { type: 'LoadBalancer', selector: { app: 'ranges40k' }, ports: [{ port: 80 }], loadBalancerSourceRanges: ranges }, out);
}

export interface BigLabels {
  created: ExecResult | undefined;
  bytes: number;
  /** Lines of the blog client's rules naming the Service (must stay empty). */
  clientRules: string[];
}

/**
 * A Service of about 1 MiB of labels that carries only the proxy-name label (no service-network
 * annotation, so the webhook never sees it). Every sidecar, the node agent and the controller
 * watch labelled Services: each slims it to the proxy-name label before caching it; it names no
 * network, so nobody serves it.
 */
export function bigLabels(node: RealNode, t: Tenant, out: BigLabels): Attack {
  const labels: Record<string, string> = {};
  for (let i = 0; i < 11_000; i++) labels[`l${i}.example.com/k`] = `${String(i).padStart(6, '0')}${'v'.repeat(57)}`;
  const body = labelled(t, 'labels1m', {}, { selector: { app: 'labels1m' }, ports: [{ port: 80 }] }, labels);
  return {
    async attack() {
      out.bytes = body.length;
      out.created = await t.kubectl(['create', '-f', '-'], { input: body, timeoutMs: 120_000 });
      if (out.created.code !== 0) throw new Error(`the apiserver refused the tenant's Service of ${body.length} bytes: ${out.created.stderr.slice(0, 500)}`);
      await delay(5_000); // every watcher got it
      out.clientRules = await blogClientRulesFor(node, t, 'labels1m');
    },
    async undo() {
      await t.kubectl(['delete', 'service', '-n', t.namespace, 'labels1m', '--ignore-not-found', '--wait=true'], { timeoutMs: 120_000 });
    },
  };
}

export interface BigNad {
  created: ExecResult | undefined;
  bytes: number;
  /** Warning Events on the tenant's Service naming the NAD, and on the NAD itself. */
  events: string[];
}

const BIG_NAD = 'big';

/**
 * A NAD of 1.4 MiB (a CNI config padded with one long field), named by a Service of the tenant's.
 * The controller keeps only the NAD's sharing annotation and IPAM range (bounded at 64 KiB of
 * config), the node agent refuses a config over 64 KiB: an Event names the NAD.
 */
export function bigNad(t: Tenant, out: BigNad): Attack {
  const config = JSON.stringify({ cniVersion: '0.3.1', type: 'macvlan', master: 'ens4', mode: 'bridge', ipam: { type: 'whereabouts', range: '10.1.1.0/24' }, padding: 'x'.repeat(1_400_000) });
  const nad = { apiVersion: 'k8s.cni.cncf.io/v1', kind: 'NetworkAttachmentDefinition', metadata: { name: BIG_NAD, namespace: t.namespace }, spec: { config } };
  return {
    async attack() {
      out.bytes = config.length;
      out.created = await t.kubectl(['create', '-f', '-'], { input: JSON.stringify(nad), timeoutMs: 120_000 });
      if (out.created.code !== 0) throw new Error(`the apiserver refused the tenant's NAD of ${config.length} bytes: ${out.created.stderr.slice(0, 500)}`);
      const since = Date.now();
      const svc = await t.kubectl(['create', '-f', '-'], { input: labelled(t, BIG_NAD, { [SERVICE_NETWORK_ANNOTATION]: BIG_NAD }, { selector: { app: BIG_NAD }, ports: [{ port: 80 }] }) });
      if (svc.code !== 0) throw new Error(`the tenant could not create its Service on ${BIG_NAD}: ${svc.stderr}`);
      const read = async (): Promise<string[]> => [...(await warningsAbout(t, 'Service', BIG_NAD, since)), ...(await warningsAbout(t, 'NetworkAttachmentDefinition', BIG_NAD))];
      out.events = await eventsUntil(`a Warning Event naming ${t.namespace}/${BIG_NAD}`, 30_000, read, (l) => l.includes(`${t.namespace}/${BIG_NAD}`));
    },
    async undo() {
      await t.kubectl(['delete', 'service', '-n', t.namespace, BIG_NAD, '--ignore-not-found', '--wait=true']);
      await t.kubectl(['delete', 'network-attachment-definitions.k8s.cni.cncf.io', '-n', t.namespace, BIG_NAD, '--ignore-not-found', '--wait=true'], { timeoutMs: 120_000 });
    },
  };
}

export interface FairShare {
  /** ServiceCapReached Events on the blog's client, read by the admin. */
  events: string[];
  /** multus_proxy_sidecar_services_dropped of the blog's client while the tenant fills the network. */
  dropped: Record<string, number>;
  /** The tenant's Services that the blog's client serves (rules naming them). */
  served: string[];
}

const FAIR = 5;
/** A pod of the tenant's that never runs (no node matches), claiming an address on the blog's network in its own status (no optional policy). */
const fairBackend = (ns: string): string =>
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'fair-backend',
      namespace: ns,
      labels: { app: 'fair' },
      annotations: { [NETWORK_STATUS_ANNOTATION]: JSON.stringify([{ name: 'default/macvlan1', interface: 'net1', ips: ['10.1.1.201'] }]) },
    },
    spec: { nodeSelector: { 'example.com/no-such-node': 'true' }, containers: [{ name: 'web', image: 'ghcr.io/redhat-nfvpe/multus-service-demo:fedora-nginx' }] },
  });

/**
 * Fair shares: the admin's cap lowered to `lowered.cap` Service ports per network (shared with
 * attack 5, and restored here; the blog's client is recreated under it) and shares the blog's NAD with the tenant's second
 * namespace `aaa-tenant`, which sorts before `default`. The tenant puts FAIR one-port Services
 * there on the blog's network (backed by a pod of its own, so the controller writes their slices
 * and they count). Before, the cut went by name and the blog's own Service was dropped (0 of 20);
 * now the namespace over its share loses only its own Services, and ServiceCapReached on the
 * blog's client names it.
 */
export function fairShare(node: RealNode, aaa: Tenant, out: FairShare, lowered: LoweredCap): Attack {
  const names = Array.from({ length: FAIR }, (_, i) => `fair-${i}`);
  return {
    async prepare() {
      await lowered.lower();
      await lowered.recreateClient('default', (args, o) => node.kubectlResult(args, { ...o, allowFail: true }));
      await node.kubectl(['annotate', 'network-attachment-definitions.k8s.cni.cncf.io', '-n', 'default', 'macvlan1', '--overwrite', `${SERVICE_NAMESPACES_ANNOTATION}=${aaa.namespace}`]);
    },
    async attack() {
      const pod = await aaa.kubectl(['apply', '-f', '-'], { input: fairBackend(aaa.namespace) });
      if (pod.code !== 0) throw new Error(`the tenant could not create its backend in ${aaa.namespace}: ${pod.stderr}`);
      for (const name of names) {
        const r = await aaa.kubectl(['apply', '-f', '-'], {
          input: JSON.stringify({
            apiVersion: 'v1',
            kind: 'Service',
            metadata: { name, namespace: aaa.namespace, labels: { [PROXY_NAME_LABEL]: PROXY_NAME }, annotations: { [SERVICE_NETWORK_ANNOTATION]: 'default/macvlan1' } },
            spec: { selector: { app: 'fair' }, ports: [{ port: 80 }] },
          }),
        });
        if (r.code !== 0) throw new Error(`the tenant could not create ${aaa.namespace}/${name} on the shared network: ${r.stderr}`);
      }
      // The sidecar meets the Services one by one and says so each time: wait for the Event that
      // counts all of them (an earlier one names the namespace too, with fewer).
      out.events = await eventsUntil(
        `a ServiceCapReached Event on default/${CLIENT} naming ${aaa.namespace} with its ${FAIR} Services`,
        60_000,
        () => adminEvents(node, 'default', 'ServiceCapReached'),
        (l) => l.includes(`namespace ${aaa.namespace} asks for ${FAIR},`),
      );
      const port = await sidecarHealthPort(node, 'default', CLIENT);
      out.dropped = metricValues(await sidecarMetrics(node, 'default', CLIENT, port), 'multus_proxy_sidecar_services_dropped');
      const served: string[] = [];
      for (const n of names) if ((await blogClientRulesFor(node, aaa, n)).length > 0) served.push(n);
      out.served = served;
    },
    async undo() {
      await aaa.kubectl(['delete', 'service', '-n', aaa.namespace, ...names, '--ignore-not-found']);
      await aaa.kubectl(['delete', 'pod', '-n', aaa.namespace, 'fair-backend', '--ignore-not-found', '--wait=false']);
      await node.kubectl(['annotate', 'network-attachment-definitions.k8s.cni.cncf.io', '-n', 'default', 'macvlan1', `${SERVICE_NAMESPACES_ANNOTATION}-`]);
      // The last attack under the lowered cap: every client recreated under it gets the installed one back.
      await lowered.restore();
    },
  };
}

export interface BigNetworkStatus {
  /** The controller's Lease before and after: holder, transitions, renew time. */
  leaseBefore: Lease | undefined;
  leaseAfter: Lease | undefined;
  /** NetworkStatusInvalid Warnings on the tenant's Service. */
  events: string[];
  bytes: number;
}

export interface Lease {
  holder: string;
  transitions: number;
  renewTime: string;
}

const CONTROLLER_LEASE = 'multus-proxy-controller';
const BIG_STATUS_PODS = 10;

async function controllerLease(node: RealNode): Promise<Lease | undefined> {
  const r = await node.kubectlResult(['get', 'lease', '-n', INSTALL_NAMESPACE, CONTROLLER_LEASE, '-o', 'json'], { allowFail: true });
  if (r.code !== 0) return undefined;
  const l = JSON.parse(r.stdout) as { spec?: { holderIdentity?: string; leaseTransitions?: number; renewTime?: string } };
  return { holder: l.spec?.holderIdentity ?? '', transitions: l.spec?.leaseTransitions ?? 0, renewTime: l.spec?.renewTime ?? '' };
}

/** A network-status of about `bytes` bytes: one net1 entry with thousands of addresses (quadratic de-duplication before). */
function bigStatus(network: string, bytes: number): string {
  const ips: string[] = [];
  let size = 100;
  for (let i = 0; size < bytes; i++) {
    const ip = `10.1.${(i >> 8) & 255}.${i & 255}`;
    ips.push(ip);
    size += ip.length + 3;
  }
  return JSON.stringify([{ name: network, interface: 'net1', ips }]);
}

/**
 * Ten pods of the tenant's with a network-status of about 250 KiB each (the apiserver's bound for
 * all annotations is 256 KiB), Pending (no node matches), selected by a Service of the tenant's
 * on its own network. Before, their parse blocked the controller's loop for seconds (about thirty
 * such pods pass the lease's renew deadline). Now each status is refused past 64 KiB with a
 * NetworkStatusInvalid Event naming the pod, the controller keeps renewing its lease, and other
 * namespaces' slices keep following their pods (guard).
 */
export function bigNetworkStatus(node: RealNode, t: Tenant, out: BigNetworkStatus): Attack {
  const status = bigStatus(`${t.namespace}/macvlan1`, 250 * 1024);
  const podNames = Array.from({ length: BIG_STATUS_PODS }, (_, i) => `bigstatus-${i}`);
  return {
    async attack() {
      out.bytes = status.length;
      out.leaseBefore = await controllerLease(node);
      const since = Date.now();
      const svc = await t.kubectl(['create', '-f', '-'], { input: labelled(t, 'bigstatus', { [SERVICE_NETWORK_ANNOTATION]: 'macvlan1' }, { selector: { app: 'bigstatus' }, ports: [{ port: 80 }] }) });
      if (svc.code !== 0) throw new Error(`the tenant could not create its Service: ${svc.stderr}`);
      for (const name of podNames) {
        const p = {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name, namespace: t.namespace, labels: { app: 'bigstatus' }, annotations: { [NETWORK_STATUS_ANNOTATION]: status, 'multus-proxy.k8s.cni.cncf.io/inject': 'false' } },
          spec: { nodeSelector: { 'example.com/no-such-node': 'true' }, containers: [{ name: 'web', image: 'ghcr.io/redhat-nfvpe/multus-service-demo:fedora-nginx' }] },
        };
        const r = await t.kubectl(['create', '-f', '-'], { input: JSON.stringify(p), timeoutMs: 60_000 });
        if (r.code !== 0) throw new Error(`the apiserver refused the tenant's pod ${name} (${status.length} bytes of status): ${r.stderr.slice(0, 500)}`);
      }
      out.events = await eventsUntil(
        'NetworkStatusInvalid naming a bigstatus pod',
        30_000,
        () => warningsAbout(t, 'Service', 'bigstatus', since),
        (l) => l.includes(`Pod ${t.namespace}/bigstatus-`),
      );
      await delay(12_000); // past a lease renew period, with the pods in place
      out.leaseAfter = await controllerLease(node);
    },
    async undo() {
      await t.kubectl(['delete', 'pod', '-n', t.namespace, ...podNames, '--ignore-not-found', '--grace-period=0', '--wait=true'], { timeoutMs: 120_000 });
      await t.kubectl(['delete', 'service', '-n', t.namespace, 'bigstatus', '--ignore-not-found']);
    },
  };
}
