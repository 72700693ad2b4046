import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { closeServer, createLogger, createRedis, listen } from '@tollway/service-kit';
import { startPrivateRedis, type PrivateRedis } from '@tollway/service-kit/testing';
import type { Redis } from 'ioredis';
import { wireAccounts, type AccountsWiring } from '../../src/admission/accounts-wiring';
import { buildApp } from '../../src/app';
import { CatalogStore } from '../../src/catalog/catalog-store';
import { loadGatewayConfig } from '../../src/config';
import { EngineRegistry } from '../../src/engines';
import { catalogModels } from '../helpers/gateway-harness';

/**
 * A Redis outage, hung (SIGSTOP) or gone (SIGKILL): requests get a 503 in the error envelope within
 * a second, /readyz fails, and the gateway serves again by itself once Redis is back.
 */
const KEY = `tw-${'o'.repeat(43)}`;
const ADMIN_TOKEN = 'outage-admin-token';
let redisServer: PrivateRedis;
let redis: Redis;
let server: Server;
let baseUrl: string;
let wiring: AccountsWiring;
let engines: EngineRegistry;
let catalog: CatalogStore;

beforeAll(async () => {
  redisServer = await startPrivateRedis();
  const env = {
    REDIS_URL: redisServer.url,
    DEV_API_KEY: KEY,
    ADMIN_TOKEN,
    ADMISSION_SLICES: 'false',
    AUTH_CACHE_TTL_MS: '0',
  };
  const config = loadGatewayConfig({ env, argv: [] });
  const logger = createLogger({ service: 'outage-test', silent: true });
  catalog = new CatalogStore(
    catalogModels([
      {
        id: 'test/fast',
        owned_by: 't',
        created: 1,
        price_per_million: { input: 1, output: 1 },
        engine: { kind: 'simulated' },
      },
    ]),
  );
  engines = new EngineRegistry({ connections: 4, timeoutMs: 5000 });
  catalog.subscribe((current) => engines.sync(current));
  redis = createRedis(config.redisUrl, { name: 'outage-test', failFast: true });
  redis.on('error', () => undefined);
  wiring = await wireAccounts(config, redis, logger);
  const app = buildApp({ config, logger, catalog, engines, redis, ...wiring });
  server = await listen(app, 0, '127.0.0.1');
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await closeServer(server);
  await engines.close();
  catalog.close();
  redisServer.resume();
  await wiring.close().catch(() => undefined);
  redis.disconnect();
  await redisServer.stop();
});

async function timedChat(): Promise<{
  status: number;
  ms: number;
  body: { error?: { type?: string; code?: string } };
}> {
  const started = performance.now();
  const res = await fetch(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
    body: JSON.stringify({ model: 'test/fast', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
  });
  const body = (await res.json()) as { error?: { type?: string; code?: string } };
  return { status: res.status, ms: performance.now() - started, body };
}

/** The admin API (a read and a credit top-up) and the console's sign-in. */
async function adminCalls(): Promise<
  Array<{ status: number; body: { error?: { code?: string } }; retry: string | null }>
> {
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` };
  const answers = await Promise.all([
    fetch(`${baseUrl}/admin/v1/organizations`, { headers }),
    fetch(`${baseUrl}/admin/v1/organizations/org_outage`, {
      method: 'PATCH',
      headers,
      body: JSON.stringify({ credit_top_up: 1 }),
    }),
    fetch(`${baseUrl}/console/api/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: 'not-the-admin-token' }),
    }),
  ]);
  return Promise.all(
    answers.map(async (res) => ({
      status: res.status,
      body: (await res.json()) as { error?: { code?: string } },
      retry: res.headers.get('retry-after'),
    })),
  );
}

async function readyStatus(): Promise<number> {
  return (await fetch(`${baseUrl}/readyz`)).status;
}

async function recovers(): Promise<void> {
  const deadline = Date.now() + 15_000;
  while ((await timedChat()).status !== 200) {
    if (Date.now() > deadline) throw new Error('the gateway did not recover within 15 s');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect(await readyStatus()).toBe(200);
}

describe('gateway during a Redis outage', () => {
  it.each([
    ['hung (SIGSTOP)', () => redisServer.pause(), () => Promise.resolve(redisServer.resume())],
    ['gone (SIGKILL), then restarted', () => redisServer.kill(), () => redisServer.restart()],
  ])('Redis %s: 503 within 1 s, readyz fails, then it serves again by itself', async (_name, stop, start) => {
    expect((await timedChat()).status).toBe(200);
    await stop();
    // Within a second (the fastest of three; each under 2.5 s, as the test shares two loaded cores).
    const times: number[] = [];
    for (let i = 0; i < 3; i++) {
      const answer = await timedChat();
      expect(answer.status).toBe(503);
      expect(answer.body.error).toMatchObject({ type: 'server_error', code: 'admission_unavailable' });
      times.push(answer.ms);
    }
    expect(Math.min(...times)).toBeLessThan(1000);
    expect(Math.max(...times)).toBeLessThan(2500);
    expect(await readyStatus()).toBe(503);
    // The admin API and the console too: a 503 to retry, never a 500.
    for (const answer of await adminCalls()) {
      expect(answer).toMatchObject({ status: 503, body: { error: { code: 'service_unavailable' } }, retry: '1' });
    }
    await start();
    await recovers();
    expect((await adminCalls()).map((answer) => answer.status)).toEqual([200, 404, 401]);
  });
});
