// The chart's pre-delete hook (templates/node-agent-cleanup.yaml), run by the project's image with
// node: switches the node agent's DaemonSet to cleanup mode and waits until the rollout is done on
// every node, so `helm uninstall` leaves no chain, route or interface on any node. Each node's
// agent is replaced by a pod that runs `node-agent.js --cleanup` once the agent is gone (running
// it beside a live agent is not enough: its next sync recreates the chains), then idles, ready
// only when the cleanup succeeded. The API is called with the pod's service account; the CA comes
// from NODE_EXTRA_CA_CERTS.
import { readFileSync } from 'node:fs';

const [namespace, name, timeoutSeconds] = process.argv.slice(2);
const sa = '/var/run/secrets/kubernetes.io/serviceaccount';
const token = readFileSync(`${sa}/token`, 'utf8').trim();
const api = `https://${process.env.KUBERNETES_SERVICE_HOST}:${process.env.KUBERNETES_SERVICE_PORT}`;
const path = `/apis/apps/v1/namespaces/${namespace}/daemonsets/${name}`;
const CLEANUP = ['sh', '-c', 'node /app/dist/node-agent.js --cleanup && exec sleep infinity'];

async function call(method, body) {
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

const deadline = Date.now() + Number(timeoutSeconds) * 1000;
for (;;) {
  const ds = await call('GET');
  if (ds === undefined) {
    console.log(`daemonset ${namespace}/${name} not found: nothing to clean up`);
    process.exit(0);
  }
  const c = ds.spec.template.spec.containers[0];
  if (JSON.stringify(c.command) === JSON.stringify(CLEANUP)) break;
  c.command = CLEANUP;
  delete c.livenessProbe;
  c.readinessProbe = { exec: { command: ['grep', '-qx', 'sleep', '/proc/1/comm'] }, periodSeconds: 1 };
  try {
    await call('PUT', ds);
    console.log(`daemonset ${namespace}/${name} switched to cleanup mode`);
    break;
  } catch (e) {
    if (!String(e).includes(' 409 ') || Date.now() > deadline) throw e; // a conflict: read again
  }
}
for (;;) {
  const ds = await call('GET');
  const s = ds?.status ?? {};
  const desired = s.desiredNumberScheduled ?? 0;
  if (ds !== undefined && s.observedGeneration >= ds.metadata.generation && (s.updatedNumberScheduled ?? 0) === desired && (s.numberReady ?? 0) === desired) {
    console.log(`cleanup finished on ${desired} node(s)`);
    break;
  }
  if (Date.now() > deadline) {
    console.error(`cleanup not finished after ${timeoutSeconds} s: ${s.updatedNumberScheduled ?? 0} of ${desired} node(s) updated, ${s.numberReady ?? 0} ready (kubectl -n ${namespace} get pods; see docs/node-agent.md)`);
    process.exit(1);
  }
  await new Promise((r) => setTimeout(r, 1000));
}
