/**
 * The background churn of deletion-churn.ts in its own process: `node --import tsx
 * background-churn-proc.ts KUBECONFIG NAMESPACE SERVICES EVERY_MS`. Prints `ready` once its
 * Services and pods exist; rewrites their addresses until SIGTERM, then exits after the round.
 */
import { createKubeClient } from '../../src/kube/client.js';
import { fromKubeconfigFiles } from '../../src/kube/config.js';
import { startBackground } from './deletion-churn.js';

const [kubeconfig = '', ns = '', services = '0', everyMs = '500'] = process.argv.slice(2);
const stop = await startBackground(createKubeClient(fromKubeconfigFiles([kubeconfig])), ns, `${ns}/net`, { services: Number(services), everyMs: Number(everyMs) });
process.stdout.write('ready\n');
process.once('SIGTERM', () => void stop().then(() => process.exit(0)));
