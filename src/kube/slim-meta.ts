/**
 * The metadata an informer transform keeps of a tenant object: identity, change detection,
 * deletionTimestamp, and only the labels and annotations the component reads (a tenant can put
 * 256 KiB of labels and annotations on any object). Built as one literal with every key, even
 * undefined ones, so that all objects of a kind share one hidden class.
 */
import type { V1ObjectMeta } from './types.js';

function pick(from: Readonly<Record<string, string>> | undefined, keys: readonly string[]): Record<string, string> | undefined {
  let out: Record<string, string> | undefined;
  for (const k of keys) {
    const v = from?.[k];
    if (v === undefined) continue;
    out ??= {};
    out[k] = v;
  }
  return out;
}

export function slimMeta(meta: V1ObjectMeta | undefined, labelKeys: readonly string[], annotationKeys: readonly string[]): V1ObjectMeta {
  return {
    name: meta?.name,
    namespace: meta?.namespace,
    uid: meta?.uid,
    resourceVersion: meta?.resourceVersion,
    deletionTimestamp: meta?.deletionTimestamp,
    labels: pick(meta?.labels, labelKeys),
    annotations: pick(meta?.annotations, annotationKeys),
  };
}
