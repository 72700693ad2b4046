import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { scriptCallsDuring } from '../helpers/script-calls';
import { accountKeys, createAccountStore, deleteKeysWithPrefix } from '@tollway/accounts';
import { modelLeaseKey, RedisAdmission } from '../../src/admission/redis-admission';
import { SettlementBatcher } from '../../src/admission/settlement-batcher';
import { ADMIT_LUA } from '../../src/admission/scripts/admit.lua';
import type { AdmissionRequest } from '../../src/admission/admission.types';

/**
 * Admissions of one event-loop turn share one script call (AdmitBatcher), and settlement is
 * group-committed (SettlementBatcher): requests that finish together share one script call. These
 * tests check that a batch decides and settles exactly what each request alone would, across
 * organizations, models, minutes and releases, in fewer round trips.
 */
const prefix = `test-${randomUUID()}:`;
const redis = new Redis('redis://127.0.0.1:6379');
let now = Date.UTC(2026, 0, 1, 12, 0, 30);
const clock = () => now;
const store = createAccountStore({ redis, prefix, now: clock });

const admission = new RedisAdmission({ redis, prefix, now: clock, leaseMs: 30_000 });

afterAll(async () => {
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
});

async function org(budgets = { requests: 1000, input_tokens: 100_000, output_tokens: 100_000 }, credit = 10) {
  return store.createOrganization({ name: 'batch', budgets, credit });
}

function request(orgId: string, overrides: Partial<AdmissionRequest> = {}): AdmissionRequest {
  return {
    principal: { orgId, keyId: 'key_x' },
    modelId: 'batch/a',
    inputTokens: 10,
    reservedOutputTokens: 100,
    capacity: null,
    pricePerMillion: { input: 1, output: 2 },
    ...overrides,
  };
}

describe('batched admission', () => {
  it('admits exactly the budget out of 25 requests sent in one turn, in one script call', async () => {
    const o = await org({ requests: 10, input_tokens: 100_000, output_tokens: 100_000 });
    let outcomes: Array<PromiseSettledResult<Awaited<ReturnType<typeof admission.admit>>>> = [];
    const calls = await scriptCallsDuring(redis, prefix, async () => {
      outcomes = await Promise.allSettled(Array.from({ length: 25 }, () => admission.admit(request(o.id))));
    });
    expect(calls).toBe(1);
    const admitted = outcomes.filter((r) => r.status === 'fulfilled');
    expect(admitted).toHaveLength(10);
    // Each admitted request saw the balance its predecessors left: 9, 8, … 0.
    const remaining = admitted.map((r) => r.value.headers['x-ratelimit-remaining-requests']);
    expect(remaining).toEqual(['9', '8', '7', '6', '5', '4', '3', '2', '1', '0']);
    for (const r of outcomes.slice(10)) {
      expect(r.status).toBe('rejected');
      expect((r as PromiseRejectedResult).reason).toMatchObject({ status: 429, code: 'rate_limit_exceeded' });
    }
  });

  it('splits a turn of 450 admissions into calls of at most 200, still exact', async () => {
    const o = await org({ requests: 300, input_tokens: 1_000_000, output_tokens: 1_000_000 });
    let outcomes: Array<PromiseSettledResult<Awaited<ReturnType<typeof admission.admit>>>> = [];
    const calls = await scriptCallsDuring(redis, prefix, async () => {
      outcomes = await Promise.allSettled(Array.from({ length: 450 }, () => admission.admit(request(o.id))));
    });
    expect(calls).toBe(3);
    expect(outcomes.filter((r) => r.status === 'fulfilled')).toHaveLength(300);
    expect(outcomes.slice(300).every((r) => r.status === 'rejected')).toBe(true);
    // Settling 300 at once: one call of the settle script, every reservation accounted for.
    const tickets = outcomes.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    await Promise.all(tickets.map((t) => t.settle({ prompt_tokens: 10, completion_tokens: 1 })));
    expect((await store.getUsage(o.id))!.totals).toMatchObject({ requests: 300, output_tokens: 300 });
  });

  it('decides each request of a mixed batch on its own: unknown org, no credit, capacity, admitted', async () => {
    const ok = await org();
    const broke = await org(undefined, 0);
    const modelId = `cap/${ok.id}`;
    const outcomes = await Promise.allSettled([
      admission.admit(request(ok.id, { modelId, capacity: 1 })),
      admission.admit(request('org_doesnotexist', { modelId })),
      admission.admit(request(broke.id)),
      admission.admit(request(ok.id, { modelId, capacity: 1 })),
    ]);
    expect(outcomes.map((r) => (r.status === 'fulfilled' ? 200 : (r.reason as { status: number }).status))).toEqual([
      200, 401, 402, 429,
    ]);
    expect((outcomes[3] as PromiseRejectedResult).reason).toMatchObject({ code: 'provider_overloaded' });
  });
});

describe('settlement riding with the next admission', () => {
  it("goes first: a client's next request, sent at once, finds the previous one's lease freed", async () => {
    const o = await org();
    const req = request(o.id, { modelId: `seq/${o.id}`, capacity: 1 });
    const first = await admission.admit(req);
    const settled = first.settle({ prompt_tokens: 10, completion_tokens: 5 });
    // Not awaited: the settlement is still queued when the next admission is asked for.
    const second = await admission.admit(req);
    await settled;
    await second.release();
  });

  it('waits while a settlement is on its way, then goes with the next admission or alone', async () => {
    const o = await org();
    const tickets = await Promise.all([1, 2, 3].map(() => admission.admit(request(o.id))));
    const calls = await scriptCallsDuring(redis, prefix, async () => {
      const first = tickets[0]!.settle({ prompt_tokens: 10, completion_tokens: 1 });
      // Next turn: the first settlement is on its way, so these two wait for it, together.
      await new Promise((resolve) => setImmediate(resolve));
      await Promise.all([
        first,
        tickets[1]!.settle({ prompt_tokens: 10, completion_tokens: 2 }),
        tickets[2]!.settle({ prompt_tokens: 10, completion_tokens: 3 }),
      ]);
    });
    expect(calls).toBe(2);
    expect((await store.getUsage(o.id))!.totals).toMatchObject({ requests: 3, output_tokens: 6 });
  });

  it('recovers when Redis lost its scripts (SCRIPT FLUSH): both run again from their source', async () => {
    const o = await org();
    const ticket = await admission.admit(request(o.id));
    const settled = ticket.settle({ prompt_tokens: 10, completion_tokens: 3 });
    await redis.script('FLUSH');
    const next = await admission.admit(request(o.id));
    await settled;
    await next.release();
    const usage = (await store.getUsage(o.id))!;
    expect(usage.totals).toMatchObject({ requests: 1, output_tokens: 3 });
  });
});

describe('order after Redis lost its scripts', () => {
  it('keeps a settlement ahead of the admission written behind it, right after SCRIPT FLUSH', async () => {
    const o = await org();
    const modelId = `flush/${o.id}`;
    const first = await admission.admit(request(o.id, { modelId, capacity: 1 }));
    await redis.script('FLUSH');
    // Redis has the admit script again (another replica used it) but not the settle script.
    await redis.script('LOAD', ADMIT_LUA);
    // In one turn: the settlement (freeing the only lease) is written first, the admission after.
    const settled = first.settle({ prompt_tokens: 10, completion_tokens: 1 });
    const second = await admission.admit(request(o.id, { modelId, capacity: 1 }));
    await settled;
    await second.release();
  });
});

describe('batched settlement', () => {
  it('settles 60 requests that finish together in far fewer script calls, with exact totals', async () => {
    const o = await org();
    const tickets = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        admission.admit(request(o.id, { modelId: i % 2 === 0 ? 'batch/a' : 'batch/b', capacity: 1000 })),
      ),
    );
    const calls = await scriptCallsDuring(redis, prefix, () =>
      Promise.all(tickets.map((t, i) => t.settle({ prompt_tokens: 10, completion_tokens: i }))),
    );
    expect(calls).toBe(1);

    const produced = (60 * 59) / 2;
    const usage = (await store.getUsage(o.id))!;
    expect(usage.totals).toMatchObject({ requests: 60, input_tokens: 600, output_tokens: produced });
    const byModel = Object.fromEntries(usage.by_model.map((m) => [m.model, m]));
    expect(byModel['batch/a']).toMatchObject({ requests: 30, output_tokens: (30 * 58) / 2 });
    expect(byModel['batch/b']).toMatchObject({ requests: 30, output_tokens: (30 * 60) / 2 });
    const spend = (600 * 1 + produced * 2) / 1e6;
    expect(usage.totals.spend).toBeCloseTo(spend, 12);
    expect((await store.getOrganization(o.id))!.credit).toBeCloseTo(10 - spend, 12);
    // Every lease freed; the output bucket holds budget − produced (the reservations came back).
    expect(await redis.zcard(modelLeaseKey(prefix, 'batch/a'))).toBe(0);
    expect(await redis.zcard(modelLeaseKey(prefix, 'batch/b'))).toBe(0);
    const next = await admission.admit(request(o.id, { inputTokens: 0, reservedOutputTokens: 1 }));
    expect(next.headers['x-ratelimit-remaining-requests']).toBe(String(1000 - 61));
    await next.release();
  });

  it('keeps organizations apart and gives a release back whole, request included', async () => {
    const a = await org({ requests: 10, input_tokens: 1000, output_tokens: 1000 });
    // b's input budget is large so that its token headers describe the output bucket.
    const b = await org({ requests: 10, input_tokens: 100_000, output_tokens: 1000 });
    const [a1, a2, b1] = await Promise.all([
      admission.admit(request(a.id)),
      admission.admit(request(a.id)),
      admission.admit(request(b.id, { inputTokens: 20, reservedOutputTokens: 200 })),
    ]);
    await Promise.all([
      a1!.settle({ prompt_tokens: 10, completion_tokens: 40 }),
      a2!.release(),
      b1!.settle({ prompt_tokens: 20, completion_tokens: 5 }),
    ]);
    const usageA = (await store.getUsage(a.id))!;
    const usageB = (await store.getUsage(b.id))!;
    expect(usageA.totals).toMatchObject({ requests: 1, input_tokens: 10, output_tokens: 40 });
    expect(usageB.totals).toMatchObject({ requests: 1, input_tokens: 20, output_tokens: 5 });
    const nextA = await admission.admit(request(a.id, { inputTokens: 0, reservedOutputTokens: 0 }));
    // a: 10 − 1 settled − 1 for this one (the released request came back).
    expect(nextA.headers['x-ratelimit-remaining-requests']).toBe('8');
    expect(nextA.headers['x-ratelimit-remaining-tokens']).toBe(String(1000 - 40));
    const nextB = await admission.admit(request(b.id, { inputTokens: 0, reservedOutputTokens: 0 }));
    expect(nextB.headers['x-ratelimit-remaining-tokens']).toBe(String(1000 - 5));
  });

  it('records each request in the minute it finished, even when settled in one call', async () => {
    const o = await org();
    const [first, second] = await Promise.all([admission.admit(request(o.id)), admission.admit(request(o.id))]);
    const settledFirst = first!.settle({ prompt_tokens: 10, completion_tokens: 1 });
    now += 60_000;
    const settledSecond = second!.settle({ prompt_tokens: 10, completion_tokens: 2 });
    await Promise.all([settledFirst, settledSecond]);
    const usage = (await store.getUsage(o.id))!;
    const outputs = usage.by_minute.map((m) => m.output_tokens);
    expect(outputs).toEqual([1, 2]);
  });

  it('frees the leases of a deleted organization and charges nothing', async () => {
    const o = await org();
    const ticket = await admission.admit(request(o.id, { modelId: `gone/${o.id}`, capacity: 5 }));
    await store.deleteOrganization(o.id);
    await ticket.settle({ prompt_tokens: 10, completion_tokens: 10 });
    expect(await redis.zcard(modelLeaseKey(prefix, `gone/${o.id}`))).toBe(0);
    expect(await redis.exists(`${prefix}{org:${o.id}}:org`)).toBe(0);
  });

  it('splits more than maxBatch queued settlements into several calls, losing none', async () => {
    const o = await org();
    const batcher = new SettlementBatcher({ redis, keys: accountKeys(prefix), now: clock, maxBatch: 10 });
    const calls = await scriptCallsDuring(redis, prefix, () =>
      Promise.all(
        Array.from({ length: 25 }, () =>
          batcher.add({
            orgId: o.id,
            modelId: 'batch/a',
            leaseKey: '',
            leaseId: '',
            taken: { input: 0, output: 0 },
            used: { input: 1, output: 2 },
            price: { input: 0, output: 0 },
            at: now,
          }),
        ),
      ),
    );
    expect(calls).toBe(3);
    expect((await store.getUsage(o.id))!.totals).toMatchObject({ requests: 25, input_tokens: 25, output_tokens: 50 });
  });

  it('writes what is still queued on close', async () => {
    const o = await org();
    const own = new RedisAdmission({ redis, prefix, now: clock });
    const ticket = await own.admit(request(o.id));
    void ticket.settle({ prompt_tokens: 10, completion_tokens: 7 });
    await own.close();
    const usage = (await store.getUsage(o.id))!;
    expect(usage.totals.output_tokens).toBe(7);
  });
});
