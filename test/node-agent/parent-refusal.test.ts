/**
 * The node agent never hangs an interface of its own off the node's own networking: a
 * NAD's `master` is its owner's choice, so a parent that holds the node's InternalIP or carries
 * the default route is refused, with the reason, and an interface of ours already there is
 * removed. Real links in a network namespace the test creates (a bridge holding the "InternalIP",
 * a veth carrying the default route, and the secondary network's eth1); no traffic is sent.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createTopology, type Node, type Topology } from '../harness/netns.js';
import { createHostInterfaces } from '../../cmd/node-agent/dataplane.js';
import { hostInterfaceFor, type HostInterface } from '../../cmd/node-agent/host-interface.js';

const NET = { namespace: 'demo', name: 'macvlan1' };
const INTERNAL_IP = '10.244.0.1';

void describe('node agent: parents that carry the node itself are refused', () => {
  let topo: Topology;
  let node: Node;
  const want = (parent: string): HostInterface => hostInterfaceFor(NET, { servable: true, plugin: 'macvlan', parent, mode: 'bridge' }, [{ family: 4, address: '192.168.101.250', prefix: 24 }]);
  const links = async (): Promise<string> => (await topo.run(node, ['ip', '-br', 'link'])).stdout;

  before(async () => {
    topo = await createTopology();
    node = await topo.addNode('n1');
    await topo.run(node, ['ip', '-batch', '-'], {
      input:
        [
          'link add cni0 type bridge',
          `addr add ${INTERNAL_IP}/24 dev cni0`,
          'link set cni0 up',
          'link add uplink type veth peer name uppeer',
          'link set uplink up',
          'link set uppeer up',
          'addr add 10.250.0.11/24 dev uplink',
          'route add default via 10.250.0.1 dev uplink',
        ].join('\n') + '\n',
    });
  });
  after(async () => {
    await topo?.teardown();
  });

  void test('the bridge holding the InternalIP and the default-route link are refused with the reason; eth1 is served; a served network whose master moves to the uplink loses its interface', async () => {
    const ifaces = createHostInterfaces({ netns: node.ns });
    const onBridge = await ifaces.sync([want('cni0')], [INTERNAL_IP]);
    assert.deepEqual(onBridge.created, []);
    assert.match(onBridge.refused.join('\n'), /network demo\/macvlan1 is not served on this node: its parent cni0 holds the node's InternalIP 10\.244\.0\.1/);

    const onUplink = await ifaces.sync([want('uplink')], [INTERNAL_IP]);
    assert.deepEqual(onUplink.created, []);
    assert.match(onUplink.refused.join('\n'), /its parent uplink carries the node's default route/);
    assert.doesNotMatch(await links(), /mpxh/);

    const good = await ifaces.sync([want('eth1')], [INTERNAL_IP]);
    assert.deepEqual(good.refused, []);
    assert.deepEqual(good.created, [want('eth1').name]);
    assert.match(await links(), new RegExp(`^${want('eth1').name}@eth1 `, 'm'));

    // The NAD's owner edits master to the uplink: ours goes, nothing new is made.
    const moved = await ifaces.sync([want('uplink')], [INTERNAL_IP]);
    assert.equal(moved.refused.length, 1);
    assert.deepEqual(moved.deleted, [want('eth1').name]);
    assert.doesNotMatch(await links(), /mpxh/);
    // The host's own links and addresses are as they were.
    const addrs = (await topo.run(node, ['ip', '-br', '-4', 'addr'])).stdout;
    assert.match(addrs, /^cni0 .*10\.244\.0\.1\/24/m);
    assert.match(addrs, /^uplink@uppeer .*10\.250\.0\.11\/24/m);
  });
});
