/**
 * Child process for informer.test.ts: syncs an informer, stops it, and must then exit on its own
 * (no timer, socket or request left). Prints "synced N" and "stopped".
 */
import { loadKubeConnection } from '../../src/kube/config.js';
import { createKubeClient } from '../../src/kube/client.js';
import { createInformer } from '../../src/kube/informer.js';

const [kubeconfig, path] = process.argv.slice(2);
if (!kubeconfig || !path) throw new Error('usage: informer-child.ts KUBECONFIG PATH');
const client = createKubeClient(loadKubeConnection({ kubeconfig }));
// A short watchdog and backoff: their timers must be gone after stop() too.
const inf = createInformer(client, { path, watchdogMs: 60_000, minBackoffMs: 100 });
inf.start();
await inf.synced;
console.log(`synced ${inf.list().length}`);
// Let the watch get established before stopping.
await new Promise((r) => setTimeout(r, 300));
inf.stop();
console.log('stopped');
