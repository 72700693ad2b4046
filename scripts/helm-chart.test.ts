/**
 * The Helm chart (deploy/helm/tollway), checked offline: every way users install it (each
 * component alone, the session service, everything; Redis standalone, managed over TLS or behind
 * Sentinel; the examples in deploy/helm/examples) is rendered by the real helm, and every object
 * is checked against the Kubernetes, KEDA and Prometheus Operator schemas. Then what a schema
 * cannot see: each process gets the variables it needs, and its own config loader accepts them;
 * the probes ask paths the process serves on ports it listens on; selectors find their pods and
 * Services; the ScaledObject scales the worker on the session API's queue gauge; no credential
 * lands in a ConfigMap.
 */
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse } from 'yaml';
import { HTTP_LIMIT_SOURCES } from '../packages/service-kit/src/http-server';
import { REDIS_CONNECTION_SOURCES } from '../packages/service-kit/src/redis-config';
import { TELEMETRY_CONFIG_SOURCES } from '../packages/telemetry/src/telemetry-config';
import { loadApiConfig, SHARED_CONFIG_SOURCES } from '../services/agent-session/src/config';
import { loadWorkerConfig } from '../services/agent-session/src/worker-config';
import { loadGatewayConfig } from '../services/inference-gateway/src/config';
import { lintChart, renderChart, schemaErrors, type K8sObject } from './helm-render';

jest.setTimeout(120_000);

const ROOT = resolve(__dirname, '..');
const EXAMPLES = join(ROOT, 'deploy', 'helm', 'examples');
const NAMESPACE = 'tollway';

const CREDENTIALS = {
  ADMIN_TOKEN: 'operator-token-0123456789abcdef',
  CONSOLE_SESSION_SECRET: 'console-session-secret-0123456789abcdef',
  SERVICE_API_KEY: 'service-key-0123456789abcdefghijklmnopqrstuvwxyz',
  WEBHOOK_SIGNING_SECRET: `whsec_${Buffer.from('webhook signing secret of 32 bytes').toString('base64')}`,
  REDIS_SENTINEL_PASSWORD: 'sentinel-password-0123',
};

/** The Redis set-ups the chart supports. */
const REDIS: Record<string, Record<string, unknown>> = {
  standalone: { secrets: { REDIS_URL: 'redis://tollway:data-password@redis.data.svc:6379' } },
  'managed over TLS': {
    secrets: { REDIS_URL: 'rediss://tollway:data-password@tollway.redis.cloud.example:6380' },
    redis: { tls: { secretName: 'redis-ca', certKey: 'tls.crt', keyKey: 'tls.key' } },
  },
  Sentinel: {
    secrets: {
      REDIS_URL: 'redis://tollway:data-password@mymaster',
      REDIS_SENTINEL_PASSWORD: CREDENTIALS.REDIS_SENTINEL_PASSWORD,
    },
    redis: {
      sentinel: {
        addresses: ['sentinel-0.redis.svc:26379', 'sentinel-1.redis.svc:26379', 'sentinel-2.redis.svc:26379'],
        name: 'mymaster',
        username: 'sentinel-user',
        tls: true,
      },
      tls: { secretName: 'redis-ca' },
    },
  },
};

const OTHER_GATEWAY = 'http://tollway-gateway.tollway.svc:8080/v1';
/** Which components a release holds. */
const COMPONENTS: Record<string, Record<string, unknown>> = {
  everything: {},
  'the gateway alone': { sessionApi: { enabled: false }, sessionWorker: { enabled: false } },
  'the session API alone': { gateway: { enabled: false }, sessionWorker: { enabled: false } },
  'the session worker alone': {
    gateway: { enabled: false },
    sessionApi: { enabled: false },
    sessionWorker: {
      gatewayBaseUrl: OTHER_GATEWAY,
      autoscaling: { sessionApiService: 'sessions-tollway-session-api' },
    },
  },
  'the session service (API and worker)': {
    gateway: { enabled: false },
    sessionWorker: { gatewayBaseUrl: OTHER_GATEWAY },
  },
};

/** Deep merge of plain objects (arrays and scalars of later ones win). */
function merge(...layers: Record<string, unknown>[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const layer of layers) {
    for (const [key, value] of Object.entries(layer)) {
      const before = out[key];
      const plain = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v);
      out[key] = plain(before) && plain(value) ? merge(before as never, value as never) : value;
    }
  }
  return out;
}

function valuesFor(components: string, redis: string): Record<string, unknown> {
  const { REDIS_SENTINEL_PASSWORD: _, ...credentials } = CREDENTIALS;
  return merge(
    { secrets: credentials, sessions: { webhookAllowedHosts: '10.0.0.0/8' } },
    REDIS[redis]!,
    COMPONENTS[components]!,
  );
}

interface Rendered {
  name: string;
  values: Record<string, unknown>;
  objects: K8sObject[];
  /** What the schemas find wrong with them. */
  schemaErrors: string[];
  /** Secrets the release reads but does not make (an existingSecret), as the user would have made them. */
  external: K8sObject[];
}

const ALL_KEYS_SECRET: K8sObject = {
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name: 'tollway-credentials' },
  stringData: { ...CREDENTIALS, REDIS_URL: 'rediss://tollway:data-password@redis.example:6380' },
};

/**
 * The Secret a user made for an example: every credential, but the sentinels' password only where
 * sentinels are used (the processes refuse a Sentinel setting without REDIS_SENTINELS).
 */
function existingSecretFor(redisExample: string): K8sObject {
  if (redisExample.includes('sentinel')) return ALL_KEYS_SECRET;
  const { REDIS_SENTINEL_PASSWORD: _unused, ...rest } = ALL_KEYS_SECRET.stringData as Record<string, string>;
  return { ...ALL_KEYS_SECRET, stringData: rest };
}

const variants: Rendered[] = [];
for (const components of Object.keys(COMPONENTS)) {
  for (const redis of Object.keys(REDIS)) {
    const values = valuesFor(components, redis);
    variants.push({ name: `${components}, Redis ${redis}`, values, objects: [], schemaErrors: [], external: [] });
  }
}
// The examples as the README installs them: a Redis file, then a component file.
const examples = readdirSync(EXAMPLES).filter((file) => file.endsWith('.yaml'));
for (const redis of examples.filter((file) => file.startsWith('redis-'))) {
  for (const component of examples.filter((file) => !file.startsWith('redis-'))) {
    variants.push({
      name: `examples ${redis} + ${component}`,
      values: { files: [redis, component].map((file) => join(EXAMPLES, file)) },
      objects: [],
      schemaErrors: [],
      external: [existingSecretFor(redis)],
    });
  }
}

beforeAll(() => {
  for (const variant of variants) {
    const files = variant.values.files as string[] | undefined;
    variant.objects = files ? renderChart({}, { valuesFiles: files }) : renderChart(variant.values);
  }
  schemaErrors(variants.map((variant) => variant.objects)).forEach((errors, i) => (variants[i]!.schemaErrors = errors));
});

// ---- what the processes are ---------------------------------------------------------------

type Process = 'gateway' | 'session-api' | 'session-worker';

/** The process a container runs, from its image's command (the session image runs the API unless told otherwise). */
function processOf(deployment: K8sObject): Process {
  const container = containersOf(deployment)[0]!;
  if (container.image.includes('inference-gateway')) return 'gateway';
  return container.command?.includes('dist/main-worker.js') ? 'session-worker' : 'session-api';
}

function source(path: string): string {
  return readFileSync(join(ROOT, path), 'utf8');
}

/** A PEM file the config loaders accept (they check the file is readable and PEM, not the key). */
const STAND_IN_PEM = (() => {
  const dir = mkdtempSync(join(tmpdir(), 'tollway-chart-tls-'));
  const file = join(dir, 'stand-in.pem');
  writeFileSync(file, '-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n');
  return file;
})();

/** `env` with each REDIS_TLS_*_FILE it sets pointing at a stand-in PEM file. */
function withStandInTlsFiles(env: Record<string, string>): Record<string, string> {
  const out = { ...env };
  for (const name of ['REDIS_TLS_CA_FILE', 'REDIS_TLS_CERT_FILE', 'REDIS_TLS_KEY_FILE']) {
    if (out[name]) out[name] = STAND_IN_PEM;
  }
  return out;
}

/** `env: 'NAME'` entries of a config source file. */
function envNamesIn(path: string): string[] {
  return [...source(path).matchAll(/env: '([A-Z0-9_]+)'/g)].map((match) => match[1]!);
}

const envOf = (sources: Record<string, { env?: string }>) =>
  Object.values(sources).flatMap((s) => (s.env ? [s.env] : []));
/** The Redis connection variables every process reads through service-kit's Redis factory. */
const shared = [...envOf(TELEMETRY_CONFIG_SOURCES), ...envOf(HTTP_LIMIT_SOURCES), ...envOf(REDIS_CONNECTION_SOURCES)];
/** Every variable each process reads. */
const READS: Record<Process, Set<string>> = {
  gateway: new Set([...envNamesIn('services/inference-gateway/src/config.ts'), ...shared]),
  // The API's reaper reads the worker's variables too (main-api.ts, loadWorkerConfig).
  'session-api': new Set([
    ...envNamesIn('services/agent-session/src/config.ts'),
    ...envNamesIn('services/agent-session/src/worker-config.ts'),
    ...shared,
  ]),
  'session-worker': new Set([
    ...envNamesIn('services/agent-session/src/worker-config.ts'),
    ...envOf(SHARED_CONFIG_SOURCES),
    ...shared,
  ]),
};

/** Paths a process serves on each of its listeners, read from the sources that route them. */
const routesIn = (path: string, pattern: RegExp) => [...source(path).matchAll(pattern)].map((m) => m[1]!);
const METRICS_LISTENER = routesIn('packages/telemetry/src/metrics-registry.ts', /req\.url === '(\/[a-z]+)'/g);
const SERVES: Record<Process, { http: string[]; metrics: string[] }> = {
  gateway: {
    http: routesIn('services/inference-gateway/src/routes/health.route.ts', /router\.get\('(\/[a-z]+)'/g),
    metrics: METRICS_LISTENER,
  },
  'session-api': {
    http: routesIn('services/agent-session/src/api/health.route.ts', /router\.get\('(\/[a-z]+)'/g),
    metrics: METRICS_LISTENER,
  },
  'session-worker': { http: [], metrics: METRICS_LISTENER },
};

// ---- reading rendered objects --------------------------------------------------------------

interface Probe {
  httpGet?: { path: string; port: string | number };
}
interface Container {
  name: string;
  image: string;
  command?: string[];
  ports?: Array<{ name: string; containerPort: number }>;
  envFrom?: Array<{ configMapRef?: { name: string } }>;
  env?: Array<{
    name: string;
    value?: string;
    valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean } };
  }>;
  startupProbe?: Probe;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  volumeMounts?: Array<{ name: string; mountPath: string }>;
}
interface PodTemplate {
  metadata: { labels: Record<string, string> };
  spec: { containers: Container[]; volumes?: Array<{ name: string; secret?: { secretName: string } }> };
}

const ofKind = (objects: K8sObject[], kind: string) => objects.filter((object) => object.kind === kind);
const templateOf = (deployment: K8sObject) => deployment.spec!.template as PodTemplate;
const containersOf = (deployment: K8sObject) => templateOf(deployment).spec.containers;
const matches = (selector: Record<string, string>, labels: Record<string, string> = {}) =>
  Object.keys(selector).length > 0 && Object.entries(selector).every(([key, value]) => labels[key] === value);
const byName = (objects: K8sObject[], kind: string, name: string) =>
  objects.find((object) => object.kind === kind && object.metadata.name === name);

/** The environment a container starts with: its ConfigMaps, then its own entries, Secrets resolved. */
function environmentOf(container: Container, objects: K8sObject[], external: K8sObject[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const from of container.envFrom ?? []) {
    const map = byName(objects, 'ConfigMap', from.configMapRef!.name);
    expect([from.configMapRef!.name, map !== undefined]).toEqual([from.configMapRef!.name, true]);
    Object.assign(env, map!.data);
  }
  for (const entry of container.env ?? []) {
    const ref = entry.valueFrom?.secretKeyRef;
    if (!ref) {
      env[entry.name] = entry.value!;
      continue;
    }
    const secret = byName([...objects, ...external], 'Secret', ref.name);
    const value = secret?.stringData?.[ref.key];
    if (value === undefined) {
      // Kubernetes would not start the pod for a required key that is missing.
      expect([entry.name, ref.optional]).toEqual([entry.name, true]);
      continue;
    }
    env[entry.name] = value;
  }
  return env;
}

// ---- the checks ----------------------------------------------------------------------------

describe.each(variants)('helm chart: $name', (variant) => {
  const objects = () => variant.objects;
  const deployments = () => ofKind(objects(), 'Deployment');

  it('passes helm lint --strict', () => {
    const files = variant.values.files as string[] | undefined;
    expect(() => (files ? lintChart({}, files) : lintChart(variant.values))).not.toThrow();
  });

  it('renders objects that all validate against the Kubernetes, KEDA and Prometheus Operator schemas', () => {
    expect(objects().length).toBeGreaterThan(0);
    expect(variant.schemaErrors).toEqual([]);
    for (const object of objects()) {
      expect([object.kind, object.metadata.name, object.metadata.namespace]).toEqual([
        object.kind,
        object.metadata.name,
        NAMESPACE,
      ]);
    }
  });

  it('gives each Deployment a PodDisruptionBudget, a Service, a ServiceMonitor and a NetworkPolicy that select its pods', () => {
    for (const deployment of deployments()) {
      const labels = templateOf(deployment).metadata.labels;
      expect(matches(deployment.spec!.selector!['matchLabels' as never], labels)).toBe(true);
      const selecting = (kind: string, selectorOf: (o: K8sObject) => Record<string, string>) =>
        ofKind(objects(), kind).filter((object) => matches(selectorOf(object), labels));
      const [pdb] = selecting('PodDisruptionBudget', (o) => (o.spec!.selector as { matchLabels: never }).matchLabels);
      expect(pdb?.spec?.maxUnavailable).toBe(1);
      const policies = selecting('NetworkPolicy', (o) => (o.spec!.podSelector as { matchLabels: never }).matchLabels);
      expect(policies).toHaveLength(1);
      const services = selecting('Service', (o) => o.spec!.selector as never);
      expect(services).toHaveLength(1);
      // Each Service port leads to a port the container names.
      const portNames = containersOf(deployment).flatMap((c) => (c.ports ?? []).map((p) => p.name));
      for (const port of services[0]!.spec!.ports as Array<{ targetPort: string }>)
        expect(portNames).toContain(port.targetPort);
      // The ServiceMonitor finds that Service and scrapes /metrics at a port it has.
      const monitors = ofKind(objects(), 'ServiceMonitor').filter((m) =>
        matches((m.spec!.selector as { matchLabels: never }).matchLabels, services[0]!.metadata.labels),
      );
      expect(monitors).toHaveLength(1);
      const servicePorts = (services[0]!.spec!.ports as Array<{ name: string }>).map((p) => p.name);
      for (const endpoint of monitors[0]!.spec!.endpoints as Array<{ port: string; path: string }>) {
        expect(servicePorts).toContain(endpoint.port);
        expect(endpoint.path).toBe('/metrics');
      }
    }
  });

  it('probes paths each process serves, on ports it listens on, and opens its metrics port only to monitoring', () => {
    for (const deployment of deployments()) {
      const process = processOf(deployment);
      const [container] = containersOf(deployment);
      const env = environmentOf(container!, objects(), variant.external);
      const ports = Object.fromEntries((container!.ports ?? []).map((p) => [p.name, p.containerPort]));
      // The container's ports are the ones the process is told to listen on.
      const portVariable = { gateway: 'GATEWAY_PORT', 'session-api': 'SESSIONS_PORT', 'session-worker': null }[process];
      expect(ports.metrics).toBe(Number(env.METRICS_PORT));
      if (portVariable) expect(ports.http).toBe(Number(env[portVariable]));
      else expect(ports.http).toBeUndefined();
      const probes = [container!.startupProbe, container!.livenessProbe, container!.readinessProbe];
      for (const probe of probes) {
        const { path, port } = probe!.httpGet!;
        expect(Object.keys(ports)).toContain(port);
        expect([process, port, SERVES[process][port as 'http' | 'metrics']]).toEqual([
          process,
          port,
          expect.arrayContaining([path]),
        ]);
      }
      // Liveness never asks about Redis or engines: a restart would not bring them back.
      expect(container!.livenessProbe!.httpGet!.path).toBe('/healthz');
      const policy = ofKind(objects(), 'NetworkPolicy').find((p) =>
        matches((p.spec!.podSelector as { matchLabels: never }).matchLabels, templateOf(deployment).metadata.labels),
      )!;
      const rules = policy.spec!.ingress as Array<{ ports: Array<{ port: string }>; from?: unknown[] }>;
      const metricsRule = rules.find((rule) => rule.ports.some((p) => p.port === 'metrics'))!;
      expect(metricsRule.from).toEqual([
        { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
      ]);
      expect(rules.flatMap((rule) => rule.ports.map((p) => p.port)).sort()).toEqual(Object.keys(ports).sort());
    }
  });

  it('sets every variable each process needs, only variables it reads, and its own config loader accepts them', () => {
    const gatewayKeys: string[] = [];
    for (const deployment of deployments()) {
      const process = processOf(deployment);
      const env = environmentOf(containersOf(deployment)[0]!, objects(), variant.external);
      const unknown = Object.keys(env).filter((name) => !READS[process].has(name));
      expect([process, unknown]).toEqual([process, []]);
      // Redis: a URL, or Sentinels with the primary's name; the prefix every release must share.
      expect(
        env.REDIS_URL !== undefined || (env.REDIS_SENTINELS !== undefined && env.REDIS_SENTINEL_NAME !== undefined),
      ).toBe(true);
      expect(env.REDIS_PREFIX).toBe('tollway:');
      for (const file of ['REDIS_TLS_CA_FILE', 'REDIS_TLS_CERT_FILE', 'REDIS_TLS_KEY_FILE']) {
        // A TLS file is one the pod mounts.
        if (env[file]) {
          const mounts = containersOf(deployment)[0]!.volumeMounts ?? [];
          expect(mounts.some((mount) => env[file]!.startsWith(`${mount.mountPath}/`))).toBe(true);
        }
      }
      // The loaders read the TLS files the pod mounts: here, stand-in PEM files at other paths.
      const input = { env: withStandInTlsFiles(env), argv: [] as string[] };
      if (process === 'gateway') {
        const config = loadGatewayConfig(input);
        expect(config.port).toBe(Number(env.GATEWAY_PORT));
        expect(config.metricsPort).toBe(Number(env.METRICS_PORT));
        expect(config.shutdownGraceMs).toBe(30_000);
        gatewayKeys.push(...config.serviceApiKeys);
      } else if (process === 'session-api') {
        const config = loadApiConfig(input);
        expect(config.authEnabled).toBe(true);
        expect(config.embeddedWorker).toBe(false);
        expect(config.metricsPort).toBe(Number(env.METRICS_PORT));
        // Its reaper signs and checks webhooks as the workers do.
        const worker = loadWorkerConfig(input);
        expect(worker.webhookSigningSecret).toBe(CREDENTIALS.WEBHOOK_SIGNING_SECRET);
      } else {
        const config = loadWorkerConfig(input);
        expect(config.gatewayApiKey).toBe(CREDENTIALS.SERVICE_API_KEY);
        expect(config.webhookSigningSecret).toBe(CREDENTIALS.WEBHOOK_SIGNING_SECRET);
        expect(config.metricsPort).toBe(Number(env.METRICS_PORT));
        const gatewayService = ofKind(objects(), 'Service').find((s) => s.metadata.name.endsWith('-gateway'));
        // The worker calls this release's gateway Service, at its port, or the one it was given.
        expect(config.gatewayBaseUrl).toEqual(
          gatewayService
            ? `http://${gatewayService.metadata.name}.${NAMESPACE}.svc:${(gatewayService.spec!.ports as Array<{ port: number }>)[0]!.port}/v1`
            : expect.stringMatching(/^http:\/\/tollway-gateway[.:]/),
        );
      }
    }
    // The gateway accepts the key the workers call it with: their turns bill their sessions' organizations.
    if (gatewayKeys.length > 0) expect(gatewayKeys).toContain(CREDENTIALS.SERVICE_API_KEY);
  });

  it('keeps every credential out of ConfigMaps, and hands each process only the keys it reads', () => {
    const secretValues = [...Object.values(CREDENTIALS), 'data-password'];
    for (const map of ofKind(objects(), 'ConfigMap')) {
      for (const [key, value] of Object.entries(map.data ?? {})) {
        expect([key, /TOKEN|SECRET|PASSWORD|API_KEY|REDIS_URL/.test(key)]).toEqual([key, false]);
        for (const secret of secretValues) expect([key, value.includes(secret)]).toEqual([key, false]);
      }
    }
    for (const deployment of deployments()) {
      const container = containersOf(deployment)[0]!;
      for (const entry of container.env ?? []) expect([entry.name, entry.value]).toEqual([entry.name, undefined]);
      const fromSecret = (container.env ?? []).map((entry) => entry.name).sort();
      const allowed = {
        gateway: ['ADMIN_TOKEN', 'CONSOLE_SESSION_SECRET', 'REDIS_SENTINEL_PASSWORD', 'REDIS_URL', 'SERVICE_API_KEYS'],
        'session-api': ['REDIS_SENTINEL_PASSWORD', 'REDIS_URL', 'WEBHOOK_SIGNING_SECRET'],
        'session-worker': ['GATEWAY_API_KEY', 'REDIS_SENTINEL_PASSWORD', 'REDIS_URL', 'WEBHOOK_SIGNING_SECRET'],
      }[processOf(deployment)];
      expect(allowed).toEqual(expect.arrayContaining(fromSecret));
    }
  });

  it("runs each image's own command, the worker's as compose does", () => {
    const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8')) as {
      services: Record<string, { command?: string[] }>;
    };
    for (const deployment of deployments()) {
      const [container] = containersOf(deployment);
      // By name, not by command: the gateway's image CMD carries its node flags; the session image's runs the API.
      const expected = deployment.metadata.name.endsWith('-session-worker')
        ? compose.services['agent-session-worker']!.command
        : undefined;
      expect(container!.command).toEqual(expected);
    }
  });

  it('scales the gateway and the API on CPU, and the workers with KEDA on the waiting turns the session API reports', () => {
    const hpas = ofKind(objects(), 'HorizontalPodAutoscaler');
    for (const deployment of deployments()) {
      const process = processOf(deployment);
      const scalers = [...hpas, ...ofKind(objects(), 'ScaledObject')].filter(
        (scaler) => (scaler.spec!.scaleTargetRef as { name: string }).name === deployment.metadata.name,
      );
      expect([process, scalers.map((s) => s.kind)]).toEqual([
        process,
        [process === 'session-worker' ? 'ScaledObject' : 'HorizontalPodAutoscaler'],
      ]);
      // An autoscaled Deployment leaves its replica count to the scaler.
      expect(deployment.spec!.replicas).toBeUndefined();
      const [scaler] = scalers;
      expect((scaler!.spec!.scaleTargetRef as { kind?: string }).kind).toBe('Deployment');
      if (scaler!.kind === 'HorizontalPodAutoscaler') {
        expect(scaler!.spec!.metrics).toEqual([
          { type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 70 } } },
        ]);
        continue;
      }
      const [trigger] = scaler!.spec!.triggers as Array<{ type: string; metadata: Record<string, string> }>;
      expect(trigger!.type).toBe('prometheus');
      const match = /^max\(tollway_turn_queue_jobs\{state="waiting",namespace="([^"]+)",job="([^"]+)"\}\)$/.exec(
        trigger!.metadata.query!,
      );
      expect(match?.[1]).toBe(NAMESPACE);
      // The job label is the session API's Service (prometheus-operator names the job after it).
      const apiService = ofKind(objects(), 'Service').find((s) => s.metadata.name.endsWith('-session-api'));
      expect(match?.[2]).toBe(apiService?.metadata.name ?? 'sessions-tollway-session-api');
      const env = environmentOf(containersOf(deployment)[0]!, objects(), variant.external);
      expect(trigger!.metadata.threshold).toBe(env.WORKER_CONCURRENCY);
    }
  });
});

describe('helm chart: the queue gauge the workers scale on', () => {
  it('is the session API\'s tollway_turn_queue_jobs, with a "waiting" state', () => {
    const metrics = source('services/agent-session/src/observability/session-metrics.ts');
    expect(metrics).toContain("name: 'tollway_turn_queue_jobs'");
    expect(metrics).toContain("state: 'waiting'");
  });
});

describe('helm chart: refused values', () => {
  const base = valuesFor('everything', 'standalone');
  const refusal = (values: Record<string, unknown>) => {
    try {
      renderChart(values);
    } catch (err) {
      return (err as Error).message;
    }
    throw new Error('rendered');
  };

  it('names the missing credential or address', () => {
    expect(refusal(merge(base, { secrets: { SERVICE_API_KEY: '' } }))).toMatch(/secrets\.SERVICE_API_KEY is required/);
    expect(refusal(merge(base, { secrets: { REDIS_URL: '' } }))).toMatch(/secrets\.REDIS_URL is required/);
    const workerAlone = valuesFor('the session worker alone', 'standalone');
    expect(refusal(merge(workerAlone, { sessionWorker: { gatewayBaseUrl: '' } }))).toMatch(
      /sessionWorker\.gatewayBaseUrl is required/,
    );
  });

  it('keeps credentials out of ConfigMaps: an engine api_key in the inline catalog, a secret-looking env, an unknown secret key', () => {
    const catalog = {
      models: [
        { id: 'a/b', engine: { kind: 'openai-compatible', replicas: [{ base_url: 'http://e/v1', api_key: 'sk-1' }] } },
      ],
    };
    expect(refusal(merge(base, { gateway: { catalog } }))).toMatch(/gateway\.catalogSecret/);
    expect(refusal(merge(base, { sessionWorker: { env: { OTEL_EXPORTER_OTLP_HEADERS_TOKEN: 'x' } } }))).toMatch(
      /looks like a credential/,
    );
    expect(refusal(merge(base, { secrets: { SERVICE_API_KEYS: 'x' } }))).toMatch(
      /secrets\.SERVICE_API_KEYS is not a key this chart reads/,
    );
  });

  it('renders a catalog without keys into a ConfigMap the gateway mounts and names in CATALOG_PATH', () => {
    const catalog = {
      models: [
        {
          id: 'a/b',
          owned_by: 'a',
          created: 1,
          price_per_million: { input: 1, output: 1 },
          engine: { kind: 'simulated' },
        },
      ],
    };
    const objects = renderChart(merge(base, { gateway: { catalog } }));
    const map = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name.endsWith('-gateway-catalog'))!;
    expect(map.data!['catalog.yaml']).toContain('id: a/b');
    const gateway = objects.find((o) => o.kind === 'Deployment' && o.metadata.name.endsWith('-gateway'))!;
    const env = environmentOf(containersOf(gateway)[0]!, objects, []);
    const mount = containersOf(gateway)[0]!.volumeMounts!.find((m) => env.CATALOG_PATH!.startsWith(`${m.mountPath}/`));
    expect(templateOf(gateway).spec.volumes!.find((v) => v.name === mount?.name)).toEqual({
      name: mount!.name,
      configMap: { name: map.metadata.name },
    });
  });
});
