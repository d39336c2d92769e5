/**
 * A bound on the targets (Service port × frontend IP) a sidecar or the node agent programs per network: any
 * namespace allowed on a network can add Services to it, and each port costs memory and rules in
 * every client pod there. Past `cap` targets on a network, the network is divided max-min between
 * namespaces (src/fair-share.ts): the client's own namespace first, then every other namespace
 * at least an equal share of the rest; a namespace over its share loses only its own Services, a
 * being-deleted one first, then by name.
 *
 * A Service counts on a served network of its own namespace, or on another namespace's network
 * where `admitted` says so: in a sidecar, where the controller wrote a slice for it (the controller
 * writes none where the NAD's owner has not shared the network, and the sidecar may not read NADs
 * itself); the node agent reads the NADs and passes only shared Services. A Service that names served
 * networks but counts on none of them is not served at all (`unshared`), so a tenant's Services on
 * a network not shared with it cost the other namespaces nothing, however they got past the
 * webhook (being deleted, label only, written while it was down).
 *
 * Pure, and cheap when nothing is over: a Service's networks and weight are worked out once per
 * object (the informer keeps the object while it is unchanged), and sharing happens only on a
 * network over the cap. A Service is served when it is kept on every served network it counts on.
 */
import { networkKey, parseServiceNetwork, type NetworkRef } from './annotations/service-network.js';
import { fairShare, type ShareItem } from './fair-share.js';
import { PROXY_NAME, PROXY_NAME_LABEL, SERVICE_NETWORK_ANNOTATION } from './keys.js';
import type { V1Service } from './kube/types.js';

export interface CapNamespace {
  readonly namespace: string;
  /** Targets it asks for on the network, and its share. */
  readonly demand: number;
  readonly share: number;
  /** Its Services left out, in the order they gave way. */
  readonly dropped: readonly string[];
}

export interface CapOver {
  readonly network: string;
  /** Targets all namespaces ask for on it. */
  readonly total: number;
  /** The namespaces over their share, by name. */
  readonly namespaces: readonly CapNamespace[];
}

export interface CapResult {
  /** The Services to serve: the input minus the dropped ones, in input order. */
  readonly services: readonly V1Service[];
  /** The ones left out: over their namespace's share, or on no network shared with them. */
  readonly dropped: ReadonlySet<V1Service>;
  /** How many of those are left out only because none of their served networks is shared with them. */
  readonly unshared: number;
  /** Per network over the cap (sorted by network). */
  readonly over: readonly CapOver[];
}

/** Whether another namespace's network `ref` carries a slice of the controller's for `svc`. */
export type Admitted = (svc: V1Service, ref: NetworkRef) => boolean;

interface Weighed {
  readonly nets: readonly NetworkRef[];
  readonly weight: number;
  readonly rank: string;
}

export const serviceName = (svc: V1Service): string => `${svc.metadata?.namespace ?? ''}/${svc.metadata?.name ?? ''}`;

const deleting = (svc: V1Service): boolean => svc.metadata?.deletionTimestamp !== undefined && svc.metadata.deletionTimestamp !== null;

/** Frontend IPs a client reaches the Service at (its targets are these × its ports); headless: none. */
function frontends(svc: V1Service): number {
  const type = svc.spec?.type ?? 'ClusterIP';
  if (type !== 'ClusterIP' && type !== 'NodePort' && type !== 'LoadBalancer') return 0;
  const ips = (svc.spec?.clusterIPs ?? (svc.spec?.clusterIP !== undefined ? [svc.spec.clusterIP] : [])).filter((ip) => ip !== '' && ip !== 'None').length;
  const ingress = type === 'LoadBalancer' ? (svc.status?.loadBalancer?.ingress ?? []).filter((i) => i.ip !== undefined).length : 0;
  return ips + ingress;
}

/** What a Service costs on each network it names: its targets. */
export function serviceWeight(svc: V1Service): number {
  return (svc.spec?.ports?.length ?? 0) * frontends(svc);
}

export class ServiceCap {
  private weighed = new WeakMap<V1Service, Weighed>();

  /** `own`: the client's namespace, served first. */
  constructor(
    readonly cap: number,
    readonly own?: string,
  ) {}

  private weigh(svc: V1Service): Weighed {
    let w = this.weighed.get(svc);
    if (w === undefined) {
      const value = svc.metadata?.labels?.[PROXY_NAME_LABEL] === PROXY_NAME ? svc.metadata.annotations?.[SERVICE_NETWORK_ANNOTATION] : undefined;
      const parsed = value === undefined ? undefined : parseServiceNetwork(value, svc.metadata?.namespace ?? '');
      const nets = parsed?.ok === true ? [...new Map(parsed.value.map((r) => [networkKey(r), r])).values()] : [];
      w = { nets, weight: nets.length === 0 ? 0 : serviceWeight(svc), rank: `${deleting(svc) ? 1 : 0}\n${serviceName(svc)}` };
      this.weighed.set(svc, w);
    }
    return w;
  }

  /** The Services to serve, given the networks this pod serves. */
  apply(services: readonly V1Service[], served: readonly NetworkRef[], admitted: Admitted = () => false): CapResult {
    const servedKeys = new Set(served.map(networkKey));
    /** Per served network: the Services that count on it. */
    const on = new Map<string, V1Service[]>();
    const demand = new Map<string, number>();
    const dropped = new Set<V1Service>();
    for (const svc of services) {
      const w = this.weigh(svc);
      if (w.weight === 0) continue;
      const ns = svc.metadata?.namespace ?? '';
      let named = false;
      let counts = false;
      for (const ref of w.nets) {
        const k = networkKey(ref);
        if (!servedKeys.has(k)) continue;
        named = true;
        if (ref.namespace !== ns && !admitted(svc, ref)) continue;
        counts = true;
        demand.set(k, (demand.get(k) ?? 0) + w.weight);
        const list = on.get(k);
        if (list === undefined) on.set(k, [svc]);
        else list.push(svc);
      }
      if (named && !counts) dropped.add(svc);
    }
    const unshared = dropped.size;
    const overNets = [...demand]
      .filter(([, n]) => n > this.cap)
      .map(([k]) => k)
      .sort();
    if (overNets.length === 0 && unshared === 0) return { services, dropped, unshared, over: [] };

    const over: CapOver[] = [];
    for (const k of overNets) {
      const items: ShareItem<V1Service>[] = (on.get(k) ?? []).map((svc) => ({ item: svc, namespace: svc.metadata?.namespace ?? '', weight: this.weigh(svc).weight, rank: this.weigh(svc).rank }));
      const r = fairShare(items, this.cap, this.own);
      for (const o of r.over) for (const s of o.dropped) dropped.add(s);
      over.push({
        network: k,
        total: r.demand,
        namespaces: r.over.map((o) => ({ namespace: o.namespace, demand: o.demand, share: o.share, dropped: o.dropped.map(serviceName) })),
      });
    }
    return { services: services.filter((s) => !dropped.has(s)), dropped, unshared, over };
  }
}
