/**
 * What the sidecar says when the per-network share leaves Services out (src/service-cap.ts) or a
 * Service is over its budget (slim.ts): each change once, as a log line per name, one Warning
 * Event on the pod that names the namespace over its share (or the refused Services), and the
 * metrics. Bounded: an Event names at most five Services, and a set that does not change is not
 * said again, however many syncs see it.
 */
import type { Logger } from '../../src/log.js';
import { REASON_SERVICE_CAP_REACHED, REASON_SERVICE_OVER_BUDGET } from '../../src/sidecar-contract.js';
import type { SidecarMetrics } from './metrics.js';
import type { Say } from './problems.js';
import type { CapResult } from '../../src/service-cap.js';
import type { RefusedService } from './state-feed.js';

const firstFive = (names: readonly string[]): string => `${names.slice(0, 5).join(', ')}${names.length > 5 ? ', ...' : ''}`;

export class CapReporter {
  private overText = '';
  private overNets: string[] = [];
  private refusedText = '';
  private readonly zeroed = new Set<string>();

  constructor(
    private readonly cap: number,
    private readonly d: { readonly metrics: SidecarMetrics; readonly log: Logger; readonly say: (list: Say[]) => void },
  ) {}

  /** The networks the pod serves: each gets its dropped-Services series at 0 once, so the alert on it has data while nothing is dropped. */
  served(networks: readonly string[]): void {
    for (const net of networks) {
      if (this.zeroed.has(net)) continue;
      this.zeroed.add(net);
      if (!this.overNets.includes(net)) this.d.metrics.servicesDropped(net, 0);
    }
  }

  over(over: CapResult['over']): void {
    const text = JSON.stringify(over);
    if (text === this.overText) return;
    this.overText = text;
    const { metrics, log, say } = this.d;
    for (const net of this.overNets)
      if (!over.some((o) => o.network === net)) {
        metrics.servicesDropped(net, 0);
        log.info({ network: net, cap: this.cap }, 'targets on the network are within the cap again; all Services are served');
      }
    this.overNets = over.map((o) => o.network);
    for (const o of over) {
      const dropped = o.namespaces.flatMap((n) => n.dropped);
      metrics.servicesDropped(o.network, dropped.length);
      for (const n of o.namespaces) {
        log.warn(
          { network: o.network, cap: this.cap, total: o.total, namespace: n.namespace, demand: n.demand, share: n.share, dropped: n.dropped },
          'namespace over its share of the network; its own Services past the share are not served',
        );
        say([
          {
            type: 'Warning',
            reason: REASON_SERVICE_CAP_REACHED,
            message: `network ${o.network} has ${o.total} Service ports (targets), more than this sidecar serves (${this.cap}, MAX_SERVICES_PER_NETWORK); namespace ${n.namespace} asks for ${n.demand}, over its fair share of ${n.share}, so ${n.dropped.length} of its Services are not served: ${firstFive(n.dropped)}; other namespaces keep theirs. Remove ports or Services of namespace ${n.namespace} from the network, or raise sidecar.maxServicesPerNetwork in the webhook's config`,
          },
        ]);
      }
    }
  }

  refused(list: readonly RefusedService[]): void {
    const text = JSON.stringify(list);
    if (text === this.refusedText) return;
    const before = new Set((JSON.parse(this.refusedText === '' ? '[]' : this.refusedText) as RefusedService[]).map((r) => r.message));
    this.refusedText = text;
    const { metrics, log, say } = this.d;
    metrics.servicesRefused(list);
    const added = list.filter((r) => !before.has(r.message));
    for (const r of added) log.warn({ service: r.service, budget: r.key }, r.message);
    if (added.length === 0) return;
    say([
      {
        type: 'Warning',
        reason: REASON_SERVICE_OVER_BUDGET,
        message: `${added.length} Service(s) over this sidecar's budget per object are not served: ${firstFive(added.map((r) => r.message))}`.slice(0, 1024),
      },
    ]);
  }
}
