/**
 * A first sync into a namespace that holds none of our tables, in two transactions: first the
 * tables' skeleton by `nft -f` (every table, chain, set and map, and the no-endpoints sets'
 * elements, but no endpoint-map and no dispatch-map element), then every endpoint map's ranges
 * and every dispatch element in one nfnetlink batch (element-writer.ts). Pure; backend.ts does
 * the IO.
 *
 * Why: nft parses the elements' text and, for a map created in the same transaction, the kernel
 * finds it by walking the transaction; the skeleton and the batch together cost well under the
 * whole text's one `nft -f` at 1,000-10,000 Services
 * (docs/decisions/0026-first-sync-fills-maps-over-netlink.md). The result is the same tables, element for element (a netns test lists
 * both).
 *
 * Nothing is half-on in between: until the batch commits, the dispatch maps are empty, so no
 * packet reaches a Service chain and the namespace behaves as before any sync (the no-endpoints
 * sets already reject, as they will after). The batch turns every Service port on at once.
 */
import type { ElementWrite, GotoElement, IntervalMapWrite, VerdictMapWrite } from '../netlink-batch.js';
import { dispatchFamily, mapRanges, partsText, tableParts, type NftPlan, type NftRuleset } from '../render.js';

const PROTOCOLS: ReadonlySet<string> = new Set(['tcp', 'udp', 'sctp']);

/** A dispatch element (`<address> . <proto> . <port>` : `goto <chain>`) as a goto write's element, or undefined when it is not one. */
export function gotoElement(key: string, value: string | undefined): GotoElement | undefined {
  if (value === undefined || !value.startsWith('goto ')) return undefined;
  const parts = key.split(' . ');
  if (parts.length !== 3) return undefined;
  const [ip = '', protocol = '', port = ''] = parts;
  if (!PROTOCOLS.has(protocol) || !/^[0-9]{1,5}$/.test(port)) return undefined;
  return { ip, protocol: protocol as GotoElement['protocol'], port: Number(port), chain: value.slice(5) };
}

/**
 * The first fill of `next`: the skeleton's text and the elements that follow it; undefined when an
 * element is not of the shapes the batch writes (then the whole text goes as one `nft -f`).
 */
export function planFirstFill(next: NftRuleset): NftPlan | undefined {
  const parts = tableParts(next);
  const fill: ElementWrite[] = [];
  for (const part of parts) {
    const table = part.table.name;
    for (let i = 0; i < part.targets.length; i += 1) {
      const t = part.targets[i] as (typeof part.targets)[number];
      if (t.maps.size === 0) continue;
      for (const [map, m] of t.maps) fill.push({ table, map, family: t.family, ranges: mapRanges(m), fresh: true } satisfies IntervalMapWrite);
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
      fill.push({ table, map: s.name, family, gotos } satisfies VerdictMapWrite);
    }
  }
  return { text: partsText(parts, [], true), full: true, changedChains: [...next.targets.keys()], deletedChains: [], replacedMaps: [], onlyReplacements: false, fill };
}
