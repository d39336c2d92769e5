/**
 * Strings the dataplane keeps for as long as their target lives (rule lines, chain names, keys)
 * are made flat. A template literal or `+` builds a tree of concatenation nodes, which V8 keeps as
 * long as the string lives: at 1,000 Services × 10 endpoints the rule lines' trees took 3.3 MiB of
 * heap where flat lines take 1.6 MiB, and chain names, port keys and slice group keys left another
 * 13,000 concatenation nodes (0.4 MiB) behind (docs/benchmarks.md, B5). Reading one character
 * makes V8 flatten the string in place; the next GC drops the tree.
 */
export function flat(text: string): string {
  text.charCodeAt(0);
  return text;
}
