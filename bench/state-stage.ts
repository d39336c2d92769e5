/**
 * The sidecar's state stage for a one-endpoint change at N Services × 10 endpoints, two ways in
 * one process, alternated round by round (not a numbered benchmark: an in-process probe
 * run by hand, figures in docs/benchmarks.md "Sidecar CPU per change"):
 *
 *   lists   what cmd/sidecar/runtime.ts did before cmd/sidecar/state-feed.ts: the informers' `list()` copies,
 *           ServiceCap.apply over every Service, StateMemo.update of the lists
 *   events  StateFeed.compute after the one slice event (StateMemo.step)
 *
 * Each round replaces one EndpointSlice in an informer-like store (a Map by key, as src/kube/informer.ts
 * keeps) for both ways; CPU time (process.cpuUsage) and wall time of the compute alone.
 *
 *   node --import tsx bench/state-stage.ts [services=10000] [rounds=200]
 */
import os from 'node:os';
import { StateMemo } from '../src/dataplane/core/incremental.js';
import { objectKey, type V1EndpointSlice, type V1Service } from '../src/kube/types.js';
import { ServiceCap } from '../src/service-cap.js';
import { StateFeed } from '../cmd/sidecar/state-feed.js';
import { clientInterface, endpointSlice, NETWORK, service } from './lib/services.js';
import { fmt, summarize } from '../test/harness/stats.js';

const ENDPOINTS = 10;
const n = Number(process.argv[2] ?? 10000);
const rounds = Number(process.argv[3] ?? 200);
const served = [NETWORK];
const interfaces = [clientInterface];

interface Way {
  readonly name: string;
  /** One slice replaced in this way's store (and told, if it listens), then the state computed. */
  change(i: number, next: V1EndpointSlice): () => number;
}

function stores(): { services: Map<string, V1Service>; slices: Map<string, V1EndpointSlice> } {
  const services = new Map<string, V1Service>();
  const slices = new Map<string, V1EndpointSlice>();
  for (let i = 0; i < n; i++) {
    const s = service(i);
    services.set(objectKey(s), s);
    const e = endpointSlice(i, ENDPOINTS);
    slices.set(objectKey(e), e);
  }
  return { services, slices };
}

function listsWay(): Way {
  const { services, slices } = stores();
  const memo = new StateMemo();
  const cap = new ServiceCap(20_000);
  const compute = (): number => memo.update({ interfaces, services: cap.apply([...services.values()], served).services, slices: [...slices.values()] }).state.targets.length;
  compute();
  return {
    name: 'lists (before)',
    change(_i, next) {
      slices.set(objectKey(next), next);
      return compute;
    },
  };
}

function eventsWay(): Way {
  const { services, slices } = stores();
  const feed = new StateFeed(20_000);
  const input = { served, interfaces, services: () => [...services.values()], slices: () => [...slices.values()] };
  const compute = (): number => {
    const out = feed.compute(input);
    if (out.whole) throw new Error('state-stage: the events way read the lists');
    return out.state.targets.length;
  };
  feed.compute(input);
  return {
    name: 'events (after)',
    change(_i, next) {
      const key = objectKey(next);
      feed.slice(slices.get(key), next);
      slices.set(key, next);
      return compute;
    },
  };
}

const ways = [listsWay(), eventsWay()];
const cpu = new Map<string, number[]>(ways.map((w) => [w.name, []]));
const wall = new Map<string, number[]>(ways.map((w) => [w.name, []]));
const WARM = 20;
for (let g = 1; g <= rounds + WARM; g++) {
  const i = (g * 997) % n;
  const next = endpointSlice(i, ENDPOINTS, g);
  // Alternated, and which goes first alternates too: both see the same machine moments.
  for (const w of g % 2 === 0 ? ways : [...ways].reverse()) {
    const compute = w.change(i, next);
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const targets = compute();
    const ms = performance.now() - t0;
    const c = process.cpuUsage(c0);
    if (targets !== n) throw new Error(`state-stage: ${w.name} gave ${targets} targets, not ${n}`);
    if (g > WARM) {
      cpu.get(w.name)?.push((c.user + c.system) / 1e3);
      wall.get(w.name)?.push(ms);
    }
  }
}
process.stdout.write(
  `state stage, one slice replaced per round, ${n.toLocaleString('en')} Services × ${ENDPOINTS}, ${rounds} rounds each, alternated (${WARM} warm-up rounds not counted); ms p50 / p90 / p99 / max\n`,
);
process.stdout.write('| way | CPU | wall |\n|---|---|---|\n');
const cell = (xs: number[]): string => {
  const s = summarize(xs);
  return `${fmt(s.median)} / ${fmt(s.p90)} / ${fmt(s.p99)} / ${fmt(s.max)}`;
};
for (const w of ways) process.stdout.write(`| ${w.name} | ${cell(cpu.get(w.name) ?? [])} | ${cell(wall.get(w.name) ?? [])} |\n`);
process.stdout.write(
  `node ${process.version}, load average ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}\n`,
);
