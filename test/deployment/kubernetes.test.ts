/**
 * deploy/kubernetes/, checked for what can be checked without a cluster: each kustomization
 * renders (test/helpers/kustomize.ts, itself held to kustomize's own output); every manifest
 * validates against the Kubernetes API's schemas (kubernetes-models' validators, generated from
 * the Kubernetes OpenAPI definitions) and carries no field the API does not know (TypeScript's
 * excess-property check against kubernetes-types); the environment the manifests set is one the proxy reads
 * and accepts; the probes ask real paths of the admin port; the Service and the NetworkPolicy keep
 * the admin port off the client network; and the grace period outlasts the proxy's own shutdown.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { ENV_VARIABLES, type EnvConfig, loadEnv, parseConfigText, shutdownPlan } from '../../src/config/load.js';
import { createAdminApp, type Phase } from '../../src/planes/admin/admin-app.js';
import { send } from '../helpers/http.js';
import { unknownFieldErrors } from '../helpers/kubernetes-fields.js';
import { type Manifest, renderKustomization } from '../helpers/kustomize.js';

/** The Kubernetes API's schema for each kind the manifests may use; any other kind fails. */
const SCHEMAS: Readonly<Record<string, (data: unknown) => void>> = {
  'v1/ServiceAccount': (data) => new ServiceAccount(data as ConstructorParameters<typeof ServiceAccount>[0]).validate(),
  'v1/ConfigMap': (data) => new ConfigMap(data as ConstructorParameters<typeof ConfigMap>[0]).validate(),
  'v1/Service': (data) => new Service(data as ConstructorParameters<typeof Service>[0]).validate(),
  'apps/v1/Deployment': (data) => new Deployment(data as ConstructorParameters<typeof Deployment>[0]).validate(),
  'policy/v1/PodDisruptionBudget': (data) =>
    new PodDisruptionBudget(data as ConstructorParameters<typeof PodDisruptionBudget>[0]).validate(),
  'autoscaling/v2/HorizontalPodAutoscaler': (data) =>
    new HorizontalPodAutoscaler(data as ConstructorParameters<typeof HorizontalPodAutoscaler>[0]).validate(),
  'networking.k8s.io/v1/NetworkPolicy': (data) =>
    new NetworkPolicy(data as ConstructorParameters<typeof NetworkPolicy>[0]).validate(),
};

function validateManifest(manifest: Manifest): void {
  const schema = SCHEMAS[`${manifest.apiVersion}/${manifest.kind}`];
  if (schema === undefined) throw new Error(`no schema for ${manifest.apiVersion} ${manifest.kind}`);
  schema(manifest);
}

interface Port {
  readonly name?: string;
  readonly containerPort: number;
}
interface EnvVar {
  readonly name: string;
  readonly value?: string;
  readonly valueFrom?: {
    readonly secretKeyRef?: { name: string; key: string };
    readonly configMapKeyRef?: { name: string; key: string };
  };
}
interface Probe {
  readonly httpGet?: { readonly path: string; readonly port: string | number };
}
interface Container {
  readonly name: string;
  readonly image: string;
  readonly ports: readonly Port[];
  readonly env?: readonly EnvVar[];
  readonly envFrom?: ReadonlyArray<{ readonly configMapRef?: { name: string } }>;
  readonly volumeMounts?: ReadonlyArray<{
    readonly name: string;
    readonly mountPath: string;
    readonly readOnly?: boolean;
    readonly subPath?: string;
  }>;
  readonly livenessProbe?: Probe;
  readonly readinessProbe?: Probe;
  readonly resources?: { readonly requests?: Record<string, string> };
}
interface PodTemplate {
  readonly metadata: { readonly labels: Record<string, string>; readonly annotations?: Record<string, string> };
  readonly spec: {
    readonly containers: readonly Container[];
    readonly volumes?: ReadonlyArray<{
      readonly name: string;
      readonly configMap?: { name: string };
      readonly secret?: { secretName: string; items?: ReadonlyArray<{ key: string; path: string }> };
    }>;
    readonly terminationGracePeriodSeconds?: number;
  };
}
interface NetworkPolicyRule {
  readonly from?: ReadonlyArray<Record<string, { matchLabels?: Record<string, string> }>>;
  readonly ports?: ReadonlyArray<{ readonly port: string | number }>;
}

/** One rendered kustomization, read the way the tests need it. */
class Rendered {
  constructor(readonly manifests: readonly Manifest[]) {}

  one(kind: string): Manifest {
    const found = this.manifests.filter((m) => m.kind === kind);
    expect(
      found.map((m) => m.metadata.name),
      kind,
    ).toHaveLength(1);
    return found[0] as Manifest;
  }

  get template(): PodTemplate {
    return (this.one('Deployment').spec as { template: PodTemplate }).template;
  }

  get proxy(): Container {
    const [container, ...others] = this.template.spec.containers;
    expect(others).toEqual([]);
    if (container === undefined) throw new Error('no container');
    return container;
  }

  configMap(name: string): Record<string, string> {
    const map = this.manifests.find((m) => m.kind === 'ConfigMap' && m.metadata.name === name);
    if (map === undefined) throw new Error(`no ConfigMap ${name}`);
    return map.data as Record<string, string>;
  }

  /** Every variable the container is given, by name: literal values, ConfigMap values, and Secret references. */
  environment(): { readonly values: Record<string, string>; readonly secrets: Record<string, string> } {
    const values: Record<string, string> = {};
    const secrets: Record<string, string> = {};
    for (const source of this.proxy.envFrom ?? [])
      Object.assign(values, this.configMap(source.configMapRef?.name ?? ''));
    for (const variable of this.proxy.env ?? []) {
      const secret = variable.valueFrom?.secretKeyRef;
      const mapped = variable.valueFrom?.configMapKeyRef;
      if (secret !== undefined) secrets[variable.name] = `${secret.name}/${secret.key}`;
      else if (mapped !== undefined) values[variable.name] = this.configMap(mapped.name)[mapped.key] ?? '';
      else values[variable.name] = variable.value ?? '';
    }
    return { values, secrets };
  }

  /** The environment as the proxy reads it, each Secret standing in with a plausible value. */
  env(): EnvConfig {
    const { values, secrets } = this.environment();
    const stand = Object.fromEntries(
      Object.keys(secrets).map((name) => [name, 'a-stand-in-for-a-secret-of-at-least-32-bytes']),
    );
    return loadEnv({ ...values, ...stand });
  }

  containerPort(port: string | number): number {
    if (typeof port === 'number') return port;
    const found = this.proxy.ports.find((p) => p.name === port);
    if (found === undefined) throw new Error(`no port named ${port}`);
    return found.containerPort;
  }
}

function byKindAndName(a: Manifest, b: Manifest): number {
  return `${a.kind}/${a.metadata.name}`.localeCompare(`${b.kind}/${b.metadata.name}`);
}

const KUSTOMIZATIONS = {
  base: 'deploy/kubernetes/base',
  'redis-cluster': 'deploy/kubernetes/overlays/redis-cluster',
} as const;
const rendered = Object.fromEntries(
  Object.entries(KUSTOMIZATIONS).map(([name, directory]) => [name, new Rendered(renderKustomization(directory))]),
) as Record<keyof typeof KUSTOMIZATIONS, Rendered>;
const each = Object.entries(rendered);

describe('the test renderer and the judges', () => {
  it('renders as kustomize does (a fixture rendered by kustomize v5.5.0)', () => {
    const expected = parseAllDocuments(readFileSync('test/fixtures/kustomize/expected.yaml', 'utf8')).map(
      (d) => d.toJS() as Manifest,
    );
    expect(renderKustomization('test/fixtures/kustomize/overlay').sort(byKindAndName)).toEqual(
      expected.sort(byKindAndName),
    );
  });

  it('finds a misspelt field at any depth, which the API schemas let through', () => {
    const deployment = structuredClone(rendered.base.one('Deployment')) as Manifest & {
      spec: { template: PodTemplate };
    };
    const [container] = deployment.spec.template.spec.containers;
    Object.assign(container ?? {}, { livenessProbes: container?.livenessProbe });
    expect(() => validateManifest(deployment)).not.toThrow();
    expect(unknownFieldErrors([deployment])).toMatch(/'"livenessProbes"' does not exist in type 'Container'/);
  });

  it('refuses what it does not implement, rather than render it wrong', () => {
    const directory = mkdtempSync(join(tmpdir(), 'slab-kustomize-'));
    writeFileSync(join(directory, 'kustomization.yaml'), 'resources: []\nnamePrefix: staging-\n');
    expect(() => renderKustomization(directory)).toThrow(/namePrefix/);
  });
});

describe.each(each)('Kubernetes manifests (%s)', (_name, k8s) => {
  it('are a ServiceAccount, three generated ConfigMaps, a Deployment, a Service, a PodDisruptionBudget, a HorizontalPodAutoscaler and a NetworkPolicy', () => {
    expect(k8s.manifests.map((m) => m.kind).sort()).toEqual(
      [
        'ConfigMap',
        'ConfigMap',
        'ConfigMap',
        'Deployment',
        'HorizontalPodAutoscaler',
        'NetworkPolicy',
        'PodDisruptionBudget',
        'Service',
        'ServiceAccount',
      ].sort(),
    );
  });

  it('each validate against the Kubernetes API schemas', () => {
    for (const manifest of k8s.manifests)
      expect(() => validateManifest(manifest), `${manifest.kind} ${manifest.metadata.name}`).not.toThrow();
    // The judge judges: a port that is not a number is refused.
    const broken = structuredClone(k8s.one('Deployment')) as Manifest & { spec: { template: PodTemplate } };
    (broken.spec.template.spec.containers[0]?.ports as Array<{ containerPort: unknown }>)[0] = {
      containerPort: 'eighty',
    };
    expect(() => validateManifest(broken)).toThrow(/containerPort/);
  });

  it('have no field the Kubernetes API does not know', () => {
    expect(unknownFieldErrors(k8s.manifests)).toBe('');
  });

  it('set only variables the proxy reads, with values its loader accepts', () => {
    const { values, secrets } = k8s.environment();
    for (const name of [...Object.keys(values), ...Object.keys(secrets)])
      expect(ENV_VARIABLES as readonly string[], name).toContain(name);
    const env = k8s.env();
    expect(env.upstreamUrl).toBeDefined();
    expect(env.keySource?.kind).toBe('secret');
    expect(env.adminToken).toBeDefined();
  });

  it('take the signing secret and the admin token from a Secret, and carry no secret themselves', () => {
    expect(k8s.environment().secrets).toEqual({
      JWT_SECRET: 'slab-ops-proxy-secrets/jwt-secret',
      ADMIN_TOKEN: 'slab-ops-proxy-secrets/admin-token',
    });
    expect(k8s.manifests.filter((m) => m.kind === 'Secret')).toEqual([]);
  });

  it('mount the change feed’s tokens from the Secret as a file the kubelet can swap, where INVALIDATE_TOKEN_FILE names it', () => {
    const file = k8s.env().invalidateTokenFile ?? '';
    const mount = k8s.proxy.volumeMounts?.find((m) => file.startsWith(`${m.mountPath}/`));
    // A subPath mount is never updated when its Secret changes: the rotation needs the whole volume.
    expect(mount).toMatchObject({ readOnly: true });
    expect(mount).not.toHaveProperty('subPath');
    const volume = k8s.template.spec.volumes?.find((v) => v.name === mount?.name);
    expect(volume?.secret).toEqual({
      secretName: 'slab-ops-proxy-secrets',
      items: [{ key: 'invalidate-tokens', path: file.slice((mount?.mountPath.length ?? 0) + 1) }],
    });
  });

  it('mount a config file the proxy accepts, made for as many replicas as the autoscaler may run', () => {
    const configFile = k8s.env().configFile;
    const mount = k8s.proxy.volumeMounts?.find((m) => configFile.startsWith(`${m.mountPath}/`));
    const volume = k8s.template.spec.volumes?.find((v) => v.name === mount?.name);
    const text = k8s.configMap(volume?.configMap?.name ?? '')[configFile.slice((mount?.mountPath.length ?? 0) + 1)];
    expect(text).toBeDefined();
    const config = parseConfigText(text ?? '', configFile);
    // Each replica's share while Redis is down is a 1/replicas part: never more than the limit in all.
    expect(config.rateLimit.replicas).toBe(
      (k8s.one('HorizontalPodAutoscaler').spec as { maxReplicas: number }).maxReplicas,
    );
  });

  it('probe real paths of the admin port, which Prometheus scrapes', async () => {
    const env = k8s.env();
    const { livenessProbe, readinessProbe } = k8s.proxy;
    expect(k8s.containerPort(livenessProbe?.httpGet?.port ?? '')).toBe(env.adminPort);
    expect(k8s.containerPort(readinessProbe?.httpGet?.port ?? '')).toBe(env.adminPort);
    expect(k8s.containerPort('http')).toBe(env.port);
    const annotations = k8s.template.metadata.annotations ?? {};
    expect(Number(annotations['prometheus.io/port'])).toBe(env.adminPort);

    phase = 'ready';
    expect((await send(adminUrl, livenessProbe?.httpGet?.path ?? '')).status).toBe(200);
    expect((await send(adminUrl, readinessProbe?.httpGet?.path ?? '')).status).toBe(200);
    expect((await send(adminUrl, annotations['prometheus.io/path'] ?? '')).status).toBe(200);
    // Readiness is the one that turns: 503 while starting or draining, liveness stays 200.
    phase = 'draining';
    expect((await send(adminUrl, readinessProbe?.httpGet?.path ?? '')).status).toBe(503);
    expect((await send(adminUrl, livenessProbe?.httpGet?.path ?? '')).status).toBe(200);
  });

  it('give the proxy a grace period longer than its own shutdown: the delay, the drain and the margin', () => {
    const env = k8s.env();
    expect(env.shutdownDelaySeconds).toBeGreaterThan(0);
    const grace = k8s.template.spec.terminationGracePeriodSeconds ?? 30;
    expect(grace * 1000).toBeGreaterThanOrEqual(shutdownPlan(env).limitMs);
  });

  it('expose only the client port as a Service', () => {
    const service = k8s.one('Service').spec as {
      selector: Record<string, string>;
      ports: ReadonlyArray<{ targetPort: string | number }>;
    };
    expect(service.ports.map((p) => k8s.containerPort(p.targetPort))).toEqual([k8s.env().port]);
    expect(k8s.template.metadata.labels).toMatchObject(service.selector);
  });

  it('let only the monitoring namespace’s Prometheus reach the admin port', () => {
    const spec = k8s.one('NetworkPolicy').spec as {
      podSelector: { matchLabels: Record<string, string> };
      policyTypes: string[];
      ingress: NetworkPolicyRule[];
    };
    expect(k8s.template.metadata.labels).toMatchObject(spec.podSelector.matchLabels);
    expect(spec.policyTypes).toContain('Ingress');
    const adminPort = k8s.env().adminPort;
    for (const rule of spec.ingress) {
      // A rule without ports would open every port, the admin port included.
      expect(rule.ports?.length ?? 0).toBeGreaterThan(0);
      const ports = (rule.ports ?? []).map((p) => k8s.containerPort(p.port));
      if (!ports.includes(adminPort)) continue;
      expect(ports).toEqual([adminPort]);
      expect(rule.from).toEqual([
        {
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
          podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } },
        },
      ]);
    }
    const clientRules = spec.ingress.filter((rule) =>
      (rule.ports ?? []).some((p) => k8s.containerPort(p.port) === k8s.env().port),
    );
    expect(clientRules.map((rule) => rule.from)).toEqual([undefined]);
  });

  it('keep the Deployment, its disruption budget and its autoscaler on the same pods', () => {
    const deployment = k8s.one('Deployment');
    const spec = deployment.spec as { replicas: number; selector: { matchLabels: Record<string, string> } };
    expect(k8s.template.metadata.labels).toMatchObject(spec.selector.matchLabels);
    const pdb = k8s.one('PodDisruptionBudget').spec as {
      maxUnavailable: number;
      selector: { matchLabels: Record<string, string> };
    };
    expect(k8s.template.metadata.labels).toMatchObject(pdb.selector.matchLabels);
    const hpa = k8s.one('HorizontalPodAutoscaler').spec as {
      scaleTargetRef: { kind: string; name: string };
      minReplicas: number;
      maxReplicas: number;
      metrics: ReadonlyArray<{ resource?: { name: string } }>;
    };
    expect(hpa.scaleTargetRef).toMatchObject({ kind: 'Deployment', name: deployment.metadata.name });
    expect(spec.replicas).toBe(3);
    expect(hpa.minReplicas).toBeLessThanOrEqual(spec.replicas);
    expect(pdb.maxUnavailable).toBeLessThan(hpa.minReplicas);
    // Utilisation is measured against requests: every resource scaled on is requested.
    for (const metric of hpa.metrics)
      expect(k8s.proxy.resources?.requests?.[metric.resource?.name ?? '']).toBeDefined();
  });
});

describe('the Redis settings', () => {
  it('point the base at one Redis, and the overlay at a Redis Cluster instead', () => {
    expect(rendered.base.env()).toMatchObject({ redisUrl: 'redis://redis:6379', redisClusterNodes: undefined });
    const cluster = rendered['redis-cluster'].env();
    expect(cluster.redisUrl).toBeUndefined();
    expect(cluster.redisClusterNodes?.length).toBeGreaterThanOrEqual(3);
  });

  it('differ in nothing else', () => {
    const withoutRedis = (k8s: Rendered): unknown =>
      k8s.manifests
        .filter((m) => !(m.kind === 'ConfigMap' && m.metadata.name.startsWith('slab-ops-proxy-redis-')))
        .map((m) =>
          m.kind === 'Deployment'
            ? JSON.stringify(m).replace(/slab-ops-proxy-redis-[a-z0-9]+/g, 'redis')
            : JSON.stringify(m),
        );
    expect(withoutRedis(rendered['redis-cluster'])).toEqual(withoutRedis(rendered.base));
  });
});

let phase: Phase = 'ready';
let admin: Server;
let adminUrl: string;

beforeAll(async () => {
  admin = createServer(
    createAdminApp({
      readiness: { phase: () => phase, components: () => ({}) },
      metrics: { render: () => Promise.resolve('') },
    }),
  );
  await new Promise<void>((resolve) => admin.listen(0, '127.0.0.1', resolve));
  adminUrl = `http://127.0.0.1:${String((admin.address() as AddressInfo).port)}`;
});

afterAll(async () => {
  await new Promise((resolve) => admin.close(resolve));
});
