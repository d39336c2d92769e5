/** The pod's named containerPorts as the webhook hands them to the sidecar: round trip, refusals, and any input. */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { formatContainerPorts, namedContainerPorts, parseContainerPorts } from '../../../src/policy/container-ports.js';

const KEY = 'POD_CONTAINER_PORTS';

void describe('pod container ports', () => {
  void test('the named ports of every container round-trip; unnamed ones are left out', () => {
    const spec = { initContainers: [{ ports: [{ name: 'metrics', containerPort: 9000 }] }], containers: [{ ports: [{ containerPort: 80 }, { name: 'dns', containerPort: 53, protocol: 'UDP' }] }] };
    const ports = namedContainerPorts(spec);
    assert.deepEqual(ports, [
      { name: 'metrics', containerPort: 9000, protocol: 'TCP' },
      { name: 'dns', containerPort: 53, protocol: 'UDP' },
    ]);
    const back = parseContainerPorts(formatContainerPorts(ports), KEY);
    assert.ok(back.ok);
    assert.deepEqual(back.value, ports);
  });

  void test('bad values are refused naming the variable, the value and the fix', () => {
    for (const [text, problem] of [
      ['{', 'is not JSON'],
      ['{}', 'is not a JSON list'],
      ['[{"name":"Http","containerPort":80}]', "entry 0's name"],
      ['[{"name":"http","containerPort":0}]', "entry 0's containerPort"],
      ['[{"name":"http","containerPort":80,"protocol":"ICMP"}]', "entry 0's protocol"],
    ] as const) {
      const r = parseContainerPorts(text, KEY);
      assert.equal(r.ok, false, text);
      if (r.ok) continue;
      assert.match(r.error, new RegExp(KEY));
      assert.ok(r.error.includes(problem), `${text}: ${r.error}`);
      assert.match(r.error, /webhook/);
    }
  });

  void test('any text: a result, never a throw', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.json()), (text) => {
        const r = parseContainerPorts(text, KEY);
        assert.equal(typeof r.ok, 'boolean');
      }),
      { numRuns: 500 },
    );
  });
});
