/**
 * Routes in a real network namespace when a route of ours is not one we would write: a route with
 * our protocol number and a network prefix (what an `interface` value carrying a newline once
 * injected through `ip -batch`). The sync must delete it as read and keep working, where
 * it used to read it back as `<net>/<len>` and fail every later sync on `<net>/<len>/32`.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createDataplane, type Dataplane } from '../../src/dataplane/index.js';
import { ROUTE_PROTO } from '../../src/dataplane/core/routes.js';
import { httpRequests } from '../harness/netns.js';
import { HTTP_PORT, WEB_V4, createEnv, endpoints, state, tally, webTarget, type Env } from './dataplane-env.js';

for (const rules of ['iptables', 'nftables'] as const)
  void describe(`sidecar routes (${rules}): a foreign route with our protocol number`, () => {
    let env: Env;
    let dp: Dataplane;
    before(async () => {
      env = await createEnv(2);
      dp = createDataplane({ netns: env.client.ns, backendKind: rules });
    });
    after(async () => {
      dp.close();
      await env.topo.teardown();
    });

    const ours = async (): Promise<string> => (await env.topo.run(env.client, ['ip', '-4', 'route', 'show', 'proto', String(ROUTE_PROTO)])).stdout;

    void test('a /24 route marked proto 241 is deleted by the next full sync, which succeeds, and traffic keeps its source', async () => {
      const desired = state(env, [webTarget(endpoints(env.backends, 4, HTTP_PORT))]);
      await dp.sync(desired, { full: true });
      await env.topo.run(env.client, ['ip', 'route', 'add', '203.0.113.0/24', 'dev', 'lo', 'proto', String(ROUTE_PROTO)]);
      assert.match(await ours(), /203\.0\.113\.0\/24/);

      const res = await dp.sync(desired, { full: true });
      assert.equal(res.full, true);
      const after = await ours();
      assert.doesNotMatch(after, /203\.0\.113/, after);
      assert.match(after, new RegExp(`^${WEB_V4.replace(/\./g, '\\.')} dev net1 .*src ${env.client.net1.ipv4.replace(/\./g, '\\.')}`, 'm'), after);

      // And the next one, incremental, too (it used to fail on "File exists" / "<net>/<len>/32").
      await dp.sync(desired, { full: false });
      const replies = await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 20);
      assert.equal(tally(replies).size, 2);
      assert.deepEqual(new Set(replies.map((r) => r.peer)), new Set([env.client.net1.ipv4]));
    });
  });
