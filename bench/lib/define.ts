/**
 * One way to declare a benchmark: its id, title, sizes per mode, and a body that gets the sizes
 * of the chosen mode and a Cleanup that always runs afterwards (processes, namespaces, servers).
 */
import type { Benchmark, BenchResult, RunContext } from './report.js';
import { withCleanup, type Cleanup } from './proc.js';

export function defineBenchmark<S>(id: string, title: string, sizes: { readonly quick: S; readonly full: S }, body: (ctx: RunContext, size: S, cleanup: Cleanup) => Promise<BenchResult>): Benchmark {
  return { id, title, run: (ctx) => withCleanup(ctx.log, (cleanup) => body(ctx, ctx.quick ? sizes.quick : sizes.full, cleanup)) };
}
