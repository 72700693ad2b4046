import { Redis } from 'ioredis';
import { createAccountStore } from '@tollway/accounts';
import { createLogger, ServiceError } from '@tollway/service-kit';
import { startPrivateRedis, type PrivateRedis } from '@tollway/service-kit/testing';
import { ADMISSION_REPLY_DEADLINE_MS } from '../../src/admission/accounts-wiring';
import { modelLeaseKey, RedisAdmission } from '../../src/admission/redis-admission';
import type { AdmissionRequest } from '../../src/admission/admission.types';
import { waitFor } from '../helpers/wait-for';

/**
 * An admission whose answer comes late. A request waits a bounded time for Redis, then gets a 503;
 * the admit script may still run (a hung Redis that wakes up, a slow link), and what it took is
 * given back when its answer comes, so a 503 costs the organization nothing. And an answer that
 * came in time but sat unread behind a stalled event loop is taken, not turned into a 503.
 * A private Redis, so SIGSTOP hangs nobody else's tests.
 */
const prefix = 'late:';
const TIMEOUT_MS = 150;
let server: PrivateRedis;
let redis: Redis;
let admissionRedis: Redis;
let admission: RedisAdmission;
/** What admission logged at warn. */
const warnings: string[] = [];
const logger = createLogger({ service: 'late-answers', silent: true });
logger.warn = ((message: string) => {
  warnings.push(message);
  return logger;
}) as typeof logger.warn;

beforeAll(async () => {
  server = await startPrivateRedis();
  redis = new Redis(server.url);
  // Admission's connection as the gateway makes it (accounts-wiring.ts).
  admissionRedis = redis.duplicate({ commandTimeout: ADMISSION_REPLY_DEADLINE_MS });
  admission = new RedisAdmission({ redis: admissionRedis, prefix, admitTimeoutMs: TIMEOUT_MS, logger });
}, 30_000);

afterAll(async () => {
  server.resume();
  await admission.close();
  admissionRedis.disconnect();
  redis.disconnect();
  await server.stop();
});

const store = () => createAccountStore({ redis, prefix });

async function pinnedOrg(requests: number) {
  const org = await store().createOrganization({
    name: 'late',
    budgets: { requests, input_tokens: 100_000, output_tokens: 100_000 },
    credit: 100,
  });
  // No refill while the test runs: a full bucket stamped a minute ahead (as replicas.test.ts does).
  await redis.hset(store().keys.buckets(org.id), {
    requests,
    'requests:ts': Date.now() + 60_000,
    input_tokens: 100_000,
    'input_tokens:ts': Date.now() + 60_000,
    output_tokens: 100_000,
    'output_tokens:ts': Date.now() + 60_000,
  });
  return org;
}

function request(orgId: string, modelId: string): AdmissionRequest {
  return {
    principal: { orgId, keyId: 'key_late' },
    modelId,
    inputTokens: 10,
    reservedOutputTokens: 20,
    capacity: 4,
    pricePerMillion: { input: 1, output: 2 },
  };
}

async function balances(orgId: string): Promise<number[]> {
  const [requests, input, output] = await redis.hmget(
    store().keys.buckets(orgId),
    'requests',
    'input_tokens',
    'output_tokens',
  );
  return [Number(requests), Number(input), Number(output)];
}

describe('an admission answered late', () => {
  it('gets a 503 in bounded time, and what the script took goes back once its answer comes', async () => {
    const org = await pinnedOrg(10);
    const modelId = 'test/late';
    server.pause();
    const started = Date.now();
    const refused = await admission.admit(request(org.id, modelId)).then(
      () => null,
      (err: unknown) => err,
    );
    const waited = Date.now() - started;
    expect(refused).toBeInstanceOf(ServiceError);
    expect((refused as ServiceError).status).toBe(503);
    expect(waited).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    expect(waited).toBeLessThan(TIMEOUT_MS + 1000);

    // Redis wakes up and runs the script the request no longer waits for: it takes a request, the
    // tokens and a lease, and the answer gives them back.
    server.resume();
    await waitFor(() => warnings.includes('admission answered after its request was refused 503; released'), 5000);
    await waitFor(async () => (await balances(org.id)).join() === '10,100000,100000', 5000);
    await waitFor(async () => (await redis.zcard(modelLeaseKey(prefix, modelId))) === 0, 5000);

    // Admission works as before: the next request is charged once.
    const ticket = await admission.admit(request(org.id, modelId));
    expect(ticket.headers['x-ratelimit-remaining-requests']).toBe('9');
    await ticket.release();
    await waitFor(async () => (await balances(org.id))[0] === 10, 5000);
  });

  it('takes an answer that sat unread behind a stalled event loop instead of refusing it', async () => {
    const org = await pinnedOrg(10);
    const pending = admission.admit(request(org.id, 'test/stalled'));
    // The batcher sends in the check phase of this turn; then the event loop stalls past the
    // timeout while the answer arrives (a long GC, a starved CPU).
    await new Promise((resolve) => setImmediate(resolve));
    const stallUntil = Date.now() + TIMEOUT_MS * 3;
    while (Date.now() < stallUntil) {
      // busy
    }
    const ticket = await pending;
    expect(ticket.headers['x-ratelimit-remaining-requests']).toBe('9');
    await ticket.release();
  });
});
