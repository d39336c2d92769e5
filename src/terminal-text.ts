/**
 * Text from the cluster (Event messages, annotation values, names, apiserver errors) shown on a
 * terminal. Anyone who can write an Event or an annotation writes it, so control characters are
 * shown as visible escapes: no escape sequence retitles the terminal or erases lines, and no
 * newline or carriage return starts a line the tool did not write (a forged `verdict:` line).
 * Pure and linear.
 */

/**
 * C0 controls (newline and tab included), DEL, C1 controls, and the Unicode line and paragraph
 * separators and bidirectional overrides (which reorder what the reader sees).
 */
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

function visible(c: string): string {
  const code = c.codePointAt(0) ?? 0;
  if (c === '\n') return '\\n';
  if (c === '\r') return '\\r';
  if (c === '\t') return '\\t';
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/** `text` with every control character written as a visible escape (`\x1b`, `\n`, `\u202e`). */
export function escapeTerminal(text: string): string {
  return text.replace(UNSAFE, visible);
}

/** Lines the tool composed, each escaped, then joined: the only line breaks are the tool's own. */
export function terminalLines(lines: readonly string[]): string {
  return lines.map(escapeTerminal).join('\n');
}
