/**
 * The iptables back end's entry in the registry (../registry.ts): made with the program's flavour
 * (or detected), and, as another back end's leftovers, both flavours (a pod that switched).
 */
import type { BackendContext, BackendFactory, Leftovers, Stage } from '../core/seam.js';
import { createIptablesBackend, type IptablesBackend } from './backend.js';
import type { IptablesFlavor } from './io.js';
import type { IptablesRules } from './rulesets.js';

function make(ctx: BackendContext, flavor: IptablesFlavor | 'auto', stage?: Stage<IptablesRules>): IptablesBackend {
  return createIptablesBackend(ctx.exec, { flavor, families: ctx.families, layout: ctx.layout, readFile: ctx.readFile, stage });
}

export const iptablesFactory: BackendFactory = {
  // Nothing starts ahead: spares follow a command run twice (tuning/spare-exec.ts), and its first
  // sync reads back with iptables-save, which no other part shares (tuning/read-ahead.ts).
  make: (ctx, stage) => make(ctx, ctx.options.iptablesFlavor ?? 'auto', stage as Stage<IptablesRules> | undefined),
  leftovers: (ctx): readonly Leftovers[] => [make(ctx, 'nft'), make(ctx, 'legacy')],
};
