/**
 * Every parser of a whole tenant object, beside the annotation parsers of
 * test/unit/annotations/linear-time.test.ts: time linear in the input (an input eight times larger
 * against a smaller one, both measured here: test/harness/property.ts assertLinear), and no input
 * makes it throw. The parsers, by where the object enters:
 *   NAD config's IPAM              src/annotations/nad-ipam.ts parseNadIpam (controller, node agent)
 *   NAD sharing annotation         src/annotations/nad-sharing.ts nadSharedWith (webhook, every consumer)
 *   pod's annotations file         src/annotations/downward-api.ts parseDownwardMap (sidecar)
 *   pod's served networks          src/annotations/served-networks.ts servedNetworks (sidecar, webhook)
 *   Service's load balancer        src/annotations/load-balancer.ts readLoadBalancer (sidecar, node agent)
 *   Service's external IPs         src/external-ips.ts externalIPsVerdict (webhook)
 *   Service at admission           cmd/webhook/service.ts validateService
 *   AdmissionReview envelope       cmd/webhook/server.ts decodeReview (after the body's JSON.parse)
 *   Service in the controller      cmd/controller/service-spec.ts readServiceSpec, cmd/controller/slim.ts slimService
 *   Service, slice in the sidecar  cmd/sidecar/slim.ts slimService, slimEndpointSlice
 *   Service, NAD in the node agent cmd/node-agent/slim.ts slimNodeService, slimNad
 *   names                          src/annotations/names.ts checkDns1123Subdomain, checkLabelKey
 * Objects are generated with the apiserver's types (it checks those) and any content.
 */
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { parseNadIpam } from '../../src/annotations/nad-ipam.js';
import { nadSharedWith } from '../../src/annotations/nad-sharing.js';
import { parseDownwardMap } from '../../src/annotations/downward-api.js';
import { servedNetworks } from '../../src/annotations/served-networks.js';
import { readLoadBalancer } from '../../src/annotations/load-balancer.js';
import { checkDns1123Subdomain, checkLabelKey } from '../../src/annotations/names.js';
import { externalIPsVerdict, parseExternalIPPolicy, type ExternalIPPolicy } from '../../src/external-ips.js';
import { NETWORKS_ANNOTATION, SERVICE_NAMESPACES_ANNOTATION, SERVICE_NETWORK_ANNOTATION, SERVICE_SELECTOR_ANNOTATION } from '../../src/keys.js';
import type { V1EndpointSlice, V1Service } from '../../src/kube/types.js';
import { validateService } from '../../cmd/webhook/service.js';
import { decodeReview } from '../../cmd/webhook/server.js';
import { readServiceSpec } from '../../cmd/controller/service-spec.js';
import { slimService as controllerSlimService } from '../../cmd/controller/slim.js';
import { slimEndpointSlice, slimService as sidecarSlimService } from '../../cmd/sidecar/slim.js';
import { slimNad, slimNodeService } from '../../cmd/node-agent/slim.js';
import { assertLinear } from '../harness/property.js';
import { FEW_RUNS } from './annotations/arbitraries.js';

const policy = ((): ExternalIPPolicy => {
  const p = parseExternalIPPolicy(['10.0.0.0/8', '2001:db8::/64'], 'test');
  if (!p.ok) throw new Error(p.error);
  return p.value;
})();

const ip = (i: number): string => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
const many = <T>(n: number, f: (i: number) => T): T[] => Array.from({ length: n }, (_, i) => f(i));

/** A Service with n of everything a tenant can multiply: ports, annotations' lists, labels, source ranges, external IPs. */
function bigService(n: number): V1Service {
  return {
    metadata: {
      name: 'svc',
      namespace: 'ns',
      labels: { 'service.kubernetes.io/service-proxy-name': 'multus-proxy', ...Object.fromEntries(many(n, (i) => [`l${i}`, `v${i}`])) },
      annotations: {
        [SERVICE_NETWORK_ANNOTATION]: many(n, (i) => `net${i}`).join(','),
        [SERVICE_SELECTOR_ANNOTATION]: `app in (${many(n, (i) => `v${i}`).join(',')})`,
      },
    },
    spec: {
      type: 'LoadBalancer',
      clusterIP: '10.96.0.10',
      ports: many(n, (i) => ({ name: `p${i}`, port: 1 + i, protocol: 'TCP', targetPort: 8000 + i })),
      loadBalancerSourceRanges: many(n, (i) => `${ip(i)}/32`),
      externalIPs: many(n, (i) => ip(i + 1)),
    },
    status: { loadBalancer: { ingress: many(n, (i) => ({ ip: ip(i + 7) })) } },
  };
}

function bigSlice(n: number): V1EndpointSlice {
  return {
    addressType: 'IPv4',
    metadata: { name: 's', namespace: 'ns', labels: { 'kubernetes.io/service-name': 'svc' } },
    ports: many(Math.min(n, 100), (i) => ({ name: `p${i}`, port: 8000 + i, protocol: 'TCP' })),
    endpoints: many(n, (i) => ({ addresses: [ip(i)], conditions: { ready: true, serving: true, terminating: false } })),
  };
}

const review = (n: number): string =>
  JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: { uid: 'u', operation: 'CREATE', namespace: 'ns', object: { metadata: { name: 'p', annotations: Object.fromEntries(many(n, (i) => [`k${i}`, `v${i}`])) } } },
  });

const ipamConfig = (n: number): unknown => ({
  cniVersion: '0.4.0',
  type: 'macvlan',
  master: 'eth1',
  ipam: { type: 'whereabouts', ipRanges: many(n, (i) => ({ range: `10.${i & 255}.0.0/24`, exclude: [`10.${i & 255}.0.1/32`] })) },
});

void describe('parsers of whole tenant objects are linear in their input', () => {
  void test('Services: admission, controller, sidecar, node agent, load balancer, external IPs', () => {
    assertLinear('validateService', bigService, (s) => validateService(s, 'ns'), 40);
    assertLinear('readServiceSpec', bigService, readServiceSpec, 40);
    assertLinear('controller slimService', bigService, controllerSlimService, 40);
    assertLinear('sidecar slimService', bigService, sidecarSlimService, 40);
    assertLinear('node agent slimNodeService', bigService, slimNodeService, 40);
    assertLinear('readLoadBalancer', bigService, (s) => readLoadBalancer(s), 40);
    assertLinear('externalIPsVerdict', bigService, (s) => externalIPsVerdict(s, undefined, policy, 'svc'), 40);
  });

  void test('EndpointSlices in the sidecar', () => {
    assertLinear('slimEndpointSlice', bigSlice, slimEndpointSlice, 100);
  });

  void test('AdmissionReview: the body parsed and its envelope checked', () => {
    assertLinear('decodeReview', review, (b) => decodeReview(JSON.parse(b)), 200);
  });

  void test('NADs: IPAM ranges (up to the bound the parser keeps), sharing lists, the node agent slim', () => {
    assertLinear('parseNadIpam', ipamConfig, parseNadIpam, 8);
    assertLinear(
      'nadSharedWith',
      (n) => ({ [SERVICE_NAMESPACES_ANNOTATION]: many(n, (i) => `ns${i}`).join(',') }),
      (a) => nadSharedWith({ namespace: 'other', name: 'net' }, 'mine', a, true),
      500,
    );
    assertLinear(
      'node agent slimNad',
      (n) => ({ apiVersion: 'k8s.cni.cncf.io/v1', kind: 'NetworkAttachmentDefinition', metadata: { name: 'n', namespace: 'ns' }, spec: { config: JSON.stringify(ipamConfig(n)) } }),
      slimNad,
      8,
    );
  });

  void test("a pod's annotations file and its served networks", () => {
    assertLinear('parseDownwardMap', (n) => many(n, (i) => `k${i}="v\\t${i}\\u00e9"`).join('\n'), parseDownwardMap, 300);
    assertLinear(
      'servedNetworks (service-network)',
      (n) => ({ [SERVICE_NETWORK_ANNOTATION]: many(n, (i) => `net${i}`).join(',') }),
      (a) => servedNetworks(a, 'ns'),
      300,
    );
    assertLinear(
      'servedNetworks (networks)',
      (n) => ({ [NETWORKS_ANNOTATION]: many(n, (i) => `net${i}@if${i}`).join(',') }),
      (a) => servedNetworks(a, 'ns'),
      300,
    );
  });

  void test('names, however long', () => {
    assertLinear('checkDns1123Subdomain', (n) => 'a.'.repeat(n), checkDns1123Subdomain, 2_000);
    assertLinear('checkLabelKey', (n) => `${'a.'.repeat(n)}/${'b'.repeat(n)}`, checkLabelKey, 2_000);
  });
});

/** Any string content, now and then one of the keys the parsers read. */
const text = fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.constantFrom('', '*', 'ns/net', '10.0.0.1', '10.0.0.0/8', '::1', 'a,b,,c', ' , '));
const annotations = fc.dictionary(fc.oneof(fc.string(), fc.constantFrom(SERVICE_NETWORK_ANNOTATION, SERVICE_SELECTOR_ANNOTATION, NETWORKS_ANNOTATION, SERVICE_NAMESPACES_ANNOTATION)), text);
const port = fc.record(
  { name: text, port: fc.integer({ min: -1, max: 70000 }), protocol: fc.oneof(text, fc.constantFrom('TCP', 'UDP', 'SCTP')), targetPort: fc.oneof(fc.integer(), text), nodePort: fc.integer() },
  { requiredKeys: [] },
);
const service: fc.Arbitrary<V1Service> = fc.record(
  {
    metadata: fc.record(
      { name: text, namespace: text, labels: annotations, annotations, deletionTimestamp: fc.constantFrom(undefined, '2026-11-29T00:00:00Z') as fc.Arbitrary<never> },
      { requiredKeys: [] },
    ),
    spec: fc.record(
      {
        type: fc.oneof(text, fc.constantFrom('ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName')),
        clusterIP: fc.oneof(text, fc.constant('None')),
        clusterIPs: fc.array(text),
        selector: fc.dictionary(fc.string(), fc.string()),
        ports: fc.array(port, { maxLength: 5 }),
        loadBalancerSourceRanges: fc.array(text),
        externalIPs: fc.array(text),
        sessionAffinity: text,
        externalTrafficPolicy: text,
        internalTrafficPolicy: text,
      },
      { requiredKeys: [] },
    ),
    status: fc.record({ loadBalancer: fc.record({ ingress: fc.array(fc.record({ ip: text, hostname: text }, { requiredKeys: [] })) }, { requiredKeys: [] }) }, { requiredKeys: [] }),
  },
  { requiredKeys: [] },
) as fc.Arbitrary<V1Service>;

void describe('parsers of whole tenant objects never throw', () => {
  void test('on any Service', () => {
    fc.assert(
      fc.property(service, fc.option(service, { nil: undefined }), (s, old) => {
        validateService(s, 'ns', old);
        readServiceSpec(s);
        controllerSlimService(s);
        sidecarSlimService(s);
        slimNodeService(s);
        readLoadBalancer(s);
        externalIPsVerdict(s, old, policy, 'svc');
      }),
      FEW_RUNS,
    );
  });

  void test('on any body, config, annotations file or annotations', () => {
    fc.assert(
      fc.property(fc.anything(), fc.jsonValue(), text, annotations, (any, json, s, a) => {
        decodeReview(any);
        decodeReview(json);
        parseNadIpam(any);
        parseNadIpam(json);
        parseNadIpam(s);
        parseDownwardMap(s);
        nadSharedWith({ namespace: 'other', name: 'net' }, 'mine', a, true);
        servedNetworks(a, 'ns');
        checkDns1123Subdomain(s);
        checkLabelKey(s);
      }),
      FEW_RUNS,
    );
  });

  void test('on any NAD config text in the node agent', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          text,
          fc.jsonValue().map((v) => JSON.stringify(v)),
        ),
        (config) => {
          slimNad({ apiVersion: 'k8s.cni.cncf.io/v1', kind: 'NetworkAttachmentDefinition', metadata: { name: 'n', namespace: 'ns' }, spec: { config } });
        },
      ),
      FEW_RUNS,
    );
  });
});
