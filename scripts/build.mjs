// Bundles each program into one file under dist/ with esbuild, so the image needs no
// node_modules and each process loads only the code it uses. The sidecar runs in every client
// pod, so its bundle is the one that matters most: it must never contain @kubernetes/client-node
// (checked below; the project imports it for types only).
//
// Usage: node scripts/build.mjs [--outdir dist] [--only sidecar,webhook] [--metafile]
import { build } from 'esbuild';
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Program name -> entry point; dist/<name>.js is what the image and the manifests run. */
const PROGRAMS = {
  sidecar: 'cmd/sidecar/main.ts',
  controller: 'cmd/controller/main.ts',
  webhook: 'cmd/webhook/main.ts',
  certs: 'cmd/certs/cli.ts',
  'node-agent': 'cmd/node-agent/main.ts',
};

/** Packages a program must not contain, with why. */
const FORBIDDEN = { '@kubernetes/client-node': 'costs ~78 MB RSS at run time; import it with `import type` only' };

// ESM output, CommonJS dependencies (pino, prom-client, express, ...): give them the `require`,
// `__filename` and `__dirname` they expect. The names are prefixed so they cannot clash with
// bundled top-level names, then bound to the plain names CommonJS code uses.
const BANNER = [
  "import { createRequire as __mpx_createRequire } from 'node:module';",
  "import { fileURLToPath as __mpx_fileURLToPath } from 'node:url';",
  "import { dirname as __mpx_dirname } from 'node:path';",
  'const require = __mpx_createRequire(import.meta.url);',
  'const __filename = __mpx_fileURLToPath(import.meta.url);',
  'const __dirname = __mpx_dirname(__filename);',
].join('\n');

const { values } = parseArgs({
  options: {
    outdir: { type: 'string', default: 'dist' },
    only: { type: 'string' },
    metafile: { type: 'boolean', default: false },
  },
});
const outdir = resolve(root, values.outdir);
const wanted = values.only ? values.only.split(',').map((s) => s.trim()) : Object.keys(PROGRAMS);
for (const name of wanted) {
  if (!(name in PROGRAMS)) {
    console.error(`build: unknown program ${JSON.stringify(name)}; choose from ${Object.keys(PROGRAMS).join(', ')}`);
    process.exit(2);
  }
}
mkdirSync(outdir, { recursive: true });

const entryPoints = Object.fromEntries(wanted.filter((n) => existsSync(join(root, PROGRAMS[n]))).map((n) => [n, join(root, PROGRAMS[n])]));
const missing = wanted.filter((n) => !(n in entryPoints));
if (missing.length > 0) {
  console.error(`build: entry points missing: ${missing.map((n) => PROGRAMS[n]).join(', ')}`);
  process.exit(1);
}

const result = await build({
  absWorkingDir: root,
  entryPoints,
  outdir,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  minify: true,
  // Names stay readable in stack traces and pino's error serialisation.
  keepNames: true,
  legalComments: 'none',
  banner: { js: BANNER },
  // pino's optional pretty printer and worker-thread transports are never used: the programs log
  // plain JSON to stdout (src/log.ts), so these lazily-required packages stay out.
  external: ['pino-pretty'],
  metafile: true,
  logLevel: 'warning',
});

let failed = false;
for (const [out, meta] of Object.entries(result.metafile.outputs)) {
  if (!out.endsWith('.js')) continue;
  const inputs = Object.keys(meta.inputs);
  for (const [pkg, why] of Object.entries(FORBIDDEN)) {
    const hit = inputs.find((i) => i.includes(`node_modules/${pkg}/`));
    if (hit !== undefined) {
      console.error(`build: ${relative(root, out)} contains ${pkg} (${hit}): ${why}`);
      failed = true;
    }
  }
  const kib = (statSync(resolve(root, out)).size / 1024).toFixed(0);
  console.log(`${relative(root, resolve(root, out))}  ${kib} KiB  (${inputs.length} modules)`);
}
if (values.metafile) writeFileSync(join(outdir, 'meta.json'), JSON.stringify(result.metafile));
// The bundles are ES modules; a package.json saying so lets `node dist/x.js` run them anywhere.
writeFileSync(join(outdir, 'package.json'), JSON.stringify({ type: 'module' }) + '\n');
if (failed) process.exit(1);
