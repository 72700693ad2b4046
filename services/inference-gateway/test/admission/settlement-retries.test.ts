import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { createAccountStore, deleteKeysWithPrefix } from '@tollway/accounts';
import { createRedis } from '@tollway/service-kit';
import { startTcpLink, type TcpLink } from '@tollway/service-kit/testing';
import { createMetricsRegistry } from '@tollway/telemetry';
import { modelLeaseKey, RedisAdmission } from '../../src/admission/redis-admission';
import type { AdmissionRequest } from '../../src/admission/admission.types';
import { EngineRegistry } from '../../src/engines';
import { GatewayMetrics } from '../../src/observability/gateway-metrics';
import { waitFor } from '../helpers/wait-for';

/**
 * A settlement is charged once, whatever the link to Redis does to it. The gateway's admission
 * connection reaches Redis through a link the test breaks: it loses the answer of a settlement
 * Redis ran, or the settlement itself; the batch goes again, and Redis applies it once. Past the
 * retry window it is given up, and counted.
 */
const prefix = `settle-retry-${randomUUID()}:`;
// Short, to keep the test short; long enough that a loaded CI machine does not time out the calls
// the test does not break.
const REPLY_TIMEOUT_MS = 1000;
const redis = new Redis('redis://127.0.0.1:6379');
const store = createAccountStore({ redis, prefix });
let link: TcpLink;
let gatewayRedis: Redis;
let admissionRedis: Redis;

beforeAll(async () => {
  link = await startTcpLink(6379);
  // The gateway's connections (main.ts, accounts-wiring.ts), with a short reply timeout.
  gatewayRedis = createRedis(`redis://127.0.0.1:${link.port}`, { name: 'settle-retry', failFast: true });
  admissionRedis = gatewayRedis.duplicate({
    connectionName: 'settle-retry:admission',
    commandTimeout: REPLY_TIMEOUT_MS,
  });
});

afterAll(async () => {
  admissionRedis.disconnect();
  gatewayRedis.disconnect();
  await link.close();
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
});

function admissionWith(retryWindowMs?: number): RedisAdmission {
  return new RedisAdmission({
    redis: admissionRedis,
    prefix,
    admitTimeoutMs: 2_000,
    settlementRetryWindowMs: retryWindowMs,
  });
}

async function organization() {
  return store.createOrganization({
    name: 'retry',
    budgets: { requests: 1000, input_tokens: 1_000_000, output_tokens: 1_000_000 },
    credit: 10,
  });
}

function request(orgId: string): AdmissionRequest {
  return {
    principal: { orgId, keyId: 'key_retry' },
    modelId: `retry-model-${orgId}`,
    inputTokens: 1000,
    reservedOutputTokens: 2000,
    capacity: 64,
    // 1000 input at $1/M and 1000 output at $2/M: $0.003 a request.
    pricePerMillion: { input: 1, output: 2 },
  };
}

/**
 * Credit left, usage recorded this minute and the one before, and leases held, read from Redis
 * directly. The minute before counts too: a settlement is recorded in the minute its request
 * ended, and a test that ends a second or more later may have crossed into the next.
 */
async function ledger(orgId: string) {
  const credit = Number(await redis.hget(store.keys.org(orgId), 'credit'));
  const minute = Math.floor(Date.now() / 60_000);
  let requests = 0;
  let outputTokens = 0;
  for (const m of [minute - 1, minute]) {
    const usage = await redis.hmget(store.keys.usageMinute(orgId, m), 'requests', 'output_tokens');
    requests += Number(usage[0] ?? 0);
    outputTokens += Number(usage[1] ?? 0);
  }
  const leases = await redis.zcard(modelLeaseKey(prefix, request(orgId).modelId));
  return { credit, requests, outputTokens, leases };
}

async function ready(): Promise<void> {
  await waitFor(() => admissionRedis.status === 'ready', 5_000);
}

test('a settlement Redis ran, whose answer was lost with the connection, is sent again and charged once', async () => {
  const admission = admissionWith();
  const org = await organization();
  await ready();
  const ticket = await admission.admit(request(org.id));
  expect((await ledger(org.id)).leases).toBe(1);

  link.dropReplies();
  const settled = ticket.settle({ prompt_tokens: 1000, completion_tokens: 1000 });
  // Redis ran it: the credit moved. Its answer never comes back; then the connection breaks.
  await waitFor(async () => (await ledger(org.id)).credit < 10, 5_000);
  link.cut();
  await settled;

  await waitFor(() => admission.stats().settlementRetries >= 1, 5_000);
  await admission.close();
  expect(await ledger(org.id)).toEqual({ credit: 9.997, requests: 1, outputTokens: 1000, leases: 0 });
  expect(admission.stats()).toMatchObject({ settlementsLost: 0 });
});

/** Admits a request of a new organization and settles it while its settlement is lost on its way; then the link breaks. */
async function settleLostOnItsWay(admission: RedisAdmission) {
  const org = await organization();
  await ready();
  const ticket = await admission.admit(request(org.id));
  link.dropRequests();
  const settled = ticket.settle({ prompt_tokens: 1000, completion_tokens: 1000 });
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect((await ledger(org.id)).credit).toBe(10);
  link.cut();
  await settled;
  return org;
}

test('a settlement lost on its way to Redis is sent again and charged once', async () => {
  const admission = admissionWith();
  const org = await settleLostOnItsWay(admission);
  await waitFor(async () => (await ledger(org.id)).credit < 10, 5_000);
  await admission.close();
  expect(await ledger(org.id)).toEqual({ credit: 9.997, requests: 1, outputTokens: 1000, leases: 0 });
  expect(admission.stats()).toMatchObject({ settlementsLost: 0 });
  expect(admission.stats().settlementRetries).toBeGreaterThanOrEqual(1);
});

test('settlements of many requests over a link that keeps breaking are each charged once', async () => {
  const admission = admissionWith();
  const org = await organization();
  await ready();
  const tickets = await Promise.all(Array.from({ length: 40 }, () => admission.admit(request(org.id))));
  // Half the settlements go while answers are lost, the other half while requests are.
  link.dropReplies();
  const first = tickets.slice(0, 20).map((t) => t.settle({ prompt_tokens: 1000, completion_tokens: 1000 }));
  await new Promise((resolve) => setTimeout(resolve, 50));
  link.cut();
  await ready();
  link.dropRequests();
  const second = tickets.slice(20).map((t) => t.settle({ prompt_tokens: 1000, completion_tokens: 1000 }));
  await new Promise((resolve) => setTimeout(resolve, 50));
  link.cut();
  await Promise.all([...first, ...second]);

  await waitFor(async () => (await ledger(org.id)).requests === 40 && (await ledger(org.id)).leases === 0, 10_000);
  await admission.close();
  const after = await ledger(org.id);
  expect(after).toEqual({ credit: expect.any(Number), requests: 40, outputTokens: 40_000, leases: 0 });
  expect(after.credit).toBeCloseTo(10 - 40 * 0.003, 9);
  expect(admission.stats().settlementsLost).toBe(0);
}, 20_000);

test('past its retry window a settlement is given up and counted, and nothing is charged later', async () => {
  // A first sending times out at 1 s and goes again 250 ms later; the second one ends past the window.
  const admission = admissionWith(2_500);
  const org = await organization();
  await ready();
  const ticket = await admission.admit(request(org.id));

  // Nothing reaches Redis: every sending times out.
  link.dropRequests();
  await ticket.settle({ prompt_tokens: 1000, completion_tokens: 1000 });
  await waitFor(() => admission.stats().settlementsLost === 1, 5_000);
  expect(admission.stats().settlementRetries).toBeGreaterThanOrEqual(1);
  link.cut();
  await ready();
  await admission.close();
  await new Promise((resolve) => setTimeout(resolve, 300));
  // Not charged, and the lease waits for its expiry, as after a crash.
  expect(await ledger(org.id)).toEqual({ credit: 10, requests: 0, outputTokens: 0, leases: 1 });

  // What an operator sees.
  const engines = new EngineRegistry({ connections: 1, timeoutMs: 1000 });
  const metrics = new GatewayMetrics(createMetricsRegistry('settle-retry'), {
    engines,
    admissionStats: () => admission.stats(),
  });
  const exposition = await metrics.registry.metrics();
  await engines.close();
  expect(exposition).toMatch(/^tollway_settlements_lost_total\{service="settle-retry"\} 1$/m);
  const retries = /^tollway_settlement_retries_total\{service="settle-retry"\} (\d+)$/m.exec(exposition);
  expect(Number(retries?.[1])).toBe(admission.stats().settlementRetries);
});

test('graceful shutdown sends again a settlement lost on its way', async () => {
  const admission = admissionWith();
  const org = await settleLostOnItsWay(admission);
  // Shutting down at once: close() waits for the batch to go again rather than dropping it.
  await admission.close();
  expect(await ledger(org.id)).toEqual({ credit: 9.997, requests: 1, outputTokens: 1000, leases: 0 });
});
