/**
 * The pod's own annotations as the sidecar reads them: where they come from (the downwardAPI file
 * the webhook mounts, or a watch on the pod), and the last good value of each (a malformed update
 * is logged once, told to the pod's owner, and ignored).
 */
import type { Logger } from '../../src/log.js';
import type { KubeClient } from '../../src/kube/client.js';
import { createInformer, type InformerOptions } from '../../src/kube/informer.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1Pod } from '../../src/kube/types.js';
import type { NetworkRef } from '../../src/annotations/service-network.js';
import type { NetworkStatusEntry } from '../../src/annotations/network-status.js';
import { readNetworkStatus, readServedNetworks } from '../../src/dataplane/index.js';
import { slimPod } from './slim.js';
import { watchAnnotationsFile } from './pod-file.js';
import type { InputKey } from './problems.js';

/** Where the pod's annotations come from: the file, or a watch on the pod. */
export interface PodSource {
  start(): void;
  readonly synced: Promise<void>;
  found(): boolean;
  stop(): void;
}

export interface PodSourceOptions {
  readonly podName: string;
  readonly podNamespace: string;
  readonly annotationsFile?: string | undefined;
  readonly annotationsPollMs?: number;
}

export function podSource(o: PodSourceOptions, client: KubeClient, log: Logger, informerOptions: Partial<InformerOptions>, onPod: (pod: V1Pod) => void): PodSource {
  const file = o.annotationsFile;
  if (file !== undefined) {
    return watchAnnotationsFile({
      file,
      log,
      ...(o.annotationsPollMs !== undefined ? { pollMs: o.annotationsPollMs } : {}),
      onChange: (annotations) => onPod({ metadata: { name: o.podName, namespace: o.podNamespace, annotations } }),
    });
  }
  const informer = createInformer<V1Pod>(client, { ...informerOptions, path: apiPath('', 'v1', 'pods', o.podNamespace), fieldSelector: `metadata.name=${o.podName}`, transform: slimPod });
  informer.on({
    add: (p) => onPod(p),
    update: (p) => onPod(p),
    // The pod is going away; keep serving until SIGTERM so its last connections still work.
    delete: () => log.info('own pod deleted; keeping rules until terminated'),
  });
  return { start: () => informer.start(), synced: informer.synced, found: () => informer.list().length > 0, stop: () => informer.stop() };
}

const sameRefs = (a: readonly NetworkRef[], b: readonly NetworkRef[]): boolean => JSON.stringify(a) === JSON.stringify(b);

/** The last good service-network and network-status annotations. */
export class PodInput {
  served: NetworkRef[] = [];
  status: NetworkStatusEntry[] = [];
  private readonly lastLogged = { served: '', status: '' };

  constructor(
    private readonly log: Logger,
    /** Told each read: undefined when the annotation is good. */
    private readonly inputRead: (key: InputKey, error: string | undefined) => void,
  ) {}

  read(pod: V1Pod): void {
    const s = readServedNetworks(pod);
    this.inputRead('service-network', s.ok ? undefined : s.error);
    if (s.ok) {
      this.lastLogged.served = '';
      if (!sameRefs(s.value, this.served)) {
        this.log.info({ networks: s.value.map((r) => `${r.namespace}/${r.name}`) }, 'pod service networks');
        this.served = s.value;
      }
    } else if (s.error !== this.lastLogged.served) {
      this.lastLogged.served = s.error;
      this.log.error({ problem: s.error }, `${s.error} (keeping the last good networks)`);
    }
    const st = readNetworkStatus(pod);
    this.inputRead('network-status', st.ok ? undefined : st.error);
    if (st.ok) {
      this.lastLogged.status = '';
      this.status = st.value;
    } else if (st.error !== this.lastLogged.status) {
      this.lastLogged.status = st.error;
      this.log.error({ problem: st.error }, `${st.error} (keeping the last good network status)`);
    }
  }
}
