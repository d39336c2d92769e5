/**
 * The `nft -f` text as the fake reads it: words and punctuation, then commands and blocks. A
 * statement ends at a newline or `;` outside braces; braces inside a rule (an anonymous set,
 * `update @set { ip saddr }`) stay in the rule. Nothing here knows what a word means.
 */

export interface Tok {
  readonly t: string;
  readonly line: number;
}

/** Words, `{`, `}`, `,`, `;` and newlines (as `\n`); `#` comments dropped; `"..."` one word. */
export function tokenize(text: string): Tok[] {
  const out: Tok[] = [];
  let line = 1;
  const re = /"([^"]*)"|([{},;])|(\n)|(#[^\n]*)|([^\s{},;"#]+)|([ \t\r]+)/g;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    if (m[1] !== undefined) out.push({ t: m[1], line });
    else if (m[2] !== undefined) out.push({ t: m[2], line });
    else if (m[3] !== undefined) out.push({ t: '\n', line: line++ });
    else if (m[5] !== undefined) out.push({ t: m[5], line });
  }
  return out;
}

/** A statement: its words (braces kept as words), and where it starts. */
export interface Stmt {
  readonly words: readonly string[];
  readonly line: number;
  /** The block that follows the statement's head (`table x {`, `chain y {`), as statements. */
  readonly block?: readonly Stmt[];
}

/** Heads whose `{` opens a block of statements rather than an inline set. */
const BLOCK_HEADS: readonly (readonly string[])[] = [
  ['table'],
  ['chain'],
  ['set'],
  ['map'],
  ['counter'],
  ['add', 'table'],
  ['add', 'chain'],
  ['add', 'set'],
  ['add', 'map'],
  ['create', 'table'],
  ['create', 'chain'],
  ['create', 'set'],
  ['create', 'map'],
];

const opensBlock = (words: readonly string[]): boolean => BLOCK_HEADS.some((h) => h.every((w, i) => words[i] === w)) && !words.includes('{');

/** Statements of a whole text (top level), blocks nested. Throws on unbalanced braces. */
export function statements(toks: readonly Tok[]): Stmt[] {
  const pos = { i: 0 };
  const out = block(toks, pos, false);
  if (pos.i < toks.length) throw new Error(`line ${toks[pos.i]?.line ?? 0}: unexpected "}"`);
  return out;
}

function block(toks: readonly Tok[], pos: { i: number }, nested: boolean): Stmt[] {
  const out: Stmt[] = [];
  let words: string[] = [];
  let line = 0;
  let depth = 0;
  const end = (): void => {
    if (words.length > 0) out.push({ words, line });
    words = [];
  };
  while (pos.i < toks.length) {
    const tok = toks[pos.i] as Tok;
    if (words.length === 0) line = tok.line;
    if (tok.t === '}' && depth === 0) {
      if (!nested) return (end(), out);
      pos.i += 1;
      end();
      return out;
    }
    pos.i += 1;
    if (depth === 0 && (tok.t === '\n' || tok.t === ';')) {
      end();
      continue;
    }
    if (tok.t === '{' && depth === 0 && opensBlock(words)) {
      const inner = block(toks, pos, true);
      out.push({ words, line, block: inner });
      words = [];
      continue;
    }
    if (tok.t === '\n') continue;
    if (tok.t === '{') depth += 1;
    if (tok.t === '}') depth -= 1;
    words.push(tok.t);
  }
  if (nested) throw new Error(`line ${line}: "{" without "}"`);
  end();
  return out;
}
