/**
 * A program's informers as one runnable: started together, synced when all have listed, stopped
 * together. Readiness reads `notSynced()` while the caches fill.
 */
import type { Informer } from '../kube/informer.js';
import type { KubeObject } from '../kube/types.js';
import type { Runnable } from './program.js';

type AnyInformer = Pick<Informer<KubeObject>, 'start' | 'stop' | 'synced' | 'hasSynced'>;

export class InformerSet implements Runnable {
  readonly name = 'informers';
  private readonly all: AnyInformer[];

  constructor(informers: readonly AnyInformer[]) {
    this.all = [...informers];
  }

  get size(): number {
    return this.all.length;
  }

  start(): void {
    for (const i of this.all) i.start();
  }

  /** Resolves once every informer has listed (never if one is stopped before that). */
  synced(): Promise<void> {
    return Promise.all(this.all.map((i) => i.synced)).then(() => undefined);
  }

  notSynced(): number {
    return this.all.filter((i) => !i.hasSynced()).length;
  }

  stop(): void {
    for (const i of this.all) i.stop();
  }
}
