// The chart's uninstall hooks, run by the project's image with node and the pod's service account
// (the CA from NODE_EXTRA_CA_CERTS):
//   node-agent <namespace> <daemonset> <timeout-s>   (pre-delete)
//     switches the node agent's DaemonSet to cleanup mode and waits until every node ran
//     `node-agent.js --cleanup` (once its agent is gone: beside a live agent the next sync would
//     recreate the chains), so no chain, route or interface stays on any node.
//   controller <release-namespace>                   (post-delete, the controller is gone)
//     deletes what the controller wrote while it ran, which Helm does not know: its
//     EndpointSlices, the sidecars' ClusterRoleBinding and RoleBindings, and the certificate
//     Secrets the bootstrap Job or cert-manager made.
import { readFileSync } from 'node:fs';

const [mode, ...args] = process.argv.slice(2);
const token = readFileSync('/var/run/secrets/kubernetes.io/serviceaccount/token', 'utf8').trim();
const api = `https://${process.env.KUBERNETES_SERVICE_HOST}:${process.env.KUBERNETES_SERVICE_PORT}`;

/** One API call; undefined for 404 (already gone). */
async function call(method, path, body) {
  const res = await fetch(api + path, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status === 404) return undefined;
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text);
}

const CLEANUP = ['sh', '-c', 'node /app/dist/node-agent.js --cleanup && exec sleep infinity'];

async function nodeAgent(namespace, name, timeoutSeconds) {
  const path = `/apis/apps/v1/namespaces/${namespace}/daemonsets/${name}`;
  const deadline = Date.now() + Number(timeoutSeconds) * 1000;
  for (;;) {
    const ds = await call('GET', path);
    if (ds === undefined) return console.log(`daemonset ${namespace}/${name} not found: nothing to clean up`);
    const c = ds.spec.template.spec.containers[0];
    if (JSON.stringify(c.command) === JSON.stringify(CLEANUP)) break;
    c.command = CLEANUP;
    delete c.livenessProbe;
    c.readinessProbe = { exec: { command: ['grep', '-qx', 'sleep', '/proc/1/comm'] }, periodSeconds: 1 };
    // Once cleaned up it only idles, as PID 1 that ignores SIGTERM: nothing to wait for on delete.
    ds.spec.template.spec.terminationGracePeriodSeconds = 1;
    try {
      await call('PUT', path, ds);
      console.log(`daemonset ${namespace}/${name} switched to cleanup mode`);
      break;
    } catch (e) {
      if (!String(e).includes(': 409 ') || Date.now() > deadline) throw e; // a conflict: read again
    }
  }
  for (;;) {
    const ds = await call('GET', path);
    const s = ds?.status ?? {};
    const desired = s.desiredNumberScheduled ?? 0;
    if (ds !== undefined && s.observedGeneration >= ds.metadata.generation && (s.updatedNumberScheduled ?? 0) === desired && (s.numberReady ?? 0) === desired) {
      return console.log(`cleanup finished on ${desired} node(s)`);
    }
    if (Date.now() > deadline) {
      console.error(`cleanup not finished after ${timeoutSeconds} s: ${s.updatedNumberScheduled ?? 0} of ${desired} node(s) updated, ${s.numberReady ?? 0} ready (kubectl -n ${namespace} get pods; docs/node-agent.md)`);
      process.exit(1);
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

async function deleteListed(listPath, itemPath) {
  const list = await call('GET', listPath);
  for (const o of list?.items ?? []) {
    await call('DELETE', itemPath(o.metadata));
    console.log(`deleted ${itemPath(o.metadata)}`);
  }
}

async function controller(namespace) {
  const managed = encodeURIComponent('endpointslice.kubernetes.io/managed-by=multus-proxy-controller');
  await deleteListed(`/apis/discovery.k8s.io/v1/endpointslices?labelSelector=${managed}`, (m) => `/apis/discovery.k8s.io/v1/namespaces/${m.namespace}/endpointslices/${m.name}`);
  const ours = encodeURIComponent('app.kubernetes.io/managed-by=multus-proxy-controller');
  await deleteListed(`/apis/rbac.authorization.k8s.io/v1/rolebindings?labelSelector=${ours}`, (m) => `/apis/rbac.authorization.k8s.io/v1/namespaces/${m.namespace}/rolebindings/${m.name}`);
  for (const path of [
    '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/multus-proxy-sidecar',
    ...['multus-proxy-webhook-tls', 'multus-proxy-webhook-ca', 'multus-proxy-ca'].map((s) => `/api/v1/namespaces/${namespace}/secrets/${s}`),
  ]) {
    if ((await call('DELETE', path)) !== undefined) console.log(`deleted ${path}`);
  }
}

if (mode === 'node-agent') await nodeAgent(args[0], args[1], args[2]);
else if (mode === 'controller') await controller(args[0]);
else {
  console.error(`uninstall-hook: unknown mode ${JSON.stringify(mode)}: use node-agent or controller`);
  process.exit(2);
}
