/**
 * The kustomizations render, and what they render hangs together: names that must match across
 * objects (Secret, Service, webhook configurations, RBAC, image), the webhook policy the docs
 * promise, and pod security settings that the `restricted` namespace demands.
 * The real apiserver's verdict on the same objects is in apiserver.test.ts.
 */
import { test, describe, before } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { INSTALL_NAMESPACE, INJECT_ANNOTATION, INJECTION_LABEL, INJECTION_ENABLED, NETWORKS_ANNOTATION, SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import { DEFAULTS as CERT_DEFAULTS, parseCli } from '../../cmd/certs/cli.js';
import { parseOptions as parseControllerOptions } from '../../cmd/controller/options.js';
import { desiredSidecarRbac, SIDECAR_POD_ROLE, SIDECAR_ROLE } from '../../cmd/controller/sidecar-rbac.js';
import { CONTROLLER_NODE_FLAGS, DEPLOYMENT_MALLOC_ENV, NODE_MEMORY_FLAGS } from '../../src/memory-settings.js';
import { DEFAULT_SIDECAR_COMMAND, parseOptions as parseWebhookOptions, SIDECAR_IMAGE_FILE } from '../../cmd/webhook/options.js';
import { PATHS } from '../../cmd/webhook/server.js';
import { DEPLOY, KUSTOMIZATIONS, REPO, at, containerArgs, find, flag, id, ofKind, podSpec, render, type ContainerLike, type Rendered } from './kustomize.js';

const rendered = new Map<string, Rendered[]>();
function get(dir: string): Rendered[] {
  const r = rendered.get(dir);
  if (r === undefined) throw new Error(`${dir} was not rendered`);
  return r;
}

before(async () => {
  for (const dir of KUSTOMIZATIONS) rendered.set(dir, await render(dir));
});

interface Webhook {
  name: string;
  failurePolicy?: string;
  sideEffects?: string;
  timeoutSeconds?: number;
  admissionReviewVersions?: string[];
  reinvocationPolicy?: string;
  clientConfig?: { service?: { name?: string; namespace?: string; path?: string; port?: number }; caBundle?: string };
  rules?: { apiGroups?: string[]; resources?: string[]; operations?: string[] }[];
  namespaceSelector?: { matchLabels?: Record<string, string>; matchExpressions?: { key: string; operator: string; values?: string[] }[] };
  matchConditions?: { name: string; expression: string }[];
}

function webhooks(o: Rendered): Webhook[] {
  return (o['webhooks'] as Webhook[] | undefined) ?? [];
}

function containers(o: Rendered): ContainerLike[] {
  const spec = podSpec(o);
  return [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])];
}

const packageVersion = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;

void describe('every kustomization renders', () => {
  for (const dir of KUSTOMIZATIONS) {
    void test(`${dir}: objects are unique, namespaced ones are in ${INSTALL_NAMESPACE}`, () => {
      const objs = get(dir);
      assert.ok(objs.length >= 15, `${dir} rendered only ${objs.length} objects`);
      const ids = objs.map(id);
      assert.deepEqual(ids.filter((x, i) => ids.indexOf(x) !== i), [], 'duplicate objects');
      const clusterScoped = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration']);
      for (const o of objs) {
        // One label finds everything the install made (kubectl get -A -l ...).
        assert.equal(o.metadata?.labels?.['app.kubernetes.io/part-of'], 'multus-proxy', `${id(o)} part-of label`);
        if (clusterScoped.has(o.kind ?? '')) assert.equal(o.metadata?.namespace, undefined, `${id(o)} is cluster-scoped`);
        else assert.equal(o.metadata?.namespace, INSTALL_NAMESPACE, `${id(o)} namespace`);
      }
      assert.equal(find(objs, 'Namespace', INSTALL_NAMESPACE).metadata?.labels?.['pod-security.kubernetes.io/enforce'], 'restricted');
    });
  }

  void test('deploy/ builds exactly the cert-manager overlay (the default install)', () => {
    assert.deepEqual(get('deploy').map(id).sort(), get('deploy/overlays/cert-manager').map(id).sort());
    assert.deepEqual(get('deploy'), get('deploy/overlays/cert-manager'));
  });
});

void describe('webhook wiring', () => {
  for (const dir of KUSTOMIZATIONS) {
    void test(`${dir}: every webhook calls the webhook Service on a port and path it serves`, () => {
      const objs = get(dir);
      const svc = find(objs, 'Service', 'multus-proxy-webhook');
      const deploy = find(objs, 'Deployment', 'multus-proxy-webhook');
      const [container] = containers(deploy);
      assert.ok(container);
      const svcPorts = at(svc, 'spec', 'ports') as { port: number; targetPort: string | number }[];
      // The Service selects the webhook pods.
      const selector = at(svc, 'spec', 'selector') as Record<string, string>;
      const podLabels = at(deploy, 'spec', 'template', 'metadata', 'labels') as Record<string, string>;
      for (const [k, v] of Object.entries(selector)) assert.equal(podLabels[k], v, `Service selector ${k}=${v} does not select the webhook pods`);
      const hooks = [...ofKind(objs, 'MutatingWebhookConfiguration'), ...ofKind(objs, 'ValidatingWebhookConfiguration')].flatMap(webhooks);
      assert.equal(hooks.length, 5, 'pods and selected pods (mutating), services (mutating), services and multi-networkpolicies (validating)');
      for (const w of hooks) {
        const ref = w.clientConfig?.service;
        assert.equal(ref?.name, svc.metadata?.name, `${w.name} service name`);
        assert.equal(ref?.namespace, INSTALL_NAMESPACE, `${w.name} service namespace`);
        const port = svcPorts.find((p) => p.port === (ref?.port ?? 443));
        assert.ok(port, `${w.name}: the Service has no port ${ref?.port}`);
        const target = container.ports?.find((p) => p.name === port.targetPort || p.containerPort === port.targetPort);
        assert.ok(target, `${w.name}: Service targetPort ${port.targetPort} is not a port of the webhook container`);
        assert.match(ref?.path ?? '', /^\/[a-z-/]+$/, `${w.name} path`);
        assert.ok((Object.values(PATHS) as string[]).includes(ref?.path ?? ''), `${w.name}: the webhook serves no path ${ref?.path}`);
      }
    });
  }

  void test('pod injection: CREATE only, enabled namespaces except ours and kube-system, only pods that ask, Fail', () => {
    const mwc = find(get('deploy'), 'MutatingWebhookConfiguration', CERT_DEFAULTS.webhookConfiguration);
    const pods = webhooks(mwc).find((w) => w.rules?.some((r) => r.resources?.includes('pods')));
    assert.ok(pods, 'no pod webhook');
    assert.deepEqual(pods.rules?.[0]?.operations, ['CREATE']);
    assert.equal(pods.namespaceSelector?.matchLabels?.[INJECTION_LABEL], INJECTION_ENABLED);
    const notIn = pods.namespaceSelector?.matchExpressions?.find((e) => e.key === 'kubernetes.io/metadata.name');
    assert.equal(notIn?.operator, 'NotIn');
    assert.deepEqual([...(notIn?.values ?? [])].sort(), ['kube-system', INSTALL_NAMESPACE].sort());
    assert.equal(pods.sideEffects, 'None');
    assert.deepEqual(pods.admissionReviewVersions, ['v1']);
    assert.ok((pods.timeoutSeconds ?? 10) <= 5, 'timeoutSeconds');
    assert.equal(pods.reinvocationPolicy, 'IfNeeded');
    // Fail is only safe because the match condition keeps pods that did not ask away from the webhook.
    assert.equal(pods.failurePolicy, 'Fail');
    assert.ok(pods.matchConditions?.some((c) => c.expression.includes(`'${SERVICE_NETWORK_ANNOTATION}' in object.metadata.annotations`)));
    assert.ok(pods.matchConditions?.some((c) => c.expression.includes(`'${NETWORKS_ANNOTATION}' in object.metadata.annotations`)), 'namespace-wide: pods attaching a network');
    // Opted-out pods are sent: the webhook refuses the opt-out of a pod a MultiNetworkPolicy selects.
    assert.ok(!pods.matchConditions?.some((c) => c.expression.includes(INJECT_ANNOTATION)), 'opted-out pods are sent');
  });

  void test('selected pods: CREATE only, every other namespace except ours and kube-system, only pods that attach a network, Fail', () => {
    const mwc = find(get('deploy'), 'MutatingWebhookConfiguration', CERT_DEFAULTS.webhookConfiguration);
    const hooks = webhooks(mwc).filter((w) => w.rules?.some((r) => r.resources?.includes('pods')));
    assert.equal(hooks.length, 2, 'two pod webhooks: enabled namespaces, and the others');
    const selected = hooks[1];
    assert.ok(selected);
    assert.equal(selected.clientConfig?.service?.path, '/mutate-selected-pods');
    assert.deepEqual(selected.rules?.[0]?.operations, ['CREATE']);
    assert.equal(selected.namespaceSelector?.matchLabels, undefined);
    const exprs = selected.namespaceSelector?.matchExpressions ?? [];
    // The complement of the first one's label: no pod is sent to both.
    assert.deepEqual(
      exprs.find((e) => e.key === INJECTION_LABEL),
      { key: INJECTION_LABEL, operator: 'NotIn', values: [INJECTION_ENABLED] },
    );
    assert.deepEqual([...(exprs.find((e) => e.key === 'kubernetes.io/metadata.name')?.values ?? [])].sort(), ['kube-system', INSTALL_NAMESPACE].sort());
    assert.equal(selected.failurePolicy, 'Fail');
    assert.equal(selected.reinvocationPolicy, 'IfNeeded');
    assert.equal(selected.matchConditions?.length, 1);
    assert.ok(selected.matchConditions?.[0]?.expression.includes(`object.metadata.annotations['${NETWORKS_ANNOTATION}'] != ''`), 'only pods attaching a network');
    assert.ok(!selected.matchConditions?.[0]?.expression.includes(SERVICE_NETWORK_ANNOTATION), 'a service network alone is not a reason outside enabled namespaces');
  });

  void test('services: defaulting (mutating) and validation on CREATE and UPDATE, only Services that ask', () => {
    const objs = get('deploy');
    for (const kind of ['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration']) {
      const svc = webhooks(find(objs, kind, CERT_DEFAULTS.webhookConfiguration)).find((w) => w.rules?.some((r) => r.resources?.includes('services')));
      assert.ok(svc, `${kind}: no services webhook`);
      assert.deepEqual([...(svc.rules?.[0]?.operations ?? [])].sort(), ['CREATE', 'UPDATE'], kind);
      assert.equal(svc.sideEffects, 'None');
      assert.ok(svc.matchConditions?.some((c) => c.expression.includes(SERVICE_NETWORK_ANNOTATION)), `${kind}: match condition`);
      assert.equal(svc.failurePolicy, 'Fail');
    }
  });
});

void describe('certificates', () => {
  const tlsSecretOf = (objs: Rendered[]): string | undefined => {
    const spec = podSpec(find(objs, 'Deployment', 'multus-proxy-webhook'));
    const [container] = spec?.containers ?? [];
    const mount = container?.volumeMounts?.find((m) => m.mountPath.includes('tls'));
    return spec?.volumes?.find((v) => v.name === mount?.name)?.secret?.secretName;
  };

  void test('cert-manager: CA chain, serving certificate for the Service names into the mounted Secret, CA injected into both configurations', () => {
    const objs = get('deploy/overlays/cert-manager');
    const certs = ofKind(objs, 'Certificate');
    const issuers = ofKind(objs, 'Issuer');
    const serving = certs.find((c) => at(c, 'spec', 'isCA') !== true);
    const ca = certs.find((c) => at(c, 'spec', 'isCA') === true);
    assert.ok(serving && ca, 'a CA and a serving Certificate');
    assert.equal(at(serving, 'spec', 'secretName'), tlsSecretOf(objs), 'serving Certificate secretName = the webhook Deployment\'s TLS volume');
    assert.equal(tlsSecretOf(objs), CERT_DEFAULTS.servingSecret, 'the same Secret name as the certs CLI default, so both overlays agree');
    const svc = CERT_DEFAULTS.service;
    for (const dns of [svc, `${svc}.${INSTALL_NAMESPACE}`, `${svc}.${INSTALL_NAMESPACE}.svc`]) {
      assert.ok((at(serving, 'spec', 'dnsNames') as string[]).includes(dns), `dnsNames lacks ${dns}`);
    }
    // serving <- CA issuer (spec.ca.secretName = CA cert's Secret) <- CA cert <- self-signed issuer
    const caIssuer = issuers.find((i) => i.metadata?.name === at(serving, 'spec', 'issuerRef', 'name'));
    assert.equal(at(caIssuer, 'spec', 'ca', 'secretName'), at(ca, 'spec', 'secretName'));
    const root = issuers.find((i) => i.metadata?.name === at(ca, 'spec', 'issuerRef', 'name'));
    assert.deepEqual(at(root, 'spec', 'selfSigned'), {});
    for (const kind of ['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration']) {
      const inject = find(objs, kind, CERT_DEFAULTS.webhookConfiguration).metadata?.annotations?.['cert-manager.io/inject-ca-from'];
      assert.equal(inject, `${INSTALL_NAMESPACE}/${serving.metadata?.name}`, `${kind} inject-ca-from`);
    }
  });

  void test('bootstrap: the Job and the CronJob run the certs CLI on the Secret the webhook mounts and on both configurations', () => {
    const objs = get('deploy/overlays/bootstrap');
    assert.equal(ofKind(objs, 'Certificate').length, 0);
    for (const kind of ['Job', 'CronJob']) {
      const [c] = containers(find(objs, kind, 'multus-proxy-certs'));
      assert.ok(c, kind);
      assert.equal(c.args?.[0], 'bootstrap', `${kind} command`);
      assert.equal(flag(c, 'secret'), tlsSecretOf(objs), `${kind} --secret = the webhook's TLS volume`);
      assert.equal(flag(c, 'namespace'), INSTALL_NAMESPACE);
      assert.equal(flag(c, 'service'), find(objs, 'Service', 'multus-proxy-webhook').metadata?.name);
      assert.equal(flag(c, 'mutating'), find(objs, 'MutatingWebhookConfiguration', CERT_DEFAULTS.webhookConfiguration).metadata?.name);
      assert.equal(flag(c, 'validating'), find(objs, 'ValidatingWebhookConfiguration', CERT_DEFAULTS.webhookConfiguration).metadata?.name);
      // Its RBAC names exactly these objects.
      const role = find(objs, 'Role', 'multus-proxy-certs');
      const named = (at(role, 'rules') as { resourceNames?: string[] }[]).flatMap((r) => r.resourceNames ?? []);
      assert.deepEqual(named.sort(), [flag(c, 'secret'), flag(c, 'ca-secret')].sort());
    }
    for (const kind of ['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration']) {
      assert.equal(find(objs, kind, CERT_DEFAULTS.webhookConfiguration).metadata?.annotations?.['cert-manager.io/inject-ca-from'], undefined);
    }
  });
});

void describe('pods', () => {
  for (const dir of ['deploy/overlays/cert-manager', 'deploy/overlays/bootstrap']) {
    void test(`${dir}: every pod meets PodSecurity "restricted" and runs the one image at the package version`, () => {
      const objs = get(dir);
      const workloads = objs.filter((o) => podSpec(o) !== undefined);
      assert.ok(workloads.length >= 2);
      for (const w of workloads) {
        const spec = podSpec(w);
        assert.equal(at(spec, 'securityContext', 'runAsNonRoot'), true, `${id(w)} runAsNonRoot`);
        assert.equal(at(spec, 'securityContext', 'seccompProfile', 'type'), 'RuntimeDefault', `${id(w)} seccomp`);
        const sa = spec?.serviceAccountName ?? '';
        assert.ok(sa.startsWith('multus-proxy-'), `${id(w)} has its own ServiceAccount`);
        assert.ok(find(objs, 'ServiceAccount', sa), `${id(w)}'s ServiceAccount exists`);
        for (const c of containers(w)) {
          const what = `${id(w)} container ${c.name}`;
          assert.equal(c.image, `multus-proxy:${packageVersion}`, `${what} image`);
          assert.equal(at(c, 'securityContext', 'allowPrivilegeEscalation'), false, `${what} allowPrivilegeEscalation`);
          assert.equal(at(c, 'securityContext', 'readOnlyRootFilesystem'), true, `${what} readOnlyRootFilesystem`);
          assert.deepEqual(at(c, 'securityContext', 'capabilities', 'drop'), ['ALL'], `${what} drops ALL`);
          assert.ok(at(c, 'resources', 'requests'), `${what} resource requests`);
          assert.match(c.command?.at(-1) ?? '', /^\/app\/dist\/[a-z-]+\.js$/, `${what} runs a bundle`);
        }
      }
    });
  }

  // The controller without the young-generation cap (its cold-start list); the webhook with the node
  // agent's flags (plain, it grew under admissions). Both with the malloc settings.
  for (const [name, program, flags] of [
    ['multus-proxy-controller', 'controller', CONTROLLER_NODE_FLAGS],
    ['multus-proxy-webhook', 'webhook', NODE_MEMORY_FLAGS],
  ] as const) {
    void test(`${program}: node runs it with its memory flags (${flags.join(' ')}) and the malloc settings of src/memory-settings.ts`, () => {
      for (const dir of ['deploy/overlays/cert-manager', 'deploy/overlays/bootstrap']) {
        const [c] = containers(find(get(dir), 'Deployment', name));
        assert.deepEqual(c?.command, ['node', ...flags, `/app/dist/${program}.js`], `${dir}: ${program} command`);
        const env = new Map(((c?.['env'] ?? []) as { name: string; value?: string }[]).map((e) => [e.name, e.value]));
        for (const [k, v] of Object.entries(DEPLOYMENT_MALLOC_ENV)) assert.equal(env.get(k), v, `${dir}: ${program} env ${k}`);
      }
    });
  }

  void test('controller and webhook: 2 replicas, spread across nodes, probes on their own ports', () => {
    const objs = get('deploy');
    for (const name of ['multus-proxy-controller', 'multus-proxy-webhook']) {
      const d = find(objs, 'Deployment', name);
      assert.equal(at(d, 'spec', 'replicas'), 2, name);
      const term = at(d, 'spec', 'template', 'spec', 'affinity', 'podAntiAffinity', 'preferredDuringSchedulingIgnoredDuringExecution', 0, 'podAffinityTerm') as {
        topologyKey: string;
        labelSelector: { matchLabels: Record<string, string> };
      };
      assert.equal(term.topologyKey, 'kubernetes.io/hostname');
      assert.deepEqual(term.labelSelector.matchLabels, at(d, 'spec', 'selector', 'matchLabels'), `${name}: anti-affinity selects its own pods`);
      const [c] = containers(d);
      assert.ok(c);
      for (const probe of ['livenessProbe', 'readinessProbe']) {
        const port = at(c, probe, 'httpGet', 'port');
        assert.ok(c.ports?.some((p) => p.name === port), `${name} ${probe} port ${String(port)} is a named container port`);
      }
    }
    const pdb = find(objs, 'PodDisruptionBudget', 'multus-proxy-webhook');
    assert.equal(at(pdb, 'spec', 'minAvailable'), 1);
    assert.deepEqual(at(pdb, 'spec', 'selector', 'matchLabels'), at(find(objs, 'Deployment', 'multus-proxy-webhook'), 'spec', 'selector', 'matchLabels'));
  });
});

void describe('the programs accept what the manifests give them (their own option parsers)', () => {
  void test('controller: flags parse; health port, lease name and namespace match the Deployment and the Role', () => {
    const objs = get('deploy');
    const [c] = containers(find(objs, 'Deployment', 'multus-proxy-controller'));
    assert.ok(c);
    const { args: argv, env } = containerArgs(c, { name: 'multus-proxy-controller-0', namespace: INSTALL_NAMESPACE });
    const parsed = parseControllerOptions(argv, env);
    assert.ok(parsed.ok, parsed.ok ? '' : parsed.error);
    const opts = parsed.value;
    assert.ok(opts !== 'help');
    assert.equal(opts.leaderElect, true);
    assert.equal(opts.leaseNamespace, INSTALL_NAMESPACE);
    assert.equal(opts.identity, 'multus-proxy-controller-0', 'identity = pod name, so the Lease shows which pod leads');
    assert.equal(c.ports?.find((p) => p.name === 'health')?.containerPort, opts.healthPort);
    const role = find(objs, 'Role', 'multus-proxy-controller-leader-election');
    const leaseRules = (at(role, 'rules') as { resources: string[]; resourceNames?: string[] }[]).filter((r) => r.resources.includes('leases'));
    assert.deepEqual(leaseRules.flatMap((r) => r.resourceNames ?? []), [opts.leaseName]);
    assert.equal(role.metadata?.namespace, opts.leaseNamespace);
    assert.equal(opts.manageSidecarRbac, true);
  });

  void test('webhook: config file, sidecarImage file and flags parse; port and TLS files match the Deployment', () => {
    for (const dir of ['deploy/overlays/cert-manager', 'deploy/overlays/bootstrap']) {
      const objs = get(dir);
      const deploy = find(objs, 'Deployment', 'multus-proxy-webhook');
      const [c] = containers(deploy);
      assert.ok(c);
      const spec = podSpec(deploy);
      // The mounted volumes, as files: ConfigMap keys become files in the mount folder.
      const files = new Map<string, string>();
      for (const m of c.volumeMounts ?? []) {
        const cmName = spec?.volumes?.find((v) => v.name === m.name)?.configMap?.name;
        if (cmName === undefined) continue;
        for (const [k, v] of Object.entries((at(find(objs, 'ConfigMap', cmName), 'data') as Record<string, string>) ?? {})) files.set(`${m.mountPath}/${k}`, v);
      }
      const { args: argv, env } = containerArgs(c, { name: 'multus-proxy-webhook-0', namespace: INSTALL_NAMESPACE });
      const parsed = parseWebhookOptions(env, argv, (path) => files.get(path));
      assert.ok(parsed.ok, parsed.ok ? '' : parsed.error);
      const opts = parsed.value;
      assert.ok(files.has(`${flag(c, 'config')?.replace(/\/[^/]+$/, '')}/${SIDECAR_IMAGE_FILE}`), 'sidecarImage file next to the config file');
      assert.equal(opts.sidecar.image, c.image, `${dir}: the injected sidecar runs the webhook's own image`);
      assert.deepEqual(opts.sidecar.command, DEFAULT_SIDECAR_COMMAND, 'the ConfigMap gives the sidecar the same command as the webhook default');
      assert.equal(opts.sidecar.privileged, false);
      assert.equal(opts.sidecar.mode, 'auto');
      assert.equal(c.ports?.find((p) => p.name === 'https')?.containerPort, opts.port);
      const tlsMount = c.volumeMounts?.find((m) => spec?.volumes?.find((v) => v.name === m.name)?.secret !== undefined);
      assert.equal(opts.tlsCertFile, `${tlsMount?.mountPath}/tls.crt`);
      assert.equal(opts.tlsKeyFile, `${tlsMount?.mountPath}/tls.key`);
    }
  });

  void test('certs: the Job\'s command line parses to the Secrets and configurations the manifests name', () => {
    const objs = get('deploy/overlays/bootstrap');
    const [c] = containers(find(objs, 'Job', 'multus-proxy-certs'));
    assert.ok(c);
    const parsed = parseCli(c.args ?? []);
    assert.ok(parsed.ok, parsed.ok ? '' : parsed.error);
    const cmd = parsed.value;
    assert.equal(cmd.command, 'bootstrap');
    if (cmd.command !== 'bootstrap') return;
    assert.equal(cmd.intervalMs, 0, 'the Job runs once; the CronJob repeats it');
    assert.equal(cmd.rotation.service, find(objs, 'Service', 'multus-proxy-webhook').metadata?.name);
    assert.deepEqual(cmd.mutating, ofKind(objs, 'MutatingWebhookConfiguration').map((o) => o.metadata?.name));
    assert.deepEqual(cmd.validating, ofKind(objs, 'ValidatingWebhookConfiguration').map((o) => o.metadata?.name));
    const cr = find(objs, 'ClusterRole', 'multus-proxy-certs');
    assert.deepEqual((at(cr, 'rules', 0, 'resourceNames') as string[]).sort(), [...new Set([...cmd.mutating, ...cmd.validating])].sort());
  });

  void test('sidecar ClusterRoles are exactly what the controller wants, so it never has to write them', () => {
    const objs = get('deploy');
    const want = desiredSidecarRbac([]).clusterRoles;
    assert.deepEqual(want.map((r) => r.metadata?.name).sort(), [SIDECAR_ROLE, SIDECAR_POD_ROLE].sort());
    for (const w of want) {
      const have = find(objs, 'ClusterRole', w.metadata?.name ?? '');
      assert.deepEqual(at(have, 'rules'), w.rules, `${w.metadata?.name} rules`);
      for (const [k, v] of Object.entries(w.metadata?.labels ?? {})) assert.equal(have.metadata?.labels?.[k], v, `${w.metadata?.name} label ${k}`);
    }
    // The controller may bind exactly these roles, and touch only its own binding by name.
    const ctl = at(find(objs, 'ClusterRole', 'multus-proxy-controller'), 'rules') as { resources: string[]; verbs: string[]; resourceNames?: string[] }[];
    const bind = ctl.filter((r) => r.verbs.includes('bind'));
    assert.deepEqual(bind.flatMap((r) => r.resourceNames ?? []).sort(), [SIDECAR_ROLE, SIDECAR_POD_ROLE].sort());
    for (const r of ctl.filter((x) => x.resources.some((res) => res.endsWith('bindings') || res === 'clusterroles'))) {
      const unnamed = r.verbs.filter((v) => !['create', 'list'].includes(v));
      if (unnamed.length > 0) assert.ok((r.resourceNames ?? []).length > 0, `controller may ${unnamed.join('/')} ${r.resources.join(',')} of any name`);
    }
  });
});

void describe('image', () => {
  void test('`kustomize edit set image` in a user overlay changes every pod and the injected sidecar image', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'user-overlay-'));
    try {
      for (const base of ['overlays/cert-manager', 'overlays/bootstrap']) {
        writeFileSync(
          join(dir, 'kustomization.yaml'),
          `resources: [${relative(dir, join(DEPLOY, base))}]\nimages:\n  - name: multus-proxy\n    newName: registry.test/team/multus-proxy\n    newTag: "9.9"\n`,
        );
        const objs = await render(dir);
        const want = 'registry.test/team/multus-proxy:9.9';
        const images = objs.flatMap(containers).map((c) => c.image);
        assert.ok(images.length >= 2);
        assert.deepEqual([...new Set(images)], [want], `${base}: pod images`);
        const cm = find(objs, 'ConfigMap', 'multus-proxy-webhook');
        assert.equal(at(cm, 'data', 'sidecarImage'), want, `${base}: the webhook injects the same image`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  void test('a missing kustomize binary is an error that names scripts/setup.sh', async () => {
    const saved = process.env['MULTUS_PROXY_BIN_DIR'];
    const empty = mkdtempSync(join(tmpdir(), 'no-kustomize-'));
    process.env['MULTUS_PROXY_BIN_DIR'] = empty;
    try {
      await assert.rejects(render('deploy'), /kustomize not found .*scripts\/setup\.sh/);
    } finally {
      if (saved === undefined) delete process.env['MULTUS_PROXY_BIN_DIR'];
      else process.env['MULTUS_PROXY_BIN_DIR'] = saved;
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
