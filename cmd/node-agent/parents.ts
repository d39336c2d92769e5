/**
 * The parent of the node's own interface on each network: the link a macvlan or ipvlan of ours
 * hangs off, or the bridge a bridge network's veth joins. It is the cluster admin's, from the Node
 * annotation `multus-proxy.k8s.cni.cncf.io/node-parents`:
 *   `demo/net-a=ens4; demo/net-b=br-storage`
 * A NAD's `master`/`bridge` is its owner's (a namespace tenant's) choice and decides nothing on the
 * host. For upgrades, the agent flag
 * `--parent-from-nad` (the admin's, in the DaemonSet) takes the NAD's parent where the admin named
 * none, as earlier versions did. Either way host-interface.ts still refuses a parent that carries
 * the node's own networking.
 *
 * Pure; bad input gives an InputError naming the key, the value and the fix.
 */
import { NODE_PARENTS_ANNOTATION } from '../../src/keys.js';
import { checkInterfaceName, IFNAME_RULE } from '../../src/annotations/names.js';
import { err, inputError, ok, type InputError, type Result } from '../../src/result.js';
import { parseNetworkEntries } from './node-entries.js';

const EXAMPLE = 'e.g. "demo/net-a=ens4; demo/net-b=br-storage"';
const FIX = `write "<namespace>/<nad>=<interface>" entries separated by ";", ${EXAMPLE}`;

/** The Node annotation: network key (`ns/nad`) -> the parent interface's name. Empty: none. */
export function parseNodeParents(value: string): Result<Map<string, string>, InputError> {
  const key = `annotation ${NODE_PARENTS_ANNOTATION}`;
  // Absent or emptied: the admin has named no parent yet (each served network says which to add).
  if (value.trim() === '') return ok(new Map());
  const entries = parseNetworkEntries(value, key, FIX, `list each network once, with one interface: ${EXAMPLE}`);
  if (!entries.ok) return entries;
  const out = new Map<string, string>();
  for (const { index, network, text } of entries.value) {
    const why = checkInterfaceName(text);
    if (why !== undefined) return err(inputError(key, value, `entry ${index} (${network}): the interface name ${JSON.stringify(text)} ${why}`, `an interface name is ${IFNAME_RULE}; ${FIX}`));
    out.set(network, text);
  }
  return ok(out);
}

/** Which parent one network gets on this node, and from whom; `none`: the network is not served here. */
export type ParentChoice = { readonly from: 'node'; readonly parent: string } | { readonly from: 'nad'; readonly parent: string } | { readonly from: 'none' };

/**
 * The admin's parent when the Node names one (whatever the NAD says); else the NAD's only under
 * `--parent-from-nad`; else none.
 */
export function chooseParent(network: string, adminParents: ReadonlyMap<string, string>, nadParent: string, parentFromNad: boolean): ParentChoice {
  const admin = adminParents.get(network);
  if (admin !== undefined) return { from: 'node', parent: admin };
  return parentFromNad ? { from: 'nad', parent: nadParent } : { from: 'none' };
}

/** POSIX shell single quotes: the suggested command carries a tenant's string (the NAD's master). */
const shellQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * The exact command that gives `network` the parent `suggested` on `nodeName`, keeping the
 * admin's other entries (the annotation is replaced as a whole).
 */
export function annotateParentCommand(nodeName: string, adminParents: ReadonlyMap<string, string>, network: string, suggested: string): string {
  const entries = [...adminParents].filter(([n]) => n !== network).map(([n, p]) => `${n}=${p}`);
  entries.push(`${network}=${suggested}`);
  return `kubectl annotate node ${nodeName} --overwrite ${NODE_PARENTS_ANNOTATION}=${shellQuote(entries.join(';'))}`;
}

/** The Node Event's message when the admin named no parent for a served network. */
export function parentNotConfiguredMessage(nodeName: string, network: string, nadParent: string, adminParents: ReadonlyMap<string, string>): string {
  return (
    `network ${network} is not served on node ${nodeName}: the cluster admin has named no parent interface for it in the Node annotation ${NODE_PARENTS_ANNOTATION}. ` +
    `The NAD's master (or bridge) is ${JSON.stringify(nadParent)}, which the NAD's owner chooses and the node agent does not follow. ` +
    `After checking that it is this network's own interface on the node (not the node's uplink), set it with: ${annotateParentCommand(nodeName, adminParents, network, nadParent)}` +
    ` (or run the agent with --parent-from-nad to keep following the NAD's master while you migrate)`
  );
}

/** The Node Event's message when the NAD's master differs from the admin's parent. */
export function parentOverriddenMessage(nodeName: string, network: string, nadParent: string, adminParent: string): string {
  return (
    `network ${network}: node ${nodeName} uses the parent ${JSON.stringify(adminParent)} from the Node annotation ${NODE_PARENTS_ANNOTATION}, not the NAD's master (or bridge) ${JSON.stringify(nadParent)}` +
    ` (the admin's wins; if the pods' interfaces are on ${JSON.stringify(nadParent)}, the node reaches them only when both are on one segment)`
  );
}
