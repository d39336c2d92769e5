/**
 * The EndpointSlices of the pod's networks, by a server-side selector on their network label. When
 * the networks change, an informer with the new selector is started and the old one is stopped
 * only once the new one has synced, so no rules are lost in between.
 */
import { MANAGED_BY, MANAGED_BY_LABEL, NETWORK_LABEL } from '../../src/keys.js';
import type { Logger } from '../../src/log.js';
import type { KubeClient } from '../../src/kube/client.js';
import { createInformer, type Informer, type InformerOptions } from '../../src/kube/informer.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1EndpointSlice } from '../../src/kube/types.js';
import { slimEndpointSlice } from './slim.js';

/** The slice selector for a set of networks (label values already sorted and unique). */
export function sliceSelector(labelValues: readonly string[]): string {
  return `${MANAGED_BY_LABEL}=${MANAGED_BY},${NETWORK_LABEL} in (${labelValues.join(',')})`;
}

export interface SliceWatchDeps {
  readonly client: KubeClient;
  readonly log: Logger;
  informerOptions(name: string): Partial<InformerOptions>;
  /** A slice of the current informer changed (before/after), or a pending one's did (both undefined). */
  onChange(slice: V1EndpointSlice, change: { before: V1EndpointSlice | undefined; after: V1EndpointSlice | undefined } | undefined, informerSynced: boolean): void;
  /** The current informer was replaced (or dropped): its list is the state's slices now. */
  onReplaced(): void;
}

export class SliceWatch {
  /** The informer whose contents are used. */
  private current: Informer<V1EndpointSlice> | undefined;
  /** One being brought up for a new selector. */
  private pending: Informer<V1EndpointSlice> | undefined;
  private key = '';
  private stopped = false;
  /** Wakes settled() when `pending` is replaced or dropped (a stopped informer never syncs). */
  private pendingReplaced: () => void = () => {};

  constructor(private readonly d: SliceWatchDeps) {}

  list(): V1EndpointSlice[] {
    return this.current?.list() ?? [];
  }

  /** Watches the slices of these networks' label values (sorted, unique); nothing when empty. */
  follow(values: readonly string[]): void {
    const key = values.join(',');
    if (key === this.key || this.stopped) return;
    this.key = key;
    this.dropPending();
    if (values.length === 0) {
      this.current?.stop();
      this.current = undefined;
      this.d.log.info('pod serves no networks; not watching EndpointSlices');
      this.d.onReplaced();
      return;
    }
    const labelSelector = sliceSelector(values);
    const next = createInformer<V1EndpointSlice>(this.d.client, {
      ...this.d.informerOptions('endpointslices'),
      path: apiPath('discovery.k8s.io', 'v1', 'endpointslices'),
      labelSelector,
      transform: slimEndpointSlice,
    });
    this.pending = next;
    next.on({
      add: (s) => this.changed(next, s, undefined, s),
      update: (s, old) => this.changed(next, s, old, s),
      delete: (s, stored) => this.changed(next, s, stored, undefined),
    });
    this.d.log.info({ labelSelector }, 'watching EndpointSlices');
    next.start();
    void next.synced.then(() => this.promote(next));
  }

  /**
   * Waits until the current slice informer has synced. The one awaited may be replaced while it
   * lists (the pod's networks changed) and then, stopped, never syncs: so each wait also ends when
   * it is replaced, and this waits on whichever is current.
   */
  async settled(): Promise<void> {
    while (!this.stopped && this.pending !== undefined) {
      const p = this.pending;
      const replaced = new Promise<void>((resolve) => (this.pendingReplaced = resolve));
      // On sync its then() in follow() ran first (registered first) and promoted it.
      await Promise.race([p.synced, replaced]);
    }
    this.pendingReplaced = () => {};
  }

  stop(): void {
    this.stopped = true;
    this.pendingReplaced();
    this.current?.stop();
    this.pending?.stop();
  }

  private dropPending(): void {
    this.pending?.stop();
    this.pending = undefined;
    this.pendingReplaced();
  }

  private promote(next: Informer<V1EndpointSlice>): void {
    if (this.pending !== next) return;
    const old = this.current;
    this.current = next;
    this.pending = undefined;
    old?.stop();
    this.d.onReplaced();
  }

  private changed(informer: Informer<V1EndpointSlice>, slice: V1EndpointSlice, before: V1EndpointSlice | undefined, after: V1EndpointSlice | undefined): void {
    if (informer !== this.current && informer !== this.pending) return;
    // A pending informer's objects reach the state as its list, once it replaces the current one.
    this.d.onChange(slice, informer === this.current ? { before, after } : undefined, informer.hasSynced());
  }
}
