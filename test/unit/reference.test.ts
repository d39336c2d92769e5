/**
 * The reference pages (docs/reference/) match the code: scripts/reference.ts regenerates them in
 * memory and each file must equal its page. A failure names the page and the lines missing from it
 * (something the code has that the page lacks: a new flag, value, metric) or stale in it; the fix
 * is `npm run docs:reference`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { eventReasons, helmValues, inlineMetrics, keyRows, REFERENCE_DIR, renderReference } from '../../scripts/reference.js';

const ROOT = resolve(import.meta.dirname, '..', '..');

/** Lines of `want` not in `have`, and of `have` not in `want`. */
function lineDiff(want: string, have: string): { missing: string[]; stale: string[] } {
  const w = want.split('\n');
  const h = have.split('\n');
  const hs = new Set(h);
  const ws = new Set(w);
  return { missing: w.filter((l) => !hs.has(l)), stale: h.filter((l) => !ws.has(l)) };
}

void test('docs/reference/ is what scripts/reference.ts generates from the code (fix: npm run docs:reference)', () => {
  const pages = renderReference();
  const dir = join(ROOT, REFERENCE_DIR);
  const problems: string[] = [];
  const onDisk = new Set(readdirSync(dir).filter((f) => f.endsWith('.md')));
  for (const [file, want] of pages) {
    if (!onDisk.has(file)) {
      problems.push(`${REFERENCE_DIR}/${file} is missing`);
      continue;
    }
    const have = readFileSync(join(dir, file), 'utf8');
    if (have === want) continue;
    const { missing, stale } = lineDiff(want, have);
    const show = (ls: string[]): string =>
      ls
        .slice(0, 5)
        .map((l) => `\n    ${l.slice(0, 200)}`)
        .join('') + (ls.length > 5 ? `\n    … ${ls.length - 5} more` : '');
    problems.push(
      `${REFERENCE_DIR}/${file} is stale:${missing.length > 0 ? `\n  missing from the page:${show(missing)}` : ''}${stale.length > 0 ? `\n  on the page, no longer in the code:${show(stale)}` : ''}${missing.length + stale.length === 0 ? ' (order differs)' : ''}`,
    );
  }
  for (const f of onDisk) if (!pages.has(f)) problems.push(`${REFERENCE_DIR}/${f} is not generated any more: delete it`);
  assert.deepEqual(problems, [], `${problems.join('\n')}\nRun: npm run docs:reference`);
});

void test('the pages cover what the code defines (the generator reads each table, not nothing)', () => {
  const pages = renderReference();
  assert.match(pages.get('flags.md') ?? '', /`--kubeconfig PATH`/);
  assert.match(pages.get('helm-values.md') ?? '', /\| `controller\.replicas` \| `2` \|/);
  assert.match(pages.get('annotations.md') ?? '', /`k8s\.v1\.cni\.cncf\.io\/service-network`/);
  assert.match(pages.get('metrics.md') ?? '', /`multus_proxy_sidecar_sync_duration_seconds`/);
  assert.match(pages.get('metrics.md') ?? '', /`multus_proxy_node_nodeports`/);
  assert.match(pages.get('events.md') ?? '', /`SidecarSyncFailed`/);
});

void test('the scanners: values with their comments, keys with their docs, inline metrics, Event reasons', () => {
  const values = helmValues('# The image.\nimage:\n  # Its name.\n  repository: x\n  tag: ""\nlist: []\n\nplain: 3\n');
  assert.deepEqual(values, [
    { key: 'image', value: '', comment: 'The image.' },
    { key: 'image.repository', value: '"x"', comment: 'Its name.' },
    { key: 'image.tag', value: '""', comment: '' },
    { key: 'list', value: '[]', comment: '' },
    { key: 'plain', value: '3', comment: '' },
  ]);
  const src = "/** On a Service. */\nexport const A_ANNOTATION = 'a';\nexport const B_LABEL = 'b';\n/** Not a key. */\nexport const NAME = 'n';\n";
  assert.deepEqual(keyRows(src, { A_ANNOTATION: 'a/x', B_LABEL: 'b/y', NAME: 'n' }), [
    { name: 'A_ANNOTATION', key: 'a/x', kind: 'annotation', doc: 'On a Service.' },
    { name: 'B_LABEL', key: 'b/y', kind: 'label', doc: '' },
  ]);
  const text = "const g = new prom.Gauge({ name: 'p_x', help: 'The node\\'s x', labelNames: ['a', 'b'], registers: [r] });\nnew prom.Gauge({ name: 'q_y', help: 'other' });";
  assert.deepEqual(inlineMetrics([{ file: 'f.ts', text }], 'p'), [{ name: 'p_x', type: 'gauge', labels: ['a', 'b'], help: "The node's x" }]);
  const files = [
    {
      file: 'a.ts',
      text: "events.warn(svc, key, 'BadThing', msg);\nreturn { status: 'False', reason: 'ConditionOnly' };\nexport const REASON_X = 'XHappened';\nrecord(about, 'Normal', s, 'Moved', m);",
    },
    { file: 'b.ts', text: "push({ kind: 'Node', reason: 'BadThing', message });" },
  ];
  assert.deepEqual(eventReasons(files), [
    { reason: 'BadThing', files: ['a.ts', 'b.ts'] },
    { reason: 'Moved', files: ['a.ts'] },
    { reason: 'XHappened', files: ['a.ts'] },
  ]);
});
