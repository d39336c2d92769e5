/**
 * The rule back ends by name: a map from name to factory, so the code that makes a dataplane
 * (create.ts) and the pipeline (core/pipeline.ts) never ask which back end runs. A new back end is
 * a package beside iptables/ and nftables/ and one line here.
 */
import type { BackendFactory, BackendKind } from './core/seam.js';
import { iptablesFactory } from './iptables/factory.js';
import { nftablesFactory } from './nftables/factory.js';

export const BACKENDS: Readonly<Record<BackendKind, BackendFactory>> = {
  iptables: iptablesFactory,
  nftables: nftablesFactory,
};

/** The kind a dataplane runs: the one asked for; iptables for auto or unset (the programs resolve auto with a probe first: backend-choice.ts). */
export function backendKind(asked: BackendKind | 'auto' | undefined): BackendKind {
  return asked === undefined || asked === 'auto' ? 'iptables' : asked;
}
