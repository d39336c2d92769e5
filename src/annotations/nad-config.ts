/**
 * A NetworkAttachmentDefinition's CNI configuration (`spec.config`), read for one question: on
 * which kernel interface of the node does this network live? The node agent serves NodePort and
 * ClusterIP on that interface; everything else in the config is the CNI plugin's business.
 *
 * - macvlan and ipvlan: the parent is `master` (the plugins' default, the default-route
 *   interface, is not guessed: the agent would program the wrong NIC if the routes change);
 * - bridge: the parent is `bridge` (the plugin's default name is `cni0`);
 * - a conflist (`plugins`): the first plugin is the one that makes the interface (tuning, portmap,
 *   sbr… follow it), so it decides;
 * - anything else (sriov, host-device, ovs, ib-sriov, userspace, …) moves a device into the pod or
 *   has no kernel interface on the host to attach to: unservable, with the type named, never an
 *   error. A config that is not JSON, or whose fields have the wrong types, is an error that
 *   names the NAD, the key, the value and the fix.
 *
 * Pure; never throws (the input comes from users).
 */
import { err, inputError, ok, type InputError, type Result } from '../result.js';
import { checkInterfaceName, IFNAME_RULE } from './names.js';
import { isJsonObject, jsonKind, ownField, parseJson, type JsonObject } from './json.js';

export type ServablePlugin = 'macvlan' | 'ipvlan' | 'bridge';

/** A network the node agent can serve: which plugin made the pods' interfaces, on which parent. */
export interface ServableNetwork {
  readonly servable: true;
  readonly plugin: ServablePlugin;
  /** The node's interface the pods' interfaces hang off (`master`, or the `bridge` device). */
  readonly parent: string;
  /** macvlan: bridge|private|vepa|passthru (default bridge); ipvlan: l2|l3|l3s (default l2); bridge: ''. */
  readonly mode: string;
}

/** A network the node agent cannot serve, with why (for the Warning Event and the metric). */
export interface UnservableNetwork {
  readonly servable: false;
  /** The CNI `type` (or `(none)`), the metric's label. */
  readonly type: string;
  readonly reason: string;
}

export type NetworkConfig = ServableNetwork | UnservableNetwork;

/** The NAD field holding the config, as named in messages. */
export const NAD_CONFIG_KEY = 'spec.config';

/** Types known to need something other than a kernel interface on the host, with why. */
const UNSERVABLE_WHY: Readonly<Record<string, string>> = {
  sriov: 'SR-IOV hands a virtual function to the pod; the node has no interface on that network to attach to (give the node a VF of its own and a macvlan NAD on it)',
  'ib-sriov': 'InfiniBand SR-IOV hands a virtual function to the pod; there is no Ethernet interface on the node',
  'host-device': "host-device moves the node's device into the pod, so the node no longer has it",
  ovs: 'OVS ports are made by the OVS bridge; the agent does not program OVS',
  'ovn-k8s-cni-overlay': 'OVN-Kubernetes secondary networks are served by OVN itself',
  userspace: 'userspace (DPDK/vhost-user) interfaces are not kernel interfaces',
  'vhost-user': 'vhost-user interfaces are not kernel interfaces',
  ptp: 'ptp makes a point-to-point veth per pod; there is no shared segment on the node to attach to',
};

const MACVLAN_MODES = ['bridge', 'private', 'vepa', 'passthru'];
const IPVLAN_MODES = ['l2', 'l3', 'l3s'];

/** The largest config we read; Multus configs are a few hundred bytes, this stops a 1 MB blob early. */
const MAX_CONFIG_BYTES = 64 * 1024;

const FIX_JSON = 'write the CNI configuration as one JSON object, e.g. {"cniVersion":"0.4.0","type":"macvlan","master":"eth1","mode":"bridge","ipam":{...}}';

/** The plugin that makes the interface, and where it sits in the config (for messages). */
export interface MainPlugin {
  readonly plugin: JsonObject;
  readonly where: string;
}

/**
 * The plugin of a NAD's `spec.config` that makes the interface: the config itself, or a conflist's
 * first plugin (tuning, portmap, sbr… follow it). Undefined for an absent or empty config (Multus
 * then reads a file on each node). Shared by the node agent's parent and the controller's IPAM range.
 */
export function mainPlugin(config: unknown): Result<MainPlugin | undefined, InputError> {
  if (config === undefined || config === null || config === '') return ok(undefined);
  if (typeof config !== 'string') return err(inputError(NAD_CONFIG_KEY, jsonKind(config), `is ${jsonKind(config)}, expected a string holding JSON`, FIX_JSON));
  if (config.length > MAX_CONFIG_BYTES) return err(inputError(NAD_CONFIG_KEY, config, `is ${config.length} characters long, more than ${MAX_CONFIG_BYTES}`, FIX_JSON));
  const parsed = parseJson(config);
  if (!parsed.ok) return err(inputError(NAD_CONFIG_KEY, config, parsed.error, FIX_JSON));
  if (!isJsonObject(parsed.value)) return err(inputError(NAD_CONFIG_KEY, config, `is ${jsonKind(parsed.value)}, expected a JSON object`, FIX_JSON));
  const top = parsed.value;
  const plugins = ownField(top, 'plugins');
  if (plugins !== undefined && plugins !== null) {
    if (!Array.isArray(plugins))
      return err(
        inputError(
          `${NAD_CONFIG_KEY} "plugins"`,
          JSON.stringify(plugins) ?? '',
          `is ${jsonKind(plugins)}, expected a list of plugin objects`,
          'write "plugins": [{"type":"macvlan","master":"eth1",...}, ...] or use a single plugin without "plugins"',
        ),
      );
    const first = (plugins as unknown[])[0];
    if (first === undefined)
      return err(inputError(`${NAD_CONFIG_KEY} "plugins"`, '[]', 'is an empty list', 'list at least the plugin that makes the interface, e.g. {"type":"macvlan","master":"eth1"}'));
    if (!isJsonObject(first))
      return err(inputError(`${NAD_CONFIG_KEY} "plugins" item 1`, JSON.stringify(first) ?? '', `is ${jsonKind(first)}, expected a plugin object`, 'write {"type":"macvlan","master":"eth1",...}'));
    return ok({ plugin: first, where: `${NAD_CONFIG_KEY} "plugins" item 1` });
  }
  return ok({ plugin: top, where: NAD_CONFIG_KEY });
}

/**
 * Parses a NAD's `spec.config`; the caller names the NAD (formatInputError). An absent or empty config
 * means Multus reads a file of that name on each node, which the agent cannot see: unservable.
 */
export function parseNetworkConfig(config: unknown): Result<NetworkConfig, InputError> {
  const main = mainPlugin(config);
  if (!main.ok) return main;
  if (main.value === undefined) {
    return ok({ servable: false, type: '(none)', reason: 'spec.config is empty: Multus then reads a file on each node, which the node agent does not read; put the CNI configuration in spec.config' });
  }
  return plugin(main.value.plugin, main.value.where);
}

function plugin(obj: JsonObject, where: string): Result<NetworkConfig, InputError> {
  const type = ownField(obj, 'type');
  if (typeof type !== 'string' || type === '') {
    return err(
      inputError(
        `${where} "type"`,
        type === undefined ? '(missing)' : (JSON.stringify(type) ?? ''),
        type === undefined ? 'is missing' : `is ${jsonKind(type)}, expected the CNI plugin's name`,
        'name the plugin, e.g. "type": "macvlan"',
      ),
    );
  }
  switch (type) {
    case 'macvlan':
    case 'ipvlan': {
      const master = ownField(obj, 'master');
      if (master === undefined || master === null || master === '') {
        return ok({
          servable: false,
          type,
          reason: `${type} without "master" uses the node's default-route interface, which the node agent does not guess; set "master" to the node's interface on this network`,
        });
      }
      const parent = iface(master, `${where} "master"`);
      if (!parent.ok) return parent;
      const modes = type === 'macvlan' ? MACVLAN_MODES : IPVLAN_MODES;
      const mode = ownField(obj, 'mode');
      if (mode !== undefined && mode !== null && (typeof mode !== 'string' || !modes.includes(mode))) {
        return err(
          inputError(
            `${where} "mode"`,
            typeof mode === 'string' ? mode : (JSON.stringify(mode) ?? ''),
            `is not a ${type} mode`,
            `write one of ${modes.map((m) => `"${m}"`).join(', ')}, or leave it out (${modes[0]})`,
          ),
        );
      }
      const chosen = typeof mode === 'string' ? mode : (modes[0] as string);
      if (type === 'macvlan' && chosen === 'passthru') {
        return ok({ servable: false, type, reason: 'macvlan "passthru" gives the whole parent to one pod; the node cannot add an interface of its own beside it' });
      }
      if (type === 'ipvlan' && chosen !== 'l2') {
        return ok({ servable: false, type, reason: `ipvlan "${chosen}" routes instead of bridging; the node agent serves ipvlan only in "l2" mode` });
      }
      return ok({ servable: true, plugin: type, parent: parent.value, mode: chosen });
    }
    case 'bridge': {
      const name = ownField(obj, 'bridge');
      // The bridge plugin's own default.
      const parent = name === undefined || name === null || name === '' ? ok('cni0') : iface(name, `${where} "bridge"`);
      if (!parent.ok) return parent;
      return ok({ servable: true, plugin: 'bridge', parent: parent.value, mode: '' });
    }
    default:
      return ok({ servable: false, type, reason: UNSERVABLE_WHY[type] ?? `the CNI plugin "${type}" is not one the node agent serves (it serves macvlan, ipvlan l2 and bridge)` });
  }
}

function iface(value: unknown, key: string): Result<string, InputError> {
  if (typeof value !== 'string')
    return err(inputError(key, JSON.stringify(value) ?? '', `is ${jsonKind(value)}, expected an interface name`, `write the node's interface name, ${IFNAME_RULE}, e.g. "eth1"`));
  const why = checkInterfaceName(value);
  if (why !== undefined) return err(inputError(key, value, why, `write the node's interface name, ${IFNAME_RULE}, e.g. "eth1"`));
  return ok(value);
}
