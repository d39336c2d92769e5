/**
 * One benchmark of one source tree, for bench/side-by-side.ts: imports `<tree>/bench/<script>`
 * (the tree's own benchmark, measuring the tree's own code), runs it at its quick sizes (its full
 * ones with SIDE_BY_SIDE_FULL=1) and prints its result as one `RESULT {json}` line on stdout.
 * Progress lines go to stderr.
 *
 *   node --import tsx bench/lib/side-by-side-child.ts <tree>/bench/<script>.ts
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPORT } from './rule-sync-inside.js';
import type { Benchmark } from './report.js';

const script = process.argv[2];
if (script === undefined) throw new Error('side-by-side-child: give a benchmark script of a tree');
const mod = (await import(pathToFileURL(path.resolve(script)).href)) as { benchmark?: Benchmark };
if (mod.benchmark === undefined) throw new Error(`${script} exports no benchmark`);
const id = mod.benchmark.id;
const result = await mod.benchmark.run({ quick: process.env['SIDE_BY_SIDE_FULL'] !== '1', log: (m) => process.stderr.write(`[${id} ${new Date().toISOString().slice(11, 19)}] ${m}\n`) });
process.stdout.write(`${REPORT}${JSON.stringify(result)}\n`);
process.exit(0);
