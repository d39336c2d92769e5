/** The Kubernetes client every program connects with: a kubeconfig (and context) when given, in-cluster otherwise. */
import { createKubeClient, type KubeClient } from '../kube/client.js';
import { loadKubeConnection } from '../kube/config.js';

export function connectKube(opts: { readonly kubeconfig?: string | undefined; readonly context?: string | undefined }): KubeClient {
  return createKubeClient(loadKubeConnection({ ...(opts.kubeconfig ? { kubeconfig: opts.kubeconfig } : {}), ...(opts.context ? { context: opts.context } : {}) }));
}
