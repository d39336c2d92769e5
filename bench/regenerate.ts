/**
 * `node --import tsx bench/regenerate.ts`: redraws docs/benchmarks.md's results block and the
 * charts in docs/benchmarks/ from bench/results/*.json, running no benchmark (what every
 * `npm run bench` does after each benchmark).
 */
import { regenerate } from './lib/results.js';

for (const f of regenerate()) process.stdout.write(`${f}\n`);
