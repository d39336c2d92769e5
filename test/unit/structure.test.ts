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
import ts from 'typescript';
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
    for (const p of PROGRAMS)
      assert.ok(
        readdirSync(join(root, p)).some((f) => f === 'main.ts' || f === 'cli.ts'),
        `${p} has no main.ts or cli.ts`,
      );
    const strays = ['sidecar', 'webhook', 'certs', 'controller', 'node-agent']
      .flatMap((n) => [n, join('src', n)])
      .filter((p) => {
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

// ---------------------------------------------------------------------------------------------
// The module graph and function sizes, read with the TypeScript parser (not regular expressions).

interface ParsedFile {
  /** Repository-relative paths of the static imports and re-exports (`import type` included). */
  readonly imports: readonly string[];
  /** Every function-like node: its name and its length in lines (nested functions count in their parent too). */
  readonly functions: readonly { readonly name: string; readonly lines: number }[];
}

function functionName(node: ts.Node, sf: ts.SourceFile): string {
  const line = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;
  const named = (n: ts.Node | undefined): string | undefined => (n !== undefined && (ts.isIdentifier(n) || ts.isStringLiteral(n) || ts.isPrivateIdentifier(n)) ? n.text : undefined);
  let name: string | undefined;
  if (ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isGetAccessor(node) || ts.isSetAccessor(node) || ts.isFunctionExpression(node)) name = named(node.name);
  if (ts.isConstructorDeclaration(node)) name = 'constructor';
  if (name === undefined && (ts.isVariableDeclaration(node.parent) || ts.isPropertyAssignment(node.parent) || ts.isPropertyDeclaration(node.parent))) name = named(node.parent.name);
  const cls = ts.findAncestor(node.parent, ts.isClassDeclaration);
  const base = name ?? `<anonymous@${line}>`;
  return cls?.name !== undefined && (ts.isMethodDeclaration(node) || ts.isConstructorDeclaration(node) || ts.isGetAccessor(node) || ts.isSetAccessor(node)) ? `${cls.name.text}.${base}` : base;
}

const parsed = new Map<string, ParsedFile>();
function parse(rel: string): ParsedFile {
  const hit = parsed.get(rel);
  if (hit !== undefined) return hit;
  const text = readFileSync(join(root, rel), 'utf8');
  const sf = ts.createSourceFile(rel, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const imports: string[] = [];
  const functions: { name: string; lines: number }[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier !== undefined && ts.isStringLiteral(node.moduleSpecifier)) {
      const spec = node.moduleSpecifier.text;
      if (spec.startsWith('.')) imports.push(relative(root, resolve(dirname(join(root, rel)), spec)).replace(/\.js$/, '.ts'));
    }
    if (
      ts.isFunctionDeclaration(node) ||
      ts.isFunctionExpression(node) ||
      ts.isArrowFunction(node) ||
      ts.isMethodDeclaration(node) ||
      ts.isConstructorDeclaration(node) ||
      ts.isGetAccessor(node) ||
      ts.isSetAccessor(node)
    ) {
      if (node.body !== undefined) {
        const first = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
        const last = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
        functions.push({ name: functionName(node, sf), lines: last - first + 1 });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  const out = { imports, functions };
  parsed.set(rel, out);
  return out;
}

/** Every .ts file of src/ and cmd/, repository-relative. */
const SOURCES = ['src', 'cmd']
  .flatMap((d) => tsFiles(join(root, d)))
  .map((f) => relative(root, f))
  .sort(compareText);

/** The import circles among `files` (strongly connected components of more than one file, or a file importing itself). Tarjan's algorithm. */
export function importCircles(files: readonly string[], importsOf: (f: string) => readonly string[]): string[][] {
  const known = new Set(files);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  let next = 0;
  const connect = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next += 1;
    stack.push(v);
    onStack.add(v);
    for (const w of importsOf(v).filter((x) => known.has(x))) {
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    for (let w = stack.pop(); w !== undefined; w = stack.pop()) {
      onStack.delete(w);
      component.push(w);
      if (w === v) break;
    }
    if (component.length > 1 || importsOf(v).includes(v)) circles.push(component.sort(compareText));
  };
  for (const f of files) if (!index.has(f)) connect(f);
  return circles;
}

/** The dataplane's packages and what each may import inside src/dataplane/ (anything outside it, in src/, is shared). */
const DATAPLANE = join('src', 'dataplane');
const PACKAGE_MAY_IMPORT: Readonly<Record<string, readonly string[]>> = {
  core: ['core'],
  tuning: ['core', 'tuning'],
  iptables: ['core', 'tuning', 'iptables'],
  nftables: ['core', 'tuning', 'nftables'],
};
/** The package of a path in src/dataplane/ ('' for the top level: index.ts, node.ts, registry.ts, create.ts, the start-up choice), or undefined outside it. */
function dataplanePackage(rel: string): string | undefined {
  if (!rel.startsWith(DATAPLANE + sep)) return undefined;
  const rest = rel.slice(DATAPLANE.length + 1).split(sep);
  return rest.length === 1 ? '' : rest[0];
}

/** The dataplane's public entry points: the only dataplane files the node agent may import. */
const DATAPLANE_ENTRIES = [join(DATAPLANE, 'index.ts'), join(DATAPLANE, 'node.ts')];

const MAX_FUNCTION_LINES = 80;

/**
 * Functions over MAX_FUNCTION_LINES lines, with their length today. The list may only shrink: a
 * listed function may not grow, and one that got short enough must leave the list (the test says
 * so). In src/dataplane/ only pure renderers may stay, each with the reason.
 */
const LONG_FUNCTIONS: Readonly<Record<string, number>> = {
  // Pure renderers, one output format each, read top to bottom against the format they write:
  // the netlink batch of an interval-map refill (its message layout in order) ...
  'src/dataplane/nftables/netlink-batch.ts:encodeIntervalMapBatch': 95,
  // ... and the nft text of a partial change (its statements in the order nft must run them).
  'src/dataplane/nftables/render.ts:partialText': 94,
};

function longFunctions(): Map<string, number> {
  const out = new Map<string, number>();
  for (const rel of SOURCES) {
    for (const f of parse(rel).functions) {
      if (f.lines <= MAX_FUNCTION_LINES) continue;
      const key = `${rel}:${f.name}`;
      out.set(key, Math.max(out.get(key) ?? 0, f.lines));
    }
  }
  return out;
}

void describe('the module graph', () => {
  void test('the circle finder finds a circle and a self-import, and nothing in a chain', () => {
    const graph: Record<string, string[]> = { a: ['b'], b: ['c'], c: ['a'], d: ['d'], e: ['a'] };
    assert.deepEqual(
      importCircles(Object.keys(graph), (f) => graph[f] ?? []),
      [['a', 'b', 'c'], ['d']],
    );
    assert.deepEqual(
      importCircles(['x', 'y'], (f) => (f === 'x' ? ['y'] : [])),
      [],
    );
  });
  void test('no import circle in src/ and cmd/ (static imports and re-exports, `import type` included)', () => {
    assert.ok(SOURCES.length > 100, 'the scan is not vacuous');
    assert.deepEqual(
      importCircles(SOURCES, (f) => parse(f).imports),
      [],
    );
  });
  void test('the back ends import the core (and tuning), never each other; the core and tuning import no back end', () => {
    const bad: string[] = [];
    for (const rel of SOURCES) {
      const from = dataplanePackage(rel);
      if (from === undefined || from === '') continue;
      const may = PACKAGE_MAY_IMPORT[from];
      assert.ok(may !== undefined, `${rel}: a package of src/dataplane/ this test does not know (add it to PACKAGE_MAY_IMPORT)`);
      for (const to of parse(rel).imports) {
        const pkg = dataplanePackage(to);
        if (pkg !== undefined && !may.includes(pkg)) bad.push(`${rel} imports ${to}`);
      }
    }
    assert.deepEqual(bad, []);
    assert.deepEqual(Object.keys(PACKAGE_MAY_IMPORT).sort(compareText), ['core', 'iptables', 'nftables', 'tuning'], 'the packages exist');
  });
  void test("the node agent imports only the dataplane's public entry points", () => {
    const bad = SOURCES.filter((f) => f.startsWith(join('cmd', 'node-agent') + sep)).flatMap((f) =>
      parse(f)
        .imports.filter((to) => to.startsWith(DATAPLANE + sep) && !DATAPLANE_ENTRIES.includes(to))
        .map((to) => `${f} imports ${to}`),
    );
    assert.deepEqual(bad, []);
  });
  void test(`no function over ${MAX_FUNCTION_LINES} lines in src/ and cmd/ but the listed ones, and none of those grew or may leave the list`, () => {
    const found = longFunctions();
    const unlisted = [...found].filter(([k]) => LONG_FUNCTIONS[k] === undefined).map(([k, n]) => `${k} (${n} lines)`);
    const grew = [...found].filter(([k, n]) => LONG_FUNCTIONS[k] !== undefined && n > LONG_FUNCTIONS[k]).map(([k, n]) => `${k}: ${n} lines, listed at ${LONG_FUNCTIONS[k]}`);
    const shrunk = Object.keys(LONG_FUNCTIONS)
      .filter((k) => !found.has(k))
      .map((k) => `${k}: now within ${MAX_FUNCTION_LINES} lines, remove it from LONG_FUNCTIONS`);
    assert.deepEqual([...unlisted, ...grew, ...shrunk], []);
  });
});
