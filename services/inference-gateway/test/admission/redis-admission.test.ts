import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { createAccountStore, deleteKeysWithPrefix } from '@tollway/accounts';
import { parseRateLimitDuration, RateLimitHeaders } from '@tollway/contracts';
import { ServiceError } from '@tollway/service-kit';
import { modelLeaseKey, RedisAdmission } from '../../src/admission/redis-admission';
import type { AdmissionRequest } from '../../src/admission/admission.types';

const prefix = `test-${randomUUID()}:`;
const redis = new Redis('redis://127.0.0.1:6379');
let now = Date.UTC(2026, 0, 1, 12, 0, 0);
const clock = () => now;
const store = createAccountStore({ redis, prefix, now: clock });
const admission = new RedisAdmission({ redis, prefix, now: clock, leaseMs: 30_000, capacityRetryAfterMs: 750 });

afterAll(async () => {
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
});

async function org(budgets: { requests: number; input_tokens: number; output_tokens: number }, credit = 100) {
  return store.createOrganization({ name: 't', budgets, credit });
}

function request(orgId: string, overrides: Partial<AdmissionRequest> = {}): AdmissionRequest {
  return {
    principal: { orgId, keyId: 'key_x' },
    modelId: `m/${orgId}`,
    inputTokens: 10,
    reservedOutputTokens: 20,
    capacity: null,
    pricePerMillion: { input: 1, output: 2 },
    ...overrides,
  };
}

async function refusal(promise: Promise<unknown>): Promise<ServiceError> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ServiceError);
  return err as ServiceError;
}

describe('RedisAdmission budgets', () => {
  it('sends the six rate-limit headers with balances, the nearer token bucket and reset durations', async () => {
    const o = await org({ requests: 60, input_tokens: 1000, output_tokens: 100 });
    const ticket = await admission.admit(request(o.id, { inputTokens: 100, reservedOutputTokens: 50 }));
    expect(RateLimitHeaders.safeParse(ticket.headers).success).toBe(true);
    expect(ticket.headers).toEqual({
      'x-ratelimit-limit-requests': '60',
      'x-ratelimit-remaining-requests': '59',
      'x-ratelimit-reset-requests': '1s', // one request at 60/min refills in 1 s
      // output: 50 of 100 left (50%) is nearer its limit than input: 900 of 1000 (90%)
      'x-ratelimit-limit-tokens': '100',
      'x-ratelimit-remaining-tokens': '50',
      'x-ratelimit-reset-tokens': '30s',
    });
    await ticket.release();
  });

  it('refuses with 429 naming the empty budget, and refills continuously with time', async () => {
    const o = await org({ requests: 2, input_tokens: 1000, output_tokens: 1000 });
    await admission.admit(request(o.id));
    await admission.admit(request(o.id));
    const err = await refusal(admission.admit(request(o.id)));
    expect(err.status).toBe(429);
    expect(err.code).toBe('rate_limit_exceeded');
    expect(err.type).toBe('requests');
    // One request at 2/min refills in 30 s.
    expect(err.headers).toEqual({ 'retry-after': '30', 'retry-after-ms': '30000', 'x-should-retry': 'true' });

    now += 29_999;
    expect((await refusal(admission.admit(request(o.id)))).headers['retry-after-ms']).toBe('1');
    now += 1;
    const ticket = await admission.admit(request(o.id));
    expect(ticket.headers['x-ratelimit-remaining-requests']).toBe('0');
    now += 60_000;
    const full = await admission.admit(request(o.id));
    expect(full.headers['x-ratelimit-remaining-requests']).toBe('1');
  });

  it('names input_tokens and output_tokens refusals, with retry-after rounded up to whole seconds', async () => {
    const o = await org({ requests: 100, input_tokens: 600, output_tokens: 600 });
    await admission.admit(request(o.id, { inputTokens: 550, reservedOutputTokens: 1 }));
    const input = await refusal(admission.admit(request(o.id, { inputTokens: 51, reservedOutputTokens: 1 })));
    expect(input.type).toBe('input_tokens');
    // 1 token short at 10 tokens/s → 100 ms; retry-after rounds up to 1 s.
    expect(input.headers).toEqual({ 'retry-after': '1', 'retry-after-ms': '100', 'x-should-retry': 'true' });

    await admission.admit(request(o.id, { inputTokens: 1, reservedOutputTokens: 590 }));
    const output = await refusal(admission.admit(request(o.id, { inputTokens: 1, reservedOutputTokens: 25 })));
    expect(output.type).toBe('output_tokens');
    // 9 left of 600, 25 needed: 16 short at 10 tokens/s.
    expect(output.headers['retry-after-ms']).toBe('1600');
    expect(output.headers['retry-after']).toBe('2');
  });

  it('tells a request larger than a whole budget not to retry', async () => {
    const o = await org({ requests: 100, input_tokens: 500, output_tokens: 500 });
    const err = await refusal(admission.admit(request(o.id, { inputTokens: 501 })));
    expect(err.status).toBe(429);
    expect(err.type).toBe('input_tokens');
    expect(err.headers['x-should-retry']).toBe('false');
    expect(err.headers['retry-after']).toMatch(/^\d+$/);
    expect(err.message).toMatch(/can never be admitted/);
    // Nothing was taken by the refusal.
    const ticket = await admission.admit(request(o.id, { inputTokens: 500, reservedOutputTokens: 1 }));
    expect(ticket.headers['x-ratelimit-remaining-requests']).toBe('99');
  });

  it('caps a default output reservation at the output budget instead of refusing it', async () => {
    const o = await org({ requests: 100, input_tokens: 500, output_tokens: 300 });
    const ticket = await admission.admit(request(o.id, { reservedOutputTokens: 4096, reservationIsDefault: true }));
    expect(ticket.headers['x-ratelimit-remaining-tokens']).toBe('0');
    await ticket.settle({ prompt_tokens: 10, completion_tokens: 100 });
    const next = await admission.admit(request(o.id, { reservedOutputTokens: 100 }));
    expect(next.headers['x-ratelimit-remaining-tokens']).toBe('100');
  });

  it('refunds the unused output reservation at settlement and charges what was produced', async () => {
    const o = await org({ requests: 100, input_tokens: 10_000, output_tokens: 1000 });
    const ticket = await admission.admit(request(o.id, { inputTokens: 10, reservedOutputTokens: 800 }));
    expect(ticket.headers['x-ratelimit-remaining-tokens']).toBe('200');
    await ticket.settle({ prompt_tokens: 10, completion_tokens: 30 });
    await ticket.settle({ prompt_tokens: 10, completion_tokens: 30 }); // idempotent
    const next = await admission.admit(request(o.id, { inputTokens: 10, reservedOutputTokens: 1 }));
    expect(next.headers['x-ratelimit-remaining-tokens']).toBe('969');
  });

  it('release gives back the whole reservation including the request', async () => {
    const o = await org({ requests: 1, input_tokens: 100, output_tokens: 100 });
    const ticket = await admission.admit(request(o.id));
    await ticket.release();
    const again = await admission.admit(request(o.id));
    expect(again.headers['x-ratelimit-remaining-requests']).toBe('0');
  });
});

describe('RedisAdmission bucket edge cases', () => {
  it('clamps a balance to a lowered budget and refills to the raised one', async () => {
    const o = await org({ requests: 100, input_tokens: 1000, output_tokens: 1000 });
    await admission.admit(request(o.id));
    await store.updateOrganization(o.id, { budgets: { requests: 10 } });
    const lowered = await admission.admit(request(o.id));
    expect(lowered.headers['x-ratelimit-limit-requests']).toBe('10');
    expect(lowered.headers['x-ratelimit-remaining-requests']).toBe('9');
    await store.updateOrganization(o.id, { budgets: { requests: 20 } });
    now += 60_000;
    const raised = await admission.admit(request(o.id));
    expect(raised.headers['x-ratelimit-remaining-requests']).toBe('19');
  });

  it('refuses every request of a zero budget as never admissible', async () => {
    const o = await org({ requests: 0, input_tokens: 1000, output_tokens: 1000 });
    const err = await refusal(admission.admit(request(o.id)));
    expect(err).toMatchObject({ status: 429, type: 'requests' });
    expect(err.headers['x-should-retry']).toBe('false');
  });

  it('does not refill twice when a replica with a lagging clock writes after one ahead', async () => {
    const o = await org({ requests: 60, input_tokens: 1000, output_tokens: 1000 });
    const ahead = new RedisAdmission({ redis, prefix, now: () => now + 5000 });
    await ahead.admit(request(o.id)); // 59 left, stamped now + 5 s
    const lagging = await admission.admit(request(o.id)); // clock 5 s behind: no refill, stamp kept
    expect(lagging.headers['x-ratelimit-remaining-requests']).toBe('58');
    now += 5000;
    const again = await admission.admit(request(o.id)); // at the stamp: still nothing refilled
    expect(again.headers['x-ratelimit-remaining-requests']).toBe('57');
  });

  it('charges output beyond the reservation when the engine produced more', async () => {
    const o = await org({ requests: 100, input_tokens: 1000, output_tokens: 1000 });
    const ticket = await admission.admit(request(o.id, { reservedOutputTokens: 100 }));
    await ticket.settle({ prompt_tokens: 10, completion_tokens: 300 });
    const next = await admission.admit(request(o.id, { reservedOutputTokens: 100 }));
    expect(next.headers['x-ratelimit-remaining-tokens']).toBe('600');
  });
});

describe('RedisAdmission credit and usage', () => {
  it('settles a usage Redis could not take (NaN, 1e308, negative) as whole bounded counts, beside good ones in one batch', async () => {
    const budgets = { requests: 100, input_tokens: 1_000_000, output_tokens: 1_000_000 };
    const [bad, good] = [await org(budgets), await org(budgets)];
    const tickets = await Promise.all([
      admission.admit(request(bad.id, { inputTokens: 10, reservedOutputTokens: 10 })),
      admission.admit(request(bad.id, { inputTokens: 10, reservedOutputTokens: 10 })),
      admission.admit(request(good.id, { inputTokens: 10, reservedOutputTokens: 10 })),
    ]);
    await Promise.all([
      tickets[0]!.settle({ prompt_tokens: Number.NaN, completion_tokens: 1e308 }),
      tickets[1]!.settle({ prompt_tokens: -5, completion_tokens: 2.6 }),
      tickets[2]!.settle({ prompt_tokens: 10, completion_tokens: 7 }),
    ]);
    expect((await store.getUsage(good.id))?.totals).toMatchObject({ requests: 1, input_tokens: 10, output_tokens: 7 });
    expect((await store.getUsage(bad.id))?.totals).toMatchObject({
      requests: 2,
      input_tokens: 0,
      output_tokens: 1e9 + 3,
    });
    expect(Number.isFinite((await store.getOrganization(bad.id))?.credit)).toBe(true);
  });

  it('charges usage × price, records usage, and refuses with 402 once credit is gone', async () => {
    const o = await org({ requests: 100, input_tokens: 1_000_000, output_tokens: 1_000_000 }, 0.003);
    // 1000 input at $1/M + 1000 output at $2/M = $0.003
    const ticket = await admission.admit(request(o.id, { inputTokens: 1000, reservedOutputTokens: 1000 }));
    await ticket.settle({ prompt_tokens: 1000, completion_tokens: 1000 });
    expect((await store.getOrganization(o.id))?.credit).toBeCloseTo(0, 12);
    const err = await refusal(admission.admit(request(o.id)));
    expect(err.status).toBe(402);
    expect(err.code).toBe('insufficient_quota');
    expect(err.headers).toEqual({ 'x-should-retry': 'false' });

    const usage = await store.getUsage(o.id);
    expect(usage?.totals).toEqual({ requests: 1, input_tokens: 1000, output_tokens: 1000, spend: 0.003 });
    expect(usage?.by_model).toEqual([
      { model: `m/${o.id}`, requests: 1, input_tokens: 1000, output_tokens: 1000, spend: 0.003 },
    ]);

    await store.updateOrganization(o.id, { creditTopUp: 1 });
    await expect(admission.admit(request(o.id))).resolves.toBeDefined();
  });

  it('answers 401 for a principal whose organization was deleted', async () => {
    const o = await org({ requests: 100, input_tokens: 1000, output_tokens: 1000 });
    await store.deleteOrganization(o.id);
    const err = await refusal(admission.admit(request(o.id)));
    expect(err.status).toBe(401);
    expect(err.code).toBeUndefined();
  });
});

describe('RedisAdmission capacity', () => {
  it('refuses over capacity with provider_overloaded and frees a slot on settle', async () => {
    const o = await org({ requests: 100, input_tokens: 10_000, output_tokens: 10_000 });
    const req = request(o.id, { capacity: 2 });
    const a = await admission.admit(req);
    await admission.admit(req);
    const err = await refusal(admission.admit(req));
    expect(err.status).toBe(429);
    expect(err.code).toBe('provider_overloaded');
    expect(err.headers).toEqual({ 'retry-after': '1', 'retry-after-ms': '750', 'x-should-retry': 'true' });
    // A capacity refusal takes nothing from the budgets.
    await a.settle({ prompt_tokens: 10, completion_tokens: 20 });
    const c = await admission.admit(req);
    expect(c.headers['x-ratelimit-remaining-requests']).toBe('97');
  });

  it('lets a lease that was never renewed expire after the lease time', async () => {
    const o = await org({ requests: 100, input_tokens: 10_000, output_tokens: 10_000 });
    const req = request(o.id, { capacity: 1, modelId: `lease/${o.id}` });
    await admission.admit(req); // never settled: its "replica" died
    await refusal(admission.admit(req));
    now += 30_001;
    const next = await admission.admit(req);
    expect(await redis.zcard(modelLeaseKey(prefix, req.modelId))).toBe(1);
    await next.release();
    expect(await redis.zcard(modelLeaseKey(prefix, req.modelId))).toBe(0);
  });

  it('renews the lease of a request that runs longer than the lease time', async () => {
    const fast = new RedisAdmission({ redis, prefix, leaseMs: 150 });
    const o = await org({ requests: 100, input_tokens: 10_000, output_tokens: 10_000 });
    const req = request(o.id, { capacity: 1, modelId: `renew/${o.id}` });
    const ticket = await fast.admit(req);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await refusal(fast.admit(req))).code).toBe('provider_overloaded');
    await ticket.settle({ prompt_tokens: 1, completion_tokens: 1 });
    await (await fast.admit(req)).release();
  });
});

describe('reset durations', () => {
  it('parse back to the time until the bucket is full', async () => {
    const o = await org({ requests: 7, input_tokens: 1000, output_tokens: 1000 });
    const ticket = await admission.admit(request(o.id));
    expect(parseRateLimitDuration(ticket.headers['x-ratelimit-reset-requests']!)).toBe(Math.ceil(60_000 / 7));
  });
});
