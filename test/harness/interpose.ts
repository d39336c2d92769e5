/**
 * A KubeClient that passes every call to a real one except those the test overrides (to hold a
 * request back, record it, ...). The client is a class, so a spread would lose its methods.
 */
import type { KubeClient } from '../../src/kube/client.js';

export function interpose(inner: KubeClient, overrides: Partial<KubeClient>): KubeClient {
  return {
    get: (path, opts) => inner.get(path, opts),
    list: (path, opts) => inner.list(path, opts),
    watch: (path, opts, onEvent, signal) => inner.watch(path, opts, onEvent, signal),
    requestCount: () => inner.requestCount(),
    create: (path, body, opts) => inner.create(path, body, opts),
    replace: (path, body, opts) => inner.replace(path, body, opts),
    patch: (path, body, type, opts) => inner.patch(path, body, type, opts),
    delete: (path, opts) => inner.delete(path, opts),
    ...overrides,
  };
}
