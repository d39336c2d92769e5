/**
 * The project's layout rules, checked on the source itself:
 *  - a program folder never imports another program's folder; code two programs share lives in
 *    src/ (and src/ itself imports no program folder);
 *  - strings are ordered by code point (src/order.ts), never with localeCompare, whose result
 *    depends on the machine's locale data.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { compareText } from '../../src/order.js';

const root = resolve(import.meta.dirname, '..', '..');

/** The programs, one folder each under cmd/ (each built into its own bundle). */
const EXPECTED_PROGRAMS = ['certs', 'controller', 'node-agent', 'sidecar', 'webhook'];
const PROGRAMS = readdirSync(join(root, 'cmd'), { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => join('cmd', e.name));

function tsFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...tsFiles(p));
    else if (e.isFile() && e.name.endsWith('.ts')) out.push(p);
  }
  return out;
}

/** The program folder a repository-relative path is in, or 'src' (shared) for the rest of src/. */
function owner(rel: string): string | undefined {
  const program = PROGRAMS.find((p) => rel === p || rel.startsWith(p + sep));
  if (program !== undefined) return program;
  return rel.startsWith('src' + sep) ? 'src' : undefined;
}

/** Relative specifiers of every import and export-from in a file (static and dynamic). */
export function importsOf(text: string): string[] {
  const out: string[] = [];
  const re = /(?:^|[^.\w])(?:import|export)\s*(?:[\w*{}\s,]*?\s*from\s*)?\(?\s*['"](\.{1,2}\/[^'"]+)['"]/gm;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) out.push(m[1] as string);
  return out;
}

/** `from → to` for every import that leaves its own program for another program's folder. */
function crossProgramImports(): string[] {
  const bad: string[] = [];
  for (const top of ['src', ...PROGRAMS]) {
    for (const file of tsFiles(join(root, top))) {
      const rel = relative(root, file);
      const from = owner(rel);
      for (const spec of importsOf(readFileSync(file, 'utf8'))) {
        const to = owner(relative(root, resolve(dirname(file), spec)));
        if (to === undefined || to === from || to === 'src') continue;
        bad.push(`${rel} imports ${spec} (${to})`);
      }
    }
  }
  return bad;
}

void describe('layout', () => {
  void test('the scanner sees imports, re-exports and dynamic imports', () => {
    const text = [
      "import { a } from '../sidecar/options.js';",
      "import type { B } from '../../certs/pki.js';",
      "export { c } from './c.js';",
      "const d = await import('../webhook/main.js');",
      "import '../side-effect.js';",
      "import x from 'node-forge';",
    ].join('\n');
    assert.deepEqual(importsOf(text), ['../sidecar/options.js', '../../certs/pki.js', './c.js', '../webhook/main.js', '../side-effect.js']);
  });
  void test('each program has one home, cmd/<program>/, with a main (the scan is not vacuous)', () => {
    assert.deepEqual(PROGRAMS.map((p) => p.slice('cmd/'.length)).sort(compareText), EXPECTED_PROGRAMS);
    for (const p of PROGRAMS) assert.ok(readdirSync(join(root, p)).some((f) => f === 'main.ts' || f === 'cli.ts'), `${p} has no main.ts or cli.ts`);
    const strays = ['sidecar', 'webhook', 'certs', 'controller', 'node-agent'].flatMap((n) => [n, join('src', n)]).filter((p) => {
      try {
        return statSync(join(root, p)).isDirectory();
      } catch {
        return false;
      }
    });
    assert.deepEqual(strays, [], 'a program lives in cmd/<program>/ only');
  });
  void test('no program folder imports another program folder, and src/ imports none', () => {
    assert.deepEqual(crossProgramImports(), [], 'move what two programs share into src/');
  });
  void test('no localeCompare in the programs: order is by code point (src/order.ts)', () => {
    const offenders = ['src', ...PROGRAMS]
      .flatMap((d) => tsFiles(join(root, d)))
      .filter((f) => /\.localeCompare\(/.test(readFileSync(f, 'utf8')))
      .map((f) => relative(root, f));
    assert.deepEqual([...new Set(offenders)], []);
  });
  void test('compareText is code-point order, independent of locale', () => {
    assert.deepEqual(['b', 'a', 'B', 'é', 'z', '-', '1'].sort(compareText), ['-', '1', 'B', 'a', 'b', 'z', 'é']);
    assert.equal(compareText('x', 'x'), 0);
  });
});

// bench/ may import test/ (the harness, the real-node helpers); test/ never imports bench/: what
// both use lives in test/harness or src/, and bench's own tests live in bench/test.
void test('test/ and bench/ share code in one direction: bench/ may import test/, test/ never imports bench/', () => {
  const bad: string[] = [];
  let benchToTest = 0;
  for (const file of tsFiles(join(root, 'test'))) {
    for (const spec of importsOf(readFileSync(file, 'utf8'))) {
      const to = relative(root, resolve(dirname(file), spec));
      if (to === 'bench' || to.startsWith('bench' + sep)) bad.push(`${relative(root, file)} imports ${spec}`);
    }
  }
  for (const file of tsFiles(join(root, 'bench'))) {
    for (const spec of importsOf(readFileSync(file, 'utf8'))) if (relative(root, resolve(dirname(file), spec)).startsWith('test' + sep)) benchToTest++;
  }
  assert.ok(benchToTest > 0, 'the scan sees bench/ importing test/ (it is not vacuous)');
  assert.deepEqual(bad, [], 'move what tests need from bench/ into test/harness or src/; tests of bench code go in bench/test');
});
