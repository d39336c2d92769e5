/** Helpers of the property tests: an incremental path held to its from-scratch form, and parsers held linear. */
import assert from 'node:assert/strict';
import type { IptablesRules } from '../../src/dataplane/iptables/rulesets.js';
import type { Rendered } from '../../src/dataplane/core/model.js';
import { iptablesRules } from '../../src/dataplane/iptables/stage.js';
import { SIDECAR_LAYOUT } from '../../src/dataplane/core/names.js';
import type { V1EndpointSlice, V1Service } from '../../src/kube/types.js';
import type { EndpointSpec, PortSpec } from '../sidecar/state-fixtures.js';

/** mulberry32: a small seeded PRNG, so every run of a seed sees the same sequence (property tests name the seed that failed). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A render as plain data (its Maps as entry lists, in order), for deepEqual against another. */
export function comparable(r: Rendered & { readonly iptables?: IptablesRules }): unknown {
  return {
    targets: r.resolution.targets,
    skipped: r.resolution.skipped,
    warnings: r.resolution.warnings,
    iptables: r.iptables === undefined ? undefined : [r.iptables.v4, r.iptables.v6].map((f) => [[...f.filter.entries()], [...f.nat.entries()]]),
    routes: r.routes,
  };
}

/**
 * A render with the iptables rulesets beside it, for tests of the rule text: the ones a program's
 * render carries (the node agent's), else the sidecar's from scratch (iptables-stage.ts).
 */
export function withIptables<T extends Rendered & { readonly iptables?: IptablesRules }>(r: T): T & IptablesRules {
  return { ...r, ...(r.iptables ?? iptablesRules(r.resolution.targets, SIDECAR_LAYOUT)) };
}

/**
 * A random world of opted-in Services and their slices, changed one informer event at a time;
 * a program's world adds its own objects (`service`, `slice` and `other` events).
 */
export abstract class ServiceWorld {
  readonly services = new Map<string, V1Service>();
  readonly slices = new Map<string, V1EndpointSlice>();
  constructor(protected readonly r: () => number) {}

  protected pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.r() * xs.length)] as T;
  }
  protected int(n: number): number {
    return Math.floor(this.r() * n);
  }

  ports(): PortSpec[] {
    const all: PortSpec[] = [{ name: 'http', port: 80, targetPort: 8080 }, { name: 'dns', port: 53, protocol: 'UDP' }, { port: 9000 + this.int(3) }];
    return all.filter(() => this.r() < 0.6);
  }

  /** Up to four endpoints of one family, now and then a malformed address. */
  endpoints(family: 4 | 6): EndpointSpec[] {
    const out: EndpointSpec[] = [];
    const n = this.int(5);
    for (let k = 0; k < n; k++) {
      const host = this.int(12) + 1;
      const ip = this.r() < 0.03 ? 'not-an-ip' : this.endpointIP(family, host);
      out.push({ ip, ready: this.r() < 0.7, serving: this.r() < 0.8, terminating: this.r() < 0.3, ...this.endpointExtra() });
    }
    return out;
  }
  protected abstract endpointIP(family: 4 | 6, host: number): string;
  /** More fields of an endpoint (the node agent's world places it on a node). */
  protected endpointExtra(): Partial<EndpointSpec> {
    return {};
  }

  abstract service(name: string): V1Service;
  abstract slice(name: string, svcName: string): V1EndpointSlice;
  /** An event of the program's other objects; `roll` is from 0.9 to 1. */
  protected abstract other(roll: number): string;

  /** One informer event, applied to the world. */
  step(): string {
    const names = [...this.services.keys()];
    const sliceNames = [...this.slices.keys()];
    const roll = this.r();
    if (roll < 0.2 || names.length === 0) {
      const name = `svc-${this.int(12)}`;
      this.services.set(name, this.service(name));
      return `service ${name} added/updated`;
    }
    if (roll < 0.3) {
      const name = this.pick(names);
      this.services.delete(name);
      return `service ${name} deleted`;
    }
    if (roll < 0.75) {
      // The common case: one slice of one Service changes (or appears).
      const svc = this.pick(names);
      const name = `${svc}-${this.int(3)}`;
      this.slices.set(name, this.slice(name, this.r() < 0.9 ? svc : `svc-${this.int(12)}`));
      return `slice ${name} added/updated`;
    }
    if (roll < 0.85 && sliceNames.length > 0) {
      const name = this.pick(sliceNames);
      this.slices.delete(name);
      return `slice ${name} deleted`;
    }
    if (roll < 0.9) {
      // An update that changes nothing but the object (a resourceVersion bump): a new, equal object.
      const name = this.pick(names);
      this.services.set(name, structuredClone(this.services.get(name) as V1Service));
      return `service ${name} replaced by an equal object`;
    }
    return this.other(roll);
  }

  /** The informers' lists; their order is not meaningful, so it is shuffled now and then. */
  lists(): { services: V1Service[]; slices: V1EndpointSlice[] } {
    const services = [...this.services.values()];
    const slices = [...this.slices.values()];
    if (this.r() < 0.3) {
      services.reverse();
      slices.reverse();
    }
    return { services, slices };
  }
}

/** A parser's input eight times larger; a quadratic step would take about 64 times as long, the bound is 24. */
export const LINEAR_SCALE = 8;
export const LINEAR_MAX_RATIO = 24;

/** The fastest of a few runs (the least disturbed by other work on the machine), in ms. */
function fastest(run: () => unknown): number {
  let best = Infinity;
  for (let i = 0; i < 21; i++) {
    const t0 = process.hrtime.bigint();
    run();
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return best;
}

/**
 * Time linear in the input: `parse` of input(n × LINEAR_SCALE) against input(n), both measured in
 * this test (a ratio, never a wall-clock bound).
 */
export function assertLinear<T>(name: string, input: (n: number) => T, parse: (s: T) => unknown, n: number): void {
  const small = input(n);
  const large = input(n * LINEAR_SCALE);
  // Warm up (compiled code, not the interpreter, is measured); sizes are kept small enough that
  // the garbage collector's steps do not dominate.
  for (let i = 0; i < 5; i++) {
    parse(small);
    parse(large);
  }
  const ratio =
    fastest(() => parse(large)) /
    Math.max(
      fastest(() => parse(small)),
      0.05,
    );
  assert.ok(ratio < LINEAR_MAX_RATIO, `${name}: ${LINEAR_SCALE}x the input took ${ratio.toFixed(1)}x the time`);
}
