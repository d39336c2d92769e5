/**
 * The dataplane a program makes: `createDataplane` (the sidecar's state) or `createDataplaneFor`
 * (any program's, with its own renderer and stages: the node agent) makes the rule back end by
 * name from the registry (registry.ts; it starts what the first sync will want early), the other
 * back ends' leftovers, and hands them to the pipeline (core/pipeline.ts), which runs every sync,
 * drift check and cleanup.
 */
import { existsSync } from 'node:fs';
import type { DesiredState, IpFamily, Rendered } from './core/model.js';
import { SIDECAR_LAYOUT } from './core/names.js';
import { render, RenderCache } from './core/incremental.js';
import { fileReader } from './core/exec.js';
import type { DataplaneOptions } from './core/options.js';
import type { BackendContext, BackendKind, Stage } from './core/seam.js';
import { createPipeline, type Dataplane } from './core/pipeline.js';
import { createExec, spareWorthy } from './tuning/spare-exec.js';
import { readAheadExec } from './tuning/read-ahead.js';
import { withWarmUp } from './tuning/with-warm-up.js';
import { BACKENDS, backendKind } from './registry.js';

export function kernelHasIPv6(): boolean {
  return existsSync('/proc/net/if_inet6');
}

/** A program's own stage per back end kind, over its own render `Rd` (the node agent's rules). */
export type ProgramStages<Rd extends Rendered> = { readonly [K in BackendKind]: Stage<unknown, Rd> };

export function createDataplane(opts: DataplaneOptions = {}): Dataplane {
  const cache = new RenderCache();
  return createDataplaneFor<DesiredState>(opts, (state) => render(state, cache));
}

/**
 * The same pipeline for any program's state: `renderState` turns it into the shared render
 * (resolved targets, routes), and `stages`, when given, make each back end's rules of it (the node
 * agent renders NodePorts and the node's cluster-IP access this way).
 */
export function createDataplaneFor<S, Rd extends Rendered = Rendered>(opts: DataplaneOptions, renderState: (state: S) => Rd, stages?: ProgramStages<Rd>): Dataplane<S> {
  const layout = opts.layout ?? SIDECAR_LAYOUT;
  const exec = readAheadExec(createExec(opts.netns, opts.spareRestore === true ? spareWorthy : undefined));
  const families: readonly IpFamily[] = (opts.ipv6 ?? kernelHasIPv6()) ? [4, 6] : [4];
  // The sidecar reads its namespace's /proc/net files itself; the test hook's namespace through `cat`.
  const ctx: BackendContext = { exec, families, layout, readFile: fileReader(opts.netns === undefined ? undefined : exec), options: opts, logger: opts.logger };
  const kind = backendKind(opts.backendKind);
  const factory = BACKENDS[kind];
  const rules = factory.make(ctx, stages?.[kind]);
  const others = Object.entries(BACKENDS).flatMap(([k, f]) => (k === kind ? [] : f.leftovers(ctx)));
  const pipeline = createPipeline({ exec, rules, others, families, routeProto: layout.routeProto, logger: opts.logger }, renderState as (state: S) => Rendered);
  const warm = factory.warmUp?.(ctx);
  return warm === undefined ? pipeline : withWarmUp(pipeline, warm, opts.logger);
}
