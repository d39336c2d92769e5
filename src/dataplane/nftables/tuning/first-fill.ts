/**
 * A first sync into a namespace that holds none of our tables, in bounded transactions: first
 * each table's skeleton by `nft -f` (its chains, sets and maps, and the no-endpoints sets'
 * elements, but no endpoint-map and no dispatch-map element), one table a transaction; then the
 * endpoint maps' ranges and the dispatch elements in chunks of at most FILL_CHUNK_ELEMENTS, one
 * transaction each: an nfnetlink batch (element-writer.ts), or, without a writer or after its
 * failure, `add map` text by `nft -f`. Pure; backend.ts does the IO.
 *
 * Why chunks: the sidecar's cgroup is charged for its `nft` child and for the kernel memory of
 * what it loads. One `nft -f` of the whole table at the budget (2,000 Service ports of 10
 * endpoints) took 64 MiB in `nft` on top of the rules' 37 MiB in the kernel, and with the
 * sidecar's own memory it met the container's 128 Mi limit
 * (docs/decisions/0195-first-fill-in-bounded-transactions.md). Why skeleton then elements at all:
 * nft parses the elements' text and, for a map created in the same transaction, the kernel finds
 * it by walking the transaction (docs/decisions/0026-first-sync-fills-maps-over-netlink.md). The
 * result is the same tables, element for element, whichever path (a netns test lists them).
 *
 * Nothing is half-on in between: the endpoint maps are filled first, and the dispatch elements,
 * which turn a Service port on, come last, each after its chain and map are complete. Until then
 * a Service port is as before any sync (the no-endpoints sets already reject, as they will
 * after). The sidecar is not ready before its first complete sync, so the app's first connection
 * comes after the last chunk. Every later sync is one transaction, as before.
 */
import type { ElementWrite, GotoElement, IntervalMapWrite, VerdictMapWrite } from '../netlink-batch.js';
import { dispatchFamily, mapRanges, NFT_FAMILY, partsText, rangeText, tableParts, type NftFillChunk, type NftPlan, type NftRuleset } from '../render.js';

const PROTOCOLS: ReadonlySet<string> = new Set(['tcp', 'udp', 'sctp']);

/**
 * Endpoint-map ranges and dispatch elements per transaction of a first fill. At the budget, chunks
 * of 2,000 as `add map` text kept the cgroup's peak ~5 MiB above the rules' own kernel memory
 * (5,000: ~12 MiB; the whole table at once: ~60 MiB; the decision above); an nfnetlink chunk costs
 * less. A map larger than a chunk is split over chunks (elements are added, never flushed, in a
 * first fill).
 */
export const FILL_CHUNK_ELEMENTS = 2_000;

/** A dispatch element (`<address> . <proto> . <port>` : `goto <chain>`) as a goto write's element, or undefined when it is not one. */
export function gotoElement(key: string, value: string | undefined): GotoElement | undefined {
  if (value === undefined || !value.startsWith('goto ')) return undefined;
  const parts = key.split(' . ');
  if (parts.length !== 3) return undefined;
  const [ip = '', protocol = '', port = ''] = parts;
  if (!PROTOCOLS.has(protocol) || !/^[0-9]{1,5}$/.test(port)) return undefined;
  return { ip, protocol: protocol as GotoElement['protocol'], port: Number(port), chain: value.slice(5) };
}

/** Splits writes, in order, into chunks of at most `size` elements (a write larger than the room left continues in the next chunk). Pure. */
export function chunkWrites(writes: readonly { readonly write: ElementWrite; readonly decl: string }[], size: number = FILL_CHUNK_ELEMENTS): NftFillChunk[] {
  const chunks: NftFillChunk[] = [];
  let cur: { writes: ElementWrite[]; decls: string[]; n: number } = { writes: [], decls: [], n: 0 };
  const close = (): void => {
    if (cur.n > 0) chunks.push({ writes: cur.writes, decls: cur.decls });
    cur = { writes: [], decls: [], n: 0 };
  };
  for (const { write, decl } of writes) {
    const all = 'gotos' in write ? write.gotos : write.ranges;
    for (let from = 0; from < all.length;) {
      if (cur.n >= size) close();
      const take = Math.min(size - cur.n, all.length - from);
      const part = all.slice(from, from + take);
      cur.writes.push('gotos' in write ? { ...write, gotos: part as GotoElement[] } : { ...write, ranges: part as IntervalMapWrite['ranges'] });
      cur.decls.push(decl);
      cur.n += take;
      from += take;
    }
  }
  close();
  return chunks;
}

/** A chunk as `nft -f` text: one `add map` with elements per write (adds to the map the skeleton made; no element command, see render.ts mapDecl). Pure. */
export function fillChunkText(chunk: NftFillChunk): string {
  const out: string[] = [];
  chunk.writes.forEach((w, i) => {
    const head = `add map ${NFT_FAMILY} ${w.table} ${w.map} { ${chunk.decls[i] ?? ''}; `;
    if ('gotos' in w) out.push(`${head}elements = { ${w.gotos.map((g) => `${g.ip} . ${g.protocol} . ${g.port} : goto ${g.chain}`).join(', ')} }; }\n`);
    else out.push(`${head}flags interval; elements = { ${w.ranges.map(rangeText).join(', ')} }; }\n`);
  });
  return out.join('');
}

/**
 * The first fill of `next`: each table's skeleton, then its elements in chunks (endpoint maps of
 * every table first, dispatch elements last); undefined when a dispatch element is not of the
 * shapes the fill writes (then the whole text goes as one `nft -f`).
 */
export function planFirstFill(next: NftRuleset, chunkElements: number = FILL_CHUNK_ELEMENTS): NftPlan | undefined {
  const parts = tableParts(next);
  const maps: { write: ElementWrite; decl: string }[] = [];
  const dispatch: { write: ElementWrite; decl: string }[] = [];
  for (const part of parts) {
    const table = part.table.name;
    for (let i = 0; i < part.targets.length; i += 1) {
      const t = part.targets[i] as (typeof part.targets)[number];
      if (t.maps.size === 0) continue;
      for (const [map, m] of t.maps) maps.push({ write: { table, map, family: t.family, ranges: mapRanges(m), fresh: true } satisfies IntervalMapWrite, decl: m.type });
    }
    for (const s of part.table.sets) {
      const family = dispatchFamily(s);
      const elements = part.elements.get(s.name);
      if (family === undefined || elements === undefined || elements.length === 0) continue;
      const gotos: GotoElement[] = [];
      for (const e of elements) {
        const g = gotoElement(e.key, e.value);
        if (g === undefined) return undefined;
        gotos.push(g);
      }
      dispatch.push({ write: { table, map: s.name, family, gotos } satisfies VerdictMapWrite, decl: s.decl.join('; ') });
    }
  }
  const skeletons = parts.map((p) => partsText([p], [], true));
  const chunks = chunkWrites([...maps, ...dispatch], chunkElements);
  return { text: skeletons.join(''), full: true, changedChains: [...next.targets.keys()], deletedChains: [], replacedMaps: [], onlyReplacements: false, fill: { skeletons, chunks } };
}
