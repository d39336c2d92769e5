/**
 * The dataplane's second public entry: the building blocks for a program that renders rules of its
 * own beside the shared render (the node agent's NodePorts, LoadBalancer frontends and the node's
 * cluster-IP access), and implements a Stage (index.ts) per back end over them. Endpoint choice,
 * names, and each back end's rule parts, so such a program writes the same rules the sidecar does
 * without reaching into the packages.
 */
export { chooseEndpoints, normalizeAddress, validPort } from './core/endpoints.js';
export { hashName, SIDECAR_LAYOUT, type Layout } from './core/names.js';
export { ipJsonRows } from './core/routes.js';
export type { Exec } from './core/exec.js';
export { createExec } from './tuning/spare-exec.js';
export { IptablesStage } from './iptables/stage.js';
export { comment, matchPort, portLabel, rejectWith, serviceChainRules } from './iptables/render.js';
export type { Chains, IptablesRules, Ruleset } from './iptables/rulesets.js';
export {
  addressSet,
  clusterIPsSet,
  collectTargets,
  FAMILIES,
  fullText,
  ipKw,
  keyMatch,
  keySet,
  noEndpointsSet,
  REJECT_CHAIN,
  REJECT_RULES,
  renderPicks,
  renderTarget,
  servicesMap,
  targetKey,
  unservedRules,
  verdictMap,
  type NftElement,
  type NftRuleset,
  type NftTable,
  type NftTarget,
  type PickLayout,
} from './nftables/render.js';
