/**
 * Where a client is, for the endpoint rules (endpoints.ts), without reading Node objects: its node
 * from the downward API, its zone from the pod's zone label when the cluster copies it there, else
 * from the slices it already watches (the controller writes each endpoint's `zone` from its Node,
 * so an endpoint on this node names this node's zone). Neither: no zone, and zone hints are not
 * used, as kube-proxy on a node without the zone label. docs/decisions/0161-sidecar-node-and-zone.md.
 */
import type { V1EndpointSlice } from '../kube/types.js';
import type { ClientPlace } from './endpoints.js';

/**
 * The zone our slices give this node: the zone of any endpoint on it, when all such endpoints
 * agree; undefined when none is on this node or they disagree (a zone is never guessed).
 */
export function zoneFromSlices(nodeName: string, slices: Iterable<V1EndpointSlice>): string | undefined {
  if (nodeName === '') return undefined;
  let zone: string | undefined;
  for (const s of slices) {
    for (const e of s.endpoints ?? []) {
      if (e.nodeName !== nodeName || e.zone === undefined || e.zone === null || e.zone === '') continue;
      if (zone === undefined) zone = e.zone;
      else if (zone !== e.zone) return undefined;
    }
  }
  return zone;
}

/** The client's place from its settings (NODE_NAME, NODE_ZONE), the slices filling in a missing zone. */
export function clientPlace(nodeName: string, nodeZone: string, slices: Iterable<V1EndpointSlice>): ClientPlace {
  return { nodeName, zone: nodeZone !== '' ? nodeZone : (zoneFromSlices(nodeName, slices) ?? '') };
}
