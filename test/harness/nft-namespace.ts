/**
 * One network namespace for a describe block that loads nftables text with the real `nft`:
 * created before its tests, removed after. `load` fails the test with nft's message and the text.
 */
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createTopology, type Pod, type Topology } from './netns.js';

export interface NftNamespace {
  readonly topo: () => Topology;
  readonly pod: () => Pod;
  readonly load: (text: string) => Promise<void>;
  /** `nft list table inet <table>`. */
  readonly listing: () => Promise<string>;
}

export function useNftNamespace(table: string): NftNamespace {
  let topo: Topology | undefined;
  let pod: Pod | undefined;
  before(async () => {
    topo = await createTopology();
    pod = await topo.addPod('nft');
  });
  after(async () => topo?.teardown());
  const need = <T>(x: T | undefined): T => {
    assert.ok(x !== undefined, 'the namespace is made in before()');
    return x;
  };
  const ns: NftNamespace = {
    topo: () => need(topo),
    pod: () => need(pod),
    load: async (text) => {
      const r = await ns.topo().run(ns.pod(), ['nft', '-f', '-'], { input: text, allowFail: true });
      assert.equal(r.code, 0, `nft -f failed: ${r.stderr}\n${text}`);
    },
    listing: async () => (await ns.topo().run(ns.pod(), ['nft', 'list', 'table', 'inet', table])).stdout,
  };
  return ns;
}
