/**
 * Realistic admission input: a Deployment-made pod with three containers, probes, volumes and the
 * managedFields the apiserver adds (which dominate the size of real pods), asking for the sidecar.
 * Sizes are reached by adding environment variables, as big ConfigMap-driven pods do.
 */
import { NETWORKS_ANNOTATION, SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import type { V1Pod } from '../../src/kube/types.js';

type Json = Record<string, unknown>;

function container(name: string, image: string, port: number, envCount: number, envValueBytes: number): Json {
  return {
    name,
    image,
    imagePullPolicy: 'IfNotPresent',
    command: ['/usr/local/bin/entrypoint', '--config=/etc/app/config.yaml'],
    args: ['--log-format=json', `--listen=:${port}`, '--metrics-listen=:9102'],
    ports: [
      { name: 'http', containerPort: port, protocol: 'TCP' },
      { name: 'metrics', containerPort: 9102, protocol: 'TCP' },
    ],
    env: [
      { name: 'POD_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } },
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } } },
      { name: 'POD_IP', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.podIP' } } },
      ...Array.from({ length: envCount }, (_, i) => ({ name: `${name.toUpperCase().replace(/-/g, '_')}_SETTING_${i}`, value: 'v'.repeat(envValueBytes) })),
    ],
    resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '1', memory: '512Mi' } },
    volumeMounts: [
      { name: 'config', mountPath: '/etc/app', readOnly: true },
      { name: 'data', mountPath: '/var/lib/app' },
      { name: 'kube-api-access-x7k2p', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true },
    ],
    livenessProbe: { httpGet: { path: '/healthz', port, scheme: 'HTTP' }, initialDelaySeconds: 10, periodSeconds: 10, timeoutSeconds: 1, successThreshold: 1, failureThreshold: 3 },
    readinessProbe: { httpGet: { path: '/readyz', port, scheme: 'HTTP' }, periodSeconds: 5, timeoutSeconds: 1, successThreshold: 1, failureThreshold: 3 },
    securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: { drop: ['ALL'] } },
    terminationMessagePath: '/dev/termination-log',
    terminationMessagePolicy: 'File',
  };
}

/** The fieldsV1 tree the apiserver records for a container: one `f:` key per field set. */
function containerFields(c: Json): Json {
  const fields = (v: unknown): unknown => {
    if (Array.isArray(v)) return { '.': {} };
    if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v as Json).map(([k, x]) => [`f:${k}`, fields(x)]));
    return {};
  };
  const out = fields(c) as Json;
  const env = c['env'] as { name: string }[];
  out['f:env'] = { '.': {}, ...Object.fromEntries(env.map((e) => [`k:{"name":"${e.name}"}`, { '.': {}, 'f:name': {}, 'f:value': {} }])) };
  return out;
}

export interface PodSpecOptions {
  readonly name?: string;
  readonly namespace?: string;
  /** Environment variables per container beyond the three downward-API ones. */
  readonly envPerContainer?: number;
  readonly envValueBytes?: number;
}

export function realisticPod(o: PodSpecOptions = {}): V1Pod {
  const envCount = o.envPerContainer ?? 12;
  const valueBytes = o.envValueBytes ?? 24;
  const containers = [
    container('app', 'registry.example/shop/app:1.42.0', 8080, envCount, valueBytes),
    container('log-shipper', 'registry.example/infra/fluent-bit:3.1.4', 2020, envCount, valueBytes),
    container('metrics-proxy', 'registry.example/infra/metrics-proxy:0.9.1', 9090, envCount, valueBytes),
  ];
  const name = o.name ?? 'shop-7d9f8b6c5-x2x9q';
  const namespace = o.namespace ?? 'shop';
  const labels = { app: 'shop', 'pod-template-hash': '7d9f8b6c5', 'app.kubernetes.io/name': 'shop', 'app.kubernetes.io/version': '1.42.0' };
  const annotations = {
    [NETWORKS_ANNOTATION]: 'shop/storage-net',
    [SERVICE_NETWORK_ANNOTATION]: 'storage-net',
    'kubectl.kubernetes.io/restartedAt': '2026-11-20T08:00:00Z',
    'prometheus.io/scrape': 'true',
    'prometheus.io/port': '9102',
  };
  const spec = {
    containers,
    volumes: [
      { name: 'config', configMap: { name: 'shop-config', defaultMode: 420 } },
      { name: 'data', emptyDir: {} },
      {
        name: 'kube-api-access-x7k2p',
        projected: {
          defaultMode: 420,
          sources: [
            { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
            { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
            { downwardAPI: { items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }] } },
          ],
        },
      },
    ],
    restartPolicy: 'Always',
    terminationGracePeriodSeconds: 30,
    dnsPolicy: 'ClusterFirst',
    serviceAccountName: 'shop',
    serviceAccount: 'shop',
    securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000 },
    schedulerName: 'default-scheduler',
    tolerations: [
      { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
      { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
    ],
    priority: 0,
    enableServiceLinks: true,
    preemptionPolicy: 'PreemptLowerPriority',
  };
  const managedFields = [
    {
      manager: 'kube-controller-manager',
      operation: 'Update',
      apiVersion: 'v1',
      time: '2026-11-20T08:00:01Z',
      fieldsType: 'FieldsV1',
      fieldsV1: {
        'f:metadata': {
          'f:annotations': Object.fromEntries(Object.keys(annotations).map((k) => [`f:${k}`, {}])),
          'f:generateName': {},
          'f:labels': Object.fromEntries(Object.keys(labels).map((k) => [`f:${k}`, {}])),
          'f:ownerReferences': { '.': {}, 'k:{"uid":"5b0c2a4e-7c1d-4d2b-9a53-3f1c9c7b1e11"}': {} },
        },
        'f:spec': {
          'f:containers': Object.fromEntries(containers.map((c) => [`k:{"name":"${String(c['name'])}"}`, containerFields(c)])),
          'f:dnsPolicy': {},
          'f:enableServiceLinks': {},
          'f:restartPolicy': {},
          'f:schedulerName': {},
          'f:securityContext': { '.': {}, 'f:fsGroup': {}, 'f:runAsGroup': {}, 'f:runAsUser': {} },
          'f:serviceAccount': {},
          'f:serviceAccountName': {},
          'f:terminationGracePeriodSeconds': {},
          'f:volumes': {
            '.': {},
            'k:{"name":"config"}': { '.': {}, 'f:configMap': { '.': {}, 'f:defaultMode': {}, 'f:name': {} }, 'f:name': {} },
            'k:{"name":"data"}': { '.': {}, 'f:emptyDir': {}, 'f:name': {} },
          },
        },
      },
    },
  ];
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      generateName: 'shop-7d9f8b6c5-',
      namespace,
      labels,
      annotations,
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'shop-7d9f8b6c5', uid: '5b0c2a4e-7c1d-4d2b-9a53-3f1c9c7b1e11', controller: true, blockOwnerDeletion: true }],
      managedFields,
    },
    spec,
  } as unknown as V1Pod;
}

/** A pod of about `bytes` bytes of JSON (grown by environment variables; within a few percent). */
export function podOfSize(bytes: number, o: Omit<PodSpecOptions, 'envPerContainer'> = {}): V1Pod {
  const base = JSON.stringify(realisticPod({ ...o, envPerContainer: 0 })).length;
  const per = JSON.stringify(realisticPod({ ...o, envPerContainer: 10 })).length - base;
  const n = Math.max(0, Math.round(((bytes - base) / per) * 10));
  return realisticPod({ ...o, envPerContainer: n });
}

/** The AdmissionReview a kube-apiserver sends for a pod CREATE (v1). */
export function admissionReview(pod: V1Pod, uid = '8f3c1b7e-2a4d-4e8b-9c6f-1d2e3f4a5b6c'): Json {
  const ns = pod.metadata?.namespace ?? 'default';
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      requestKind: { group: '', version: 'v1', kind: 'Pod' },
      requestResource: { group: '', version: 'v1', resource: 'pods' },
      namespace: ns,
      operation: 'CREATE',
      userInfo: {
        username: 'system:serviceaccount:kube-system:replicaset-controller',
        uid: '0c8e5a8a-1c1e-4a0a-9b3e-2b6f1f0e0d11',
        groups: ['system:serviceaccounts', 'system:serviceaccounts:kube-system', 'system:authenticated'],
      },
      object: pod,
      oldObject: null,
      dryRun: false,
      options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions' },
    },
  };
}
