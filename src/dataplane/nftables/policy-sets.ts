/**
 * The policy's sets, shared and bounded (docs/decisions/0298-policy-sets-shared-and-capped.md).
 *
 * - Shared: rules whose peers (or ports) come to the same elements use one set, whatever their
 *   policy, direction or network: the rules of one policy usually name the same address group,
 *   and a set copied per rule multiplied the `nft` parse, the kernel's elements and the sidecar's
 *   strings by the number of rules. A set is named after the first rule (in render order) that
 *   uses it, so a peer change that all its users share is still a refill of the same set.
 * - Bounded: at most MAX_POLICY_SET_ELEMENTS elements in all of one sidecar's policy sets. A rule
 *   whose new sets would pass it is left out (it allows nothing: fail-closed) with the reason,
 *   as Services past their cap are (docs/decisions/0020-service-cap-per-network.md).
 *
 * Pure: one pool per render.
 */
import { createHash } from 'node:crypto';

/**
 * Set elements one sidecar keeps for policy. Measured in a memory cgroup (docs/benchmarks.md,
 * Policy): about 1 KiB per element between the `nft` parse, the kernel and the process, so the cap
 * keeps a sidecar at it within what it costs at its Service budget (2,000 targets of 10 endpoints,
 * 20,000 map elements), and above two full address groups (10,000 addresses each at most).
 */
export const MAX_POLICY_SET_ELEMENTS = 25_000;

/** In every warning of a rule left out past the cap (policyCapWarnings, src/dataplane/policy-support.ts, picks them by it). */
export const CAP_WARNING_MARK = 'a bound on memory per sidecar';

/** One set of the policy: its declaration lines and its elements (nft text). */
export interface NftPolicySet {
  readonly decl: readonly string[];
  readonly elements: readonly string[];
}

/** A set a rule asks for: the name it would have alone, and its content. */
export type WantedSet = { readonly name: string; readonly set: NftPolicySet };

const contentKey = (s: NftPolicySet): string => {
  const h = createHash('sha256');
  h.update(s.decl.join(';'));
  for (const e of s.elements) h.update(`\u0000${e}`);
  return h.digest('base64');
};

export class SetPool {
  /** Content -> the name it was first added under. */
  private readonly byContent = new Map<string, string>();
  private total = 0;

  constructor(
    /** The sets by name, in the order first added (the render's map). */
    readonly sets: Map<string, NftPolicySet>,
    readonly cap: number = MAX_POLICY_SET_ELEMENTS,
  ) {}

  /** Elements held so far. */
  get elements(): number {
    return this.total;
  }

  /**
   * Adds one rule's sets together, or none: the name each is to be referred by (an equal set's
   * already in the pool, or its own), or the reason they would pass the cap.
   */
  addAll(wanted: readonly WantedSet[]): ReadonlyMap<string, string> | string {
    const names = new Map<string, string>();
    const fresh: [string, WantedSet][] = [];
    let added = 0;
    for (const w of wanted) {
      const key = contentKey(w.set);
      const known = this.byContent.get(key) ?? fresh.find(([k]) => k === key)?.[1].name;
      if (known !== undefined) names.set(w.name, known);
      else {
        fresh.push([key, w]);
        names.set(w.name, w.name);
        added += w.set.elements.length;
      }
    }
    if (this.total + added > this.cap)
      return `its sets add ${added} elements to the ${this.total} this sidecar's policy already holds, more than the ${this.cap} it keeps (${CAP_WARNING_MARK}); narrow the policies' peers (fewer pods or distinct peer lists per rule)`;
    for (const [key, w] of fresh) {
      this.byContent.set(key, w.name);
      this.sets.set(w.name, w.set);
    }
    this.total += added;
    return names;
  }
}
