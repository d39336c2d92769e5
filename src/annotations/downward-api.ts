/**
 * The kubelet's downwardAPI file of `metadata.annotations` (or `metadata.labels`): one line per key,
 * sorted, each `key="value"` with the value quoted as Go's %q quotes it (strconv.Quote: `\"`,
 * `\\`, `\n`, `\t`, ... and `\xNN`, `\uNNNN`, `\UNNNNNNNN` for what is not printable). The sidecar
 * reads its own pod's annotations from it, so it needs no right to read pods (docs/security.md).
 *
 * Pure. What the file holds is the pod owner's input: a line that does not parse is an error
 * naming the line, never a crash, and no other line is lost because of it.
 */
import { err, ok, type Result } from '../result.js';

const SIMPLE: Readonly<Record<string, string>> = { a: '\x07', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v', '\\': '\\', '"': '"', "'": "'" };
const HEX_LEN: Readonly<Record<string, number>> = { x: 2, u: 4, U: 8 };

/** One Go double-quoted string literal (with its quotes) to its value. */
export function unquoteGo(text: string): Result<string, string> {
  if (text.length < 2 || !text.startsWith('"') || !text.endsWith('"')) return err('is not a double-quoted string');
  let out = '';
  const body = text.slice(1, -1);
  for (let i = 0; i < body.length; i++) {
    const c = body[i] as string;
    if (c === '"') return err(`has an unescaped quote at ${i + 1}`);
    if (c !== '\\') {
      out += c;
      continue;
    }
    const e = body[i + 1];
    if (e === undefined) return err('ends inside an escape');
    const simple = SIMPLE[e];
    if (simple !== undefined) {
      out += simple;
      i++;
      continue;
    }
    const n = HEX_LEN[e];
    if (n !== undefined) {
      const hex = body.slice(i + 2, i + 2 + n);
      const cp = /^[0-9a-fA-F]+$/.test(hex) && hex.length === n ? parseInt(hex, 16) : NaN;
      if (!Number.isInteger(cp) || cp > 0x10ffff) return err(`has a bad \\${e} escape at ${i + 1}`);
      out += String.fromCodePoint(cp);
      i += 1 + n;
      continue;
    }
    if (/[0-7]/.test(e)) {
      const oct = body.slice(i + 1, i + 4);
      if (!/^[0-7]{3}$/.test(oct)) return err(`has a bad octal escape at ${i + 1}`);
      out += String.fromCharCode(parseInt(oct, 8));
      i += 3;
      continue;
    }
    return err(`has an unknown escape \\${e} at ${i + 1}`);
  }
  return ok(out);
}

export interface DownwardMap {
  readonly values: Record<string, string>;
  /** Lines that did not parse, each as `line N: why` (the rest are kept). */
  readonly problems: string[];
}

/** The whole file. An empty file is an empty map (a pod without annotations). */
export function parseDownwardMap(text: string): DownwardMap {
  const values: Record<string, string> = Object.create(null) as Record<string, string>;
  const problems: string[] = [];
  text.split('\n').forEach((line, i) => {
    if (line === '') return;
    const eq = line.indexOf('=');
    if (eq <= 0) {
      problems.push(`line ${i + 1}: has no key="value"`);
      return;
    }
    const v = unquoteGo(line.slice(eq + 1));
    if (!v.ok) problems.push(`line ${i + 1} (${line.slice(0, eq)}): the value ${v.error}`);
    else values[line.slice(0, eq)] = v.value;
  });
  return { values: { ...values }, problems };
}

/** What the kubelet writes for a map: the inverse of parseDownwardMap (tests, and the fixtures of the sidecar's tests). */
export function formatDownwardMap(m: Readonly<Record<string, string>>): string {
  return Object.keys(m)
    .sort()
    .map((k) => `${k}=${quoteGo(m[k] as string)}\n`)
    .join('');
}

const QUOTE_NAMED = new Map<number, string>([
  [7, '\\a'],
  [8, '\\b'],
  [12, '\\f'],
  [10, '\\n'],
  [13, '\\r'],
  [9, '\\t'],
  [11, '\\v'],
  [92, '\\\\'],
  [34, '\\"'],
]);

/** Go's strconv.Quote for the characters annotations carry (printable Unicode kept as is). */
export function quoteGo(s: string): string {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0) as number;
    const named = QUOTE_NAMED.get(cp);
    if (named !== undefined) out += named;
    else if (cp < 0x20 || cp === 0x7f) out += `\\x${cp.toString(16).padStart(2, '0')}`;
    else if ((cp >= 0x80 && cp < 0xa0) || (cp >= 0xd800 && cp < 0xe000)) out += `\\u${cp.toString(16).padStart(4, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}
