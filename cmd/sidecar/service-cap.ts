/**
 * A bound on the Services one sidecar programs per network (issue 19 item 5): any tenant may
 * create Services on a shared network, and each one costs memory and rules in every client pod on
 * it. Past `cap` Services on a network, the ones after the first `cap` in namespace/name order are
 * not served on it; the order makes the choice the same in every sidecar and across restarts, and
 * a Service that sorts early (its owner's choice) can push out only Services that sort after it.
 *
 * Pure, and cheap when nothing is over: a Service's networks are parsed once per object (the
 * informer keeps the object while it is unchanged), and sorting happens only on a network over
 * the cap.
 */
import { networkKey, parseServiceNetwork, type NetworkRef } from '../../src/annotations/service-network.js';
import { compareText } from '../../src/order.js';
import { SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import type { V1Service } from '../../src/kube/types.js';

export interface CapResult {
  /** The Services to serve: the input minus `dropped`, in input order. */
  readonly services: readonly V1Service[];
  /** Per network over the cap (sorted by network): how many name it, and the ones left out, in order. */
  readonly over: readonly { readonly network: string; readonly total: number; readonly dropped: readonly string[] }[];
}

const serviceName = (svc: V1Service): string => `${svc.metadata?.namespace ?? ''}/${svc.metadata?.name ?? ''}`;

/** Networks of a Service by object identity (unchanged objects are the same object). */
export class ServiceCap {
  private nets = new WeakMap<V1Service, readonly string[]>();

  constructor(readonly cap: number) {}

  private networksOf(svc: V1Service): readonly string[] {
    let keys = this.nets.get(svc);
    if (keys === undefined) {
      const value = svc.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION];
      const parsed = value === undefined ? undefined : parseServiceNetwork(value, svc.metadata?.namespace ?? '');
      keys = parsed?.ok === true ? [...new Set(parsed.value.map(networkKey))] : [];
      this.nets.set(svc, keys);
    }
    return keys;
  }

  /** The Services to serve, given the networks this pod serves. */
  apply(services: readonly V1Service[], served: readonly NetworkRef[]): CapResult {
    const servedKeys = new Set(served.map(networkKey));
    const count = new Map<string, number>();
    for (const svc of services) for (const k of this.networksOf(svc)) if (servedKeys.has(k)) count.set(k, (count.get(k) ?? 0) + 1);
    const overNets = [...count].filter(([, n]) => n > this.cap).map(([k]) => k).sort(compareText);
    if (overNets.length === 0) return { services, over: [] };

    // Kept: within the first `cap` on at least one served network it names; dropped: on none.
    const kept = new Set<V1Service>();
    const overSet = new Set(overNets);
    for (const svc of services) if (this.networksOf(svc).some((k) => servedKeys.has(k) && !overSet.has(k))) kept.add(svc);
    const cut = new Map<string, V1Service[]>();
    for (const k of overNets) {
      const on = services.filter((s) => this.networksOf(s).includes(k)).sort((a, b) => compareText(serviceName(a), serviceName(b)));
      on.slice(0, this.cap).forEach((s) => kept.add(s));
      cut.set(k, on.slice(this.cap));
    }
    const over = overNets.map((k) => ({
      network: k,
      total: count.get(k) ?? 0,
      dropped: (cut.get(k) ?? []).filter((s) => !kept.has(s)).map(serviceName),
    }));
    // Services on none of the served networks pass through: they give no rules, only their problems.
    return { services: services.filter((s) => kept.has(s) || !this.networksOf(s).some((k) => servedKeys.has(k))), over };
  }
}
