import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { scriptCallsDuring } from '../helpers/script-calls';
import { accountKeys, createAccountStore, deleteKeysWithPrefix } from '@tollway/accounts';
import { modelLeaseKey, RedisAdmission } from '../../src/admission/redis-admission';
import type { AdmissionRequest, AdmissionTicket } from '../../src/admission/admission.types';
import type { LocalQuotaOptions } from '../../src/admission/local-quota';
import { wireAccounts } from '../../src/admission/accounts-wiring';
import { loadGatewayConfig } from '../../src/config';
import { createLogger } from '@tollway/service-kit';
import { waitFor } from '../helpers/wait-for';

/**
 * Local admission (local-quota.ts): replicas admit from quota slices and capacity blocks leased
 * from Redis. These tests hold it to the same exactness as admission in Redis: nothing is ever
 * over-admitted, one replica alone is exact to the request, and what replicas hold comes back.
 * The clock is injected and frozen unless a test moves it, so buckets refill only when told.
 */
const prefix = `test-${randomUUID()}:`;
const redis = new Redis('redis://127.0.0.1:6379');
const keys = accountKeys(prefix);
let now = Date.UTC(2026, 0, 1, 12, 0, 30);
const clock = () => now;
const store = createAccountStore({ redis, prefix, now: clock });
const replicas: RedisAdmission[] = [];
const connections: Redis[] = [redis];

/** A gateway replica: its own connections, local admission on. */
async function replica(localQuota: LocalQuotaOptions = {}): Promise<RedisAdmission> {
  const own = new Redis('redis://127.0.0.1:6379');
  const subscriber = new Redis('redis://127.0.0.1:6379');
  connections.push(own, subscriber);
  const admission = new RedisAdmission({ redis: own, prefix, now: clock, localQuota, subscriber });
  await admission.ready();
  replicas.push(admission);
  return admission;
}

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.close()));
  await deleteKeysWithPrefix(redis, prefix);
  for (const connection of connections) connection.disconnect();
});

const BIG = { requests: 1024, input_tokens: 1_000_000, output_tokens: 1_000_000 };

async function org(budgets = BIG, credit = 100) {
  return store.createOrganization({ name: 'local', budgets, credit });
}

function request(orgId: string, overrides: Partial<AdmissionRequest> = {}): AdmissionRequest {
  return {
    principal: { orgId, keyId: 'key_x' },
    modelId: 'local/a',
    inputTokens: 10,
    reservedOutputTokens: 100,
    capacity: null,
    pricePerMillion: { input: 1, output: 2 },
    ...overrides,
  };
}

type Outcome = PromiseSettledResult<AdmissionTicket>;
const admitted = (outcomes: Outcome[]) =>
  outcomes.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : ([] as AdmissionTicket[])));

async function burst(admission: RedisAdmission, n: number, make: () => AdmissionRequest): Promise<Outcome[]> {
  return Promise.allSettled(Array.from({ length: n }, () => admission.admit(make())));
}

describe('local admission from quota slices', () => {
  it('admits from a slice without a round trip, its headers counting down exactly as Redis would', async () => {
    const a = await replica();
    const o = await org();
    const tickets: AdmissionTicket[] = [];
    const calls = await scriptCallsDuring(redis, o.id, async () => {
      for (let i = 0; i < 12; i++) tickets.push(await a.admit(request(o.id)));
    });
    // The first request went to Redis and brought back a slice (1024/64 = 16 requests); the other
    // eleven were admitted from it.
    expect(calls).toBe(1);
    expect(tickets.map((t) => t.headers['x-ratelimit-remaining-requests'])).toEqual(
      Array.from({ length: 12 }, (_, i) => String(1023 - i)),
    );
    // Output is the token bucket nearer its limit: 100 reserved per request.
    expect(tickets.map((t) => t.headers['x-ratelimit-remaining-tokens'])).toEqual(
      Array.from({ length: 12 }, (_, i) => String(1_000_000 - 100 * (i + 1))),
    );
    expect(tickets[11]!.headers).toMatchObject({
      'x-ratelimit-limit-requests': '1024',
      'x-ratelimit-limit-tokens': '1000000',
      // 12 of 1024 per minute: 12 × 60000/1024 ms ≈ 703.125 ms to refill.
      'x-ratelimit-reset-requests': '704ms',
    });
    // Released requests go back into the slice: the next one sees the whole budget again.
    await Promise.all(tickets.map((t) => t.release()));
    expect((await a.admit(request(o.id))).headers['x-ratelimit-remaining-requests']).toBe('1023');
  });

  it('is exact on one replica: a burst of 1500 against a budget of 1024 admits exactly 1024', async () => {
    const a = await replica();
    const o = await org();
    // Even when Redis has just forgotten the scripts (restart, SCRIPT FLUSH): the slice given back
    // must still reach the buckets ahead of the second tries written behind it.
    await redis.script('FLUSH');
    const outcomes = await burst(a, 1500, () => request(o.id));
    expect(admitted(outcomes)).toHaveLength(1024);
    const refused = outcomes.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect(refused.reason).toMatchObject({ status: 429, code: 'rate_limit_exceeded' });
    await expect(a.admit(request(o.id))).rejects.toMatchObject({ status: 429 });
  });

  it('never over-admits across replicas, and what they held comes back to the buckets', async () => {
    const fleet = await Promise.all([replica(), replica(), replica()]);
    const o = await org();
    const outcomes = await Promise.all(fleet.map((r) => burst(r, 500, () => request(o.id))));
    const first = outcomes.reduce((sum, list) => sum + admitted(list).length, 0);
    expect(first).toBeLessThanOrEqual(1024);
    // Slices still held elsewhere can only have made a replica refuse early; once given back
    // (shutdown here; expiry within a second in service), the rest of the budget is admitted.
    await Promise.all(fleet.map((r) => r.close()));
    const after = await replica();
    const second = admitted(await burst(after, 1500, () => request(o.id))).length;
    expect(first + second).toBe(1024);
  });

  it('refills a bucket only up to the budget minus the slices held: bucket and slices never exceed it', async () => {
    const holder = await replica({ useMs: 120_000 });
    const other = await replica();
    const o = await org();
    await holder.admit(request(o.id)); // 1 admitted, a slice of 16 held
    now += 30_000; // half a minute: the bucket refills by 512, but only up to 1024 - 16
    const outcomes = await burst(other, 2000, () => request(o.id));
    expect(admitted(outcomes)).toHaveLength(1008);
    // The holder still has its 16: together exactly one budget since the bucket was full again.
    let fromSlice = 0;
    for (let i = 0; i < 20; i++) {
      try {
        await holder.admit(request(o.id));
        fromSlice += 1;
      } catch (err) {
        expect(err).toMatchObject({ status: 429 });
      }
    }
    expect(fromSlice).toBe(16);
  });

  it('forgets the slice of a replica that died once its lifetime and margin pass', async () => {
    const dead = await replica({ useMs: 120_000, marginMs: 5000 });
    const o = await org();
    await dead.admit(request(o.id)); // never given back: the replica "dies" holding 16
    expect(await redis.hlen(keys.slices(o.id))).toBe(1);
    now += 125_001; // past its lifetime in Redis; the buckets had time to refill
    const survivor = await replica();
    expect(admitted(await burst(survivor, 1500, () => request(o.id)))).toHaveLength(1024);
  });

  it('takes no slice for a small budget: every request is admitted in Redis, exactly', async () => {
    const a = await replica();
    const o = await org({ requests: 100, input_tokens: 1_000_000, output_tokens: 1_000_000 });
    let outcomes: Outcome[] = [];
    const calls = await scriptCallsDuring(redis, o.id, async () => {
      for (let i = 0; i < 5; i++) outcomes.push(...(await burst(a, 1, () => request(o.id))));
      outcomes = outcomes.concat(await burst(a, 300, () => request(o.id)));
    });
    expect(calls).toBe(7); // 5 one by one, then 300 in two calls of at most 200
    expect(admitted(outcomes)).toHaveLength(100);
    expect(await redis.hlen(keys.slices(o.id))).toBe(0);
  });

  it('holds a slice’s credit allowance: no slice when the credit left does not cover twice its allowance', async () => {
    const a = await replica();
    // A slice would hold 15 625 input + 15 625 output tokens: 0.046875 USD at these prices.
    const poor = await org(BIG, 0.09);
    const calls = await scriptCallsDuring(redis, poor.id, async () => {
      for (let i = 0; i < 4; i++) await a.admit(request(poor.id));
    });
    expect(calls).toBe(4);
    expect(await redis.hlen(keys.slices(poor.id))).toBe(0);

    const rich = await org(BIG, 0.1);
    await a.admit(request(rich.id));
    const [value] = Object.values(await redis.hgetall(keys.slices(rich.id)));
    expect(value!.split('|').slice(0, 4)).toEqual(['16', '15625', '15625', '0.046875']);
  });

  it('sends slices back once spend elsewhere leaves the credit short of their allowances', async () => {
    const holder = await replica();
    const elsewhere = new RedisAdmission({ redis, prefix, now: clock });
    const o = await org(BIG, 0.1);
    await holder.admit(request(o.id)); // a slice holding 0.046875 USD of the 0.1
    expect(await redis.hlen(keys.slices(o.id))).toBe(1);
    const costly = await elsewhere.admit(request(o.id, { inputTokens: 0, reservedOutputTokens: 30_000 }));
    await costly.settle({ prompt_tokens: 0, completion_tokens: 30_000 }); // 0.06 USD: 0.04 left < 0.046875
    await waitFor(async () => (await redis.hlen(keys.slices(o.id))) === 0);
    await elsewhere.close();
  });

  it('sends a request costlier than what is left of the slice to Redis, after giving the slice back', async () => {
    const a = await replica();
    const o = await org();
    await a.admit(request(o.id)); // slice: 16 requests, 15 625 output tokens
    const big = request(o.id, { reservedOutputTokens: 20_000 });
    const calls = await scriptCallsDuring(redis, o.id, async () => {
      const ticket = await a.admit(big);
      // Bucket: 1024 - 1 - 1 = 1022 requests; the unused slice went back first.
      expect(ticket.headers['x-ratelimit-remaining-requests']).toBe('1022');
      expect(ticket.headers['x-ratelimit-remaining-tokens']).toBe(String(1_000_000 - 100 - 20_000));
    });
    expect(calls).toBe(2); // the return, then the admission (asking for no new slice: 20 000 × 8 > 15 625)
  });

  it('settles spend and usage of locally admitted requests, refunding their unused reservation into the slice', async () => {
    const a = await replica();
    const o = await org(BIG, 100);
    const tickets: AdmissionTicket[] = [];
    for (let i = 0; i < 5; i++) tickets.push(await a.admit(request(o.id)));
    await Promise.all(tickets.map((t) => t.settle({ prompt_tokens: 10, completion_tokens: 40 })));
    const usage = (await store.getUsage(o.id))!;
    expect(usage.totals).toMatchObject({ requests: 5, input_tokens: 50, output_tokens: 200 });
    const org1 = (await store.getOrganization(o.id))!;
    expect(org1.credit).toBeCloseTo(100 - (50 * 1 + 200 * 2) / 1e6, 9);
    // 5 requests with 40 of 100 output tokens used: the next sees 1_000_000 - 200 - 100.
    const next = await a.admit(request(o.id));
    expect(next.headers['x-ratelimit-remaining-tokens']).toBe(String(1_000_000 - 200 - 100));
    expect(next.headers['x-ratelimit-remaining-requests']).toBe('1018');
  });

  it('writes spend and usage of locally admitted requests with a write that goes anyway, not with calls of their own', async () => {
    // A call of its own would land in the middle of other requests (the 1-connection tail, see the
    // admission README): spend waits up to 1 s, covered by the slice's allowance, and leaves with
    // the slice's return at the latest.
    const a = await replica();
    const o = await org(BIG, 100);
    const first = await a.admit(request(o.id)); // admitted in Redis, brings the slice
    await first.settle({ prompt_tokens: 10, completion_tokens: 10 }); // a lease-or-refund settlement: at once
    const local = await Promise.all(Array.from({ length: 5 }, () => a.admit(request(o.id))));
    let settled = 0;
    const meanwhile = await scriptCallsDuring(redis, o.id, async () => {
      for (const ticket of local)
        void ticket.settle({ prompt_tokens: 10, completion_tokens: 50 }).then(() => settled++);
      // Longer than a sweep of the slices (every 250 ms), which kicks the admit batcher.
      await new Promise((resolve) => setTimeout(resolve, 400));
    });
    expect(meanwhile).toBe(0);
    expect(settled).toBe(0);
    const atReturn = await scriptCallsDuring(redis, o.id, async () => {
      now += 1000; // the slice's time is up: the next sweep gives it back
      await waitFor(async () => settled === 5);
    });
    expect(atReturn).toBe(2); // the return script, and the settlement riding in the same write
    const usage = (await store.getUsage(o.id))!;
    expect(usage.totals).toMatchObject({ requests: 6, input_tokens: 60, output_tokens: 260 });
    expect((await store.getOrganization(o.id))!.credit).toBeCloseTo(100 - (60 * 1 + 260 * 2) / 1e6, 9);
  });

  it('gives the slice back when the organization changes: the new budget holds at once', async () => {
    const a = await replica();
    const o = await org();
    await a.admit(request(o.id));
    expect(await redis.hlen(keys.slices(o.id))).toBe(1);
    await store.updateOrganization(o.id, { budgets: { requests: 5 } });
    await waitFor(async () => (await redis.hlen(keys.slices(o.id))) === 0);
    expect(admitted(await burst(a, 20, () => request(o.id)))).toHaveLength(5);
  });

  it('admits nothing locally while the organization-change channel is down', async () => {
    const own = new Redis('redis://127.0.0.1:6379');
    const subscriber = new Redis('redis://127.0.0.1:6379', { autoResubscribe: false, retryStrategy: () => null });
    connections.push(own, subscriber);
    const a = new RedisAdmission({ redis: own, prefix, now: clock, localQuota: {}, subscriber });
    replicas.push(a);
    await a.ready();
    const o = await org();
    await a.admit(request(o.id));
    expect(await redis.hlen(keys.slices(o.id))).toBe(1);
    subscriber.disconnect();
    await waitFor(async () => (await redis.hlen(keys.slices(o.id))) === 0);
    const calls = await scriptCallsDuring(redis, o.id, async () => {
      for (let i = 0; i < 3; i++) await a.admit(request(o.id));
    });
    expect(calls).toBe(3);
  });
});

describe('local admission from capacity blocks', () => {
  it('is exact on one replica: 300 concurrent requests against a capacity of 128 admit exactly 128', async () => {
    const a = await replica();
    const o = await org({ requests: 100_000, input_tokens: 100_000_000, output_tokens: 100_000_000 });
    const modelId = `cap/${o.id}`;
    const outcomes = await burst(a, 300, () => request(o.id, { modelId, capacity: 128 }));
    const tickets = admitted(outcomes);
    expect(tickets).toHaveLength(128);
    const refused = outcomes.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect(refused.reason).toMatchObject({ status: 429, code: 'provider_overloaded' });
    expect(await redis.zcard(modelLeaseKey(prefix, modelId))).toBe(128);

    // Finished requests free their slots; a block's leases stay with the replica while it uses
    // them, and all of them go back when it shuts down.
    await Promise.all(tickets.map((t) => t.settle({ prompt_tokens: 10, completion_tokens: 1 })));
    const again = admitted(await burst(a, 300, () => request(o.id, { modelId, capacity: 128 })));
    expect(again).toHaveLength(128);
    await Promise.all(again.map((t) => t.release()));
    await a.close();
    expect(await redis.zcard(modelLeaseKey(prefix, modelId))).toBe(0);
  });

  it('serves a model from a block without a round trip, and gives the idle block back', async () => {
    const a = await replica({ blockIdleMs: 1000 });
    const o = await org({ requests: 100_000, input_tokens: 100_000_000, output_tokens: 100_000_000 });
    const modelId = `block/${o.id}`;
    const leases = modelLeaseKey(prefix, modelId);
    const first = await a.admit(request(o.id, { modelId, capacity: 64 }));
    // Its own lease, plus a block of 64/16 = 4.
    expect(await redis.zcard(leases)).toBe(5);
    const calls = await scriptCallsDuring(redis, o.id, async () => {
      const local = await Promise.all([1, 2, 3, 4].map(() => a.admit(request(o.id, { modelId, capacity: 64 }))));
      await Promise.all(local.map((t) => t.release()));
    });
    expect(calls).toBe(0);
    await first.release();
    expect(await redis.zcard(leases)).toBe(4);
    now += 1001;
    await waitFor(async () => (await redis.zcard(leases)) === 0);
  });
});

describe('ADMISSION_SLICES', () => {
  it('is on by default and can be turned off: then every request is admitted in Redis', async () => {
    const logger = createLogger({ service: 'local-quota-test', silent: true });
    const callsFor = async (env: Record<string, string>) => {
      const config = loadGatewayConfig({ env: { REDIS_PREFIX: prefix, ...env }, argv: [] });
      const own = new Redis('redis://127.0.0.1:6379');
      connections.push(own);
      const wiring = await wireAccounts(config, own, logger);
      const o = await org();
      // The change channel is subscribed asynchronously: let it come up before counting.
      await new Promise((resolve) => setTimeout(resolve, 100));
      const calls = await scriptCallsDuring(redis, o.id, async () => {
        for (let i = 0; i < 5; i++) await wiring.admission.admit(request(o.id));
      });
      await wiring.close();
      return { config, calls };
    };
    const on = await callsFor({});
    expect(on.config.admissionSlices).toBe(true);
    expect(on.calls).toBe(1);
    const off = await callsFor({ ADMISSION_SLICES: 'false' });
    expect(off.config.admissionSlices).toBe(false);
    expect(off.calls).toBe(5);
    expect(() => loadGatewayConfig({ env: { ADMISSION_SLICE_MS: '5' }, argv: [] })).toThrow(/ADMISSION_SLICE_MS/);
  });
});

describe('static keys beside organization keys', () => {
  it('accepts static keys, including one shaped like an organization key, and organization keys', async () => {
    const logger = createLogger({ service: 'local-quota-test', silent: true });
    const orgShaped = `tw-${'s'.repeat(43)}`;
    const config = loadGatewayConfig({
      env: { REDIS_PREFIX: prefix, API_KEYS: `plain-static-key,${orgShaped}` },
      argv: [],
    });
    const own = new Redis('redis://127.0.0.1:6379');
    connections.push(own);
    const wiring = await wireAccounts(config, own, logger);
    const o = await org();
    const created = (await store.createKey(o.id))!;
    expect(await wiring.authenticator.authenticate('plain-static-key')).toEqual({
      orgId: 'config',
      keyId: 'config-key-0',
    });
    expect(await wiring.authenticator.authenticate(orgShaped)).toEqual({ orgId: 'config', keyId: 'config-key-1' });
    expect(await wiring.authenticator.authenticate(created.key)).toEqual({
      orgId: o.id,
      keyId: created.id,
      role: 'standard',
    });
    expect(await wiring.authenticator.authenticate(`tw-${'x'.repeat(43)}`)).toBeNull();
    // Admin keys manage an organization; they do not call models.
    const admin = (await store.createKey(o.id, 'admin', 'admin'))!;
    expect(await wiring.authenticator.authenticate(admin.key)).toBeNull();
    await wiring.close();
  });
});
