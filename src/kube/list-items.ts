/**
 * Splits a Kubernetes list response (`{"kind":…,"metadata":{…},"items":[{…},{…}]}`) into its
 * items' JSON texts as the bytes arrive, so a list is parsed one item at a time instead of as one
 * string. Why: a list served from the watch cache ignores `limit`, so 1,000 Services × 10
 * endpoints come back as one 3 MB body; buffered, its chunks, the joined copy, the string and the
 * full objects (before the informer slims them) all live at once, and the process keeps the
 * memory it grew to (B5 in docs/benchmarks.md). Split, each item is parsed and slimmed while the
 * next bytes arrive, and only the small envelope (`metadata`: resourceVersion, continue) is kept
 * as text.
 *
 * Pure (strings in, strings out), so chunk boundaries anywhere (inside a string, an escape, a
 * key) can be tested without a server. It only tracks nesting, strings and escapes: the texts it
 * returns are checked by JSON.parse, which is where malformed input is reported.
 */

const QUOTE = 0x22;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/** JSON whitespace: space, tab, line feed, carriage return. */
const isSpace = (c: number): boolean => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

/** Where the scanner is: nesting depth 1 is the list object itself, 2 its values, 3 inside an item. */
export class ListItemSplitter {
  private depth = 0;
  private inString = false;
  private escaped = false;
  /** Text of the string being read at depth 1 (a key or a short value), and of the last one. */
  private topString: string | undefined;
  private lastTopString: string | undefined;
  /** The key whose value comes next at depth 1, once its colon is seen. */
  private key: string | undefined;
  /** Inside the `items` array (depth ≥ 2 while this holds). */
  private inItems = false;
  /** The current item's text from earlier chunks. */
  private partial = '';
  private envelope = '';

  /** Feeds the next piece of text; returns the items completed in it, in order. */
  push(chunk: string): string[] {
    const items: string[] = [];
    let envFrom = this.inItems ? -1 : 0;
    let itemFrom = this.inItems && this.depth >= 3 ? 0 : -1;
    const n = chunk.length;
    let i = 0;
    while (i < n) {
      if (this.inString) {
        if (this.escaped) {
          this.escaped = false;
          i += 1;
          continue;
        }
        const q = chunk.indexOf('"', i);
        const b = chunk.indexOf('\\', i);
        if (b !== -1 && (q === -1 || b < q)) {
          if (this.topString !== undefined) this.topString += chunk.slice(i, b + 1);
          this.escaped = true;
          i = b + 1;
          continue;
        }
        const end = q === -1 ? n : q;
        if (this.topString !== undefined) this.topString += chunk.slice(i, end);
        if (q === -1) break;
        this.inString = false;
        if (this.topString !== undefined) {
          this.lastTopString = this.topString;
          this.topString = undefined;
        }
        i = q + 1;
        continue;
      }
      const c = chunk.charCodeAt(i);
      if (this.inItems && this.depth === 2 && c !== OPEN_BRACE && c !== COMMA && c !== CLOSE_BRACKET && !isSpace(c)) {
        throw new Error(`list response: an element of "items" is not an object (at ${JSON.stringify(chunk.slice(i, i + 40))})`);
      }
      if (c === QUOTE) {
        this.inString = true;
        if (this.depth === 1) this.topString = '';
      } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
        if (this.inItems && this.depth === 2) itemFrom = i;
        this.depth += 1;
        if (this.depth === 2 && c === OPEN_BRACKET && this.key === 'items') {
          // The items array: what follows up to its `]` is not envelope.
          this.envelope += chunk.slice(envFrom, i + 1);
          envFrom = -1;
          this.inItems = true;
        }
      } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
        this.depth -= 1;
        if (this.inItems && this.depth === 2 && c === CLOSE_BRACE) {
          items.push(this.partial + chunk.slice(itemFrom, i + 1));
          this.partial = '';
          itemFrom = -1;
        } else if (this.inItems && this.depth === 1) {
          this.inItems = false;
          envFrom = i;
        }
      } else if (c === COLON && this.depth === 1) {
        this.key = this.lastTopString;
      } else if (c === COMMA && this.depth === 1) {
        this.key = undefined;
      }
      i += 1;
    }
    if (envFrom >= 0) this.envelope += chunk.slice(envFrom);
    if (itemFrom >= 0) this.partial += chunk.slice(itemFrom);
    return items;
  }

  /** The response without its items' contents (`"items":[]`), once everything was pushed. */
  end(): string {
    if (this.depth !== 0 || this.inString) throw new Error('list response ended in the middle of its JSON');
    return this.envelope;
  }
}
