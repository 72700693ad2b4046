import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { closeServer, createLogger, createRedis, listen } from '@tollway/service-kit';
import type { Redis } from 'ioredis';
import { wireAccounts, type AccountsWiring } from '../../src/admission/accounts-wiring';
import { ConfigKeyAuthenticator } from '../../src/admission/config-key.authenticator';
import type { Admission, AdmissionRequest, AdmissionTicket, SettledUsage } from '../../src/admission/admission.types';
import { UnmeteredAdmission } from '../../src/admission/unmetered.admission';
import { buildApp } from '../../src/app';
import { CatalogStore } from '../../src/catalog/catalog-store';
import { CatalogFile, type CatalogModel } from '../../src/catalog/catalog.schema';
import { loadGatewayConfig, type GatewayConfig } from '../../src/config';
import { engineContextOf, EngineRegistry } from '../../src/engines';
import { SimServer, type SimServerOptions } from '../../src/engines/simulated/sim-server';
import type { SimulationOptions } from '../../src/catalog/catalog.schema';
import type { LiveRelays } from '../../src/streaming/live-relays';

/** The API key every harness gateway accepts. */
export const TEST_KEY = 'test-key-0123456789';

/** A running gateway for integration tests. */
export interface GatewayHarness {
  /** `http://127.0.0.1:PORT` */
  baseUrl: string;
  server: Server;
  catalog: CatalogStore;
  engines: EngineRegistry;
  config: GatewayConfig;
  close(): Promise<void>;
}

/** Catalog entries written as in a catalog file (defaults applied by the schema). */
export function catalogModels(entries: unknown[]): CatalogModel[] {
  return CatalogFile.parse({ models: entries }).models;
}

/** An entry served by an OpenAI-compatible engine at `baseUrls`. */
export function httpModel(
  id: string,
  baseUrls: string[],
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    id,
    owned_by: 'test',
    created: 1767225600,
    price_per_million: { input: 1, output: 2 },
    engine: { kind: 'openai-compatible', replicas: baseUrls.map((base_url) => ({ base_url })) },
    ...extra,
  };
}

/** Starts a gateway on 127.0.0.1 port 0 over real Redis, with `models` and the config-key authenticator. */
export async function startGateway(
  models: CatalogModel[],
  options: { admission?: Admission; env?: Record<string, string>; liveRelays?: LiveRelays } = {},
): Promise<GatewayHarness> {
  const config = loadGatewayConfig({
    env: { API_KEYS: TEST_KEY, UPSTREAM_TIMEOUT_MS: '5000', ...options.env },
    argv: [],
  });
  const logger = createLogger({ service: 'gateway-test', silent: true });
  const { catalog, engines } = servedModels(models, { ...engineContextOf(config), connections: 16 });
  const redis = createRedis(config.redisUrl, { name: 'gateway-test' });
  const app = buildApp({
    config,
    logger,
    catalog,
    engines,
    authenticator: new ConfigKeyAuthenticator(config.apiKeys),
    admission: options.admission ?? new UnmeteredAdmission(),
    redis,
    liveRelays: options.liveRelays,
  });
  const server = await listen(app, 0, '127.0.0.1');
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    server,
    catalog,
    engines,
    config,
    async close() {
      await stopServing(server, engines, catalog);
      await redis.quit();
    },
  };
}

/** A gateway over the real accounts wiring: organization keys, budgets, credit, capacity. */
export interface AccountsGateway {
  /** `http://127.0.0.1:PORT` */
  baseUrl: string;
  wiring: AccountsWiring;
  /** Stops the gateway and the wiring; leaves `redis` (the caller's) open and its keys in place. */
  close(): Promise<void>;
}

/**
 * Starts a gateway on 127.0.0.1 port 0 with `wireAccounts` over the caller's `redis`, configured
 * from `env` (give it a `REDIS_PREFIX` of the test's own), and the admin API when `ADMIN_TOKEN` is set.
 */
export async function startAccountsGateway(
  models: CatalogModel[],
  redis: Redis,
  env: Record<string, string>,
): Promise<AccountsGateway> {
  const config = loadGatewayConfig({ env, argv: [] });
  const logger = createLogger({ service: 'gateway-test', silent: true });
  const { catalog, engines } = servedModels(models, { connections: 16, timeoutMs: 5000 });
  const wiring = await wireAccounts(config, redis, logger);
  const { authenticator, admission, adminRouter, openApi } = wiring;
  const app = buildApp({ config, logger, catalog, engines, redis, authenticator, admission, adminRouter, openApi });
  const server = await listen(app, 0, '127.0.0.1');
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    wiring,
    async close() {
      await stopServing(server, engines, catalog);
      await wiring.close();
    },
  };
}

/**
 * POSTs a small chat completion (`test/fast`, "hello there", 8 tokens; `body` on top) to the
 * gateway at `baseUrl`: with `Authorization: Bearer <key>` unless `key` is null, and `headers`.
 */
export function postSmallChat(
  baseUrl: string,
  key: string | null,
  body: Record<string, unknown> = {},
  init: { headers?: Record<string, string>; signal?: AbortSignal } = {},
): Promise<Response> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...init.headers };
  if (key !== null) headers.authorization = `Bearer ${key}`;
  return fetch(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers,
    signal: init.signal,
    body: JSON.stringify({
      model: 'test/fast',
      messages: [{ role: 'user', content: 'hello there' }],
      max_tokens: 8,
      ...body,
    }),
  });
}

/** The `error` object of an envelope. */
export async function errorOf(res: Response): Promise<Record<string, unknown>> {
  return ((await res.json()) as { error: Record<string, unknown> }).error;
}

/** The catalog of `models` and the engine registry that follows it. */
function servedModels(
  models: CatalogModel[],
  engineOptions: ConstructorParameters<typeof EngineRegistry>[0],
): { catalog: CatalogStore; engines: EngineRegistry } {
  const catalog = new CatalogStore(models);
  const engines = new EngineRegistry(engineOptions);
  catalog.subscribe((current) => engines.sync(current));
  return { catalog, engines };
}

/** Closes a harness gateway's server (its connections dropped), then its engines and catalog. */
async function stopServing(server: Server, engines: EngineRegistry, catalog: CatalogStore): Promise<void> {
  server.closeAllConnections();
  await closeServer(server);
  await engines.close();
  catalog.close();
}

/** Starts the simulated engine as a real HTTP server on 127.0.0.1 port 0. */
export async function startSim(
  options: Partial<SimulationOptions> = {},
  serverOptions: SimServerOptions = {},
): Promise<{ sim: SimServer; baseUrl: string }> {
  const sim = new SimServer(
    {
      time_to_first_token_ms: 0,
      time_per_output_token_ms: 0,
      max_concurrency: 64,
      default_max_tokens: 32,
      max_model_len: 4096,
      reasoning: false,
      ignore_eos: false,
      error_style: 'json',
      ...options,
    },
    'simulated',
    serverOptions,
  );
  const port = await sim.listen(0);
  return { sim, baseUrl: `http://127.0.0.1:${port}/v1` };
}

/** One admission call as the RecordingAdmission saw it. */
export interface RecordedTicket {
  request: AdmissionRequest;
  settled: SettledUsage[];
  released: number;
}

/** An admission that admits everything and records each ticket's settle / release calls. */
export class RecordingAdmission implements Admission {
  readonly tickets: RecordedTicket[] = [];
  private readonly waiters: Array<() => void> = [];

  async admit(request: AdmissionRequest): Promise<AdmissionTicket> {
    const record: RecordedTicket = { request, settled: [], released: 0 };
    this.tickets.push(record);
    return {
      headers: { 'x-ratelimit-limit-requests': '100' },
      settle: async (usage) => {
        record.settled.push(usage);
        this.notify();
      },
      release: async () => {
        record.released++;
        this.notify();
      },
    };
  }

  /** Resolves once every ticket so far was settled or released (or after `timeoutMs`). */
  async allClosed(timeoutMs = 3000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.tickets.some((t) => t.settled.length + t.released === 0) && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 50);
      });
    }
  }

  private notify(): void {
    for (const waiter of this.waiters.splice(0)) waiter();
  }
}

/** Reads an SSE body into its `data:` payloads. */
export function ssePayloads(text: string): string[] {
  return text
    .split('\n\n')
    .map((frame) => frame.trim())
    .filter((frame) => frame.startsWith('data: '))
    .map((frame) => frame.slice('data: '.length));
}

/** A vLLM-like simulated engine's prefix caching (`startSim({ prefix_caching })`), fast enough for tests. */
export const FAST_PREFIX_CACHING = {
  kv_cache_blocks: 2048,
  prefill_tokens_per_s: 1e6,
  decode_step_ms: 1,
  decode_ms_per_sequence: 0,
  max_batched_tokens: 2048,
};
