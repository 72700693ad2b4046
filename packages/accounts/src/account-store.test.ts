import { createHash, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { createAccountStore, DEFAULT_MAX_KEYS_PER_ORGANIZATION } from './account-store';
import { hashApiKey } from './api-key';
import { DEV_ORG_ID, ensureDevOrganization } from './dev-organization';
import { countSocketWrites, deleteKeysWithPrefix } from './test-redis';

const prefix = `test-${randomUUID()}:`;
const redis = new Redis('redis://127.0.0.1:6379', { lazyConnect: false });
let nowMs = Date.UTC(2026, 0, 1, 12, 0, 30);
const store = createAccountStore({ redis, prefix, now: () => nowMs });
const budgets = { requests: 10, input_tokens: 1000, output_tokens: 2000 };

afterAll(async () => {
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
});

describe('organizations', () => {
  it('creates, gets, lists, updates and deletes', async () => {
    const org = await store.createOrganization({ name: 'Acme', budgets, credit: 5 });
    expect(org.id).toMatch(/^org_[A-Za-z0-9]+$/);
    expect(org.created).toBe(Math.floor(nowMs / 1000));
    expect(await store.getOrganization(org.id)).toEqual(org);
    expect((await store.listOrganizations()).map((o) => o.id)).toContain(org.id);

    const updated = await store.updateOrganization(org.id, { budgets: { requests: 20 }, creditTopUp: 2.5 });
    expect(updated).toMatchObject({ name: 'Acme', budgets: { requests: 20, input_tokens: 1000 }, credit: 7.5 });

    expect(await store.deleteOrganization(org.id)).toBe(true);
    expect(await store.getOrganization(org.id)).toBeNull();
    expect(await store.deleteOrganization(org.id)).toBe(false);
    expect(await store.updateOrganization(org.id, { name: 'x' })).toBeNull();
    expect(await redis.exists(`${prefix}{org:${org.id}}:org`)).toBe(0);
  });

  it('refuses a duplicate or malformed id', async () => {
    await store.createOrganization({ id: 'fixed', name: 'A', budgets, credit: 0 });
    await expect(store.createOrganization({ id: 'fixed', name: 'B', budgets, credit: 0 })).rejects.toMatchObject({
      reason: 'conflict',
    });
    await expect(store.createOrganization({ id: 'bad id!', name: 'B', budgets, credit: 0 })).rejects.toMatchObject({
      reason: 'invalid_id',
    });
    expect((await store.getOrganization('fixed'))?.name).toBe('A');
  });

  it("retires a deleted organization's id: a new organization would inherit what the old one left under it", async () => {
    await store.createOrganization({ id: 'retired', name: 'Old owner', budgets, credit: 1 });
    expect(await store.deleteOrganization('retired')).toBe(true);
    await expect(
      store.createOrganization({ id: 'retired', name: 'New owner', budgets, credit: 1 }),
    ).rejects.toMatchObject({ reason: 'id_retired' });
    await expect(
      store.createOrganizationOnce({ id: 'retired', name: 'New owner', budgets, credit: 1 }, 'retired-create'),
    ).rejects.toMatchObject({ reason: 'id_retired' });
    expect(await store.getOrganization('retired')).toBeNull();
    expect((await store.listOrganizations()).map((o) => o.id)).not.toContain('retired');
    // Deleting a missing organization retires nothing: its id is still free.
    expect(await store.deleteOrganization('never-made')).toBe(false);
    expect((await store.createOrganization({ id: 'never-made', name: 'First', budgets, credit: 1 })).id).toBe(
      'never-made',
    );
    // Only a caller whose past it is (the quickstart's dev organization) takes the id again.
    const again = await store.createOrganization(
      { id: 'retired', name: 'Dev', budgets, credit: 1 },
      { reuseDeletedId: true },
    );
    expect(again.name).toBe('Dev');
    await store.deleteOrganization('retired');
    await expect(store.createOrganization({ id: 'retired', name: 'x', budgets, credit: 1 })).rejects.toMatchObject({
      reason: 'id_retired',
      orgId: 'retired',
    });
    // A refused create leaves nothing in the index, which every listing reads.
    expect(await redis.sismember(`${prefix}orgs`, 'retired')).toBe(0);
  });

  it('a delete of a missing organization never hides one created under that id at the same time', async () => {
    // Found by a black-box check: the delete that found nothing still took the id out of the
    // index, between the create's listing and its making, so no listing showed the new organization.
    const made: string[] = [];
    await Promise.all(
      Array.from({ length: 60 }, async (_, i) => {
        const id = `racing-${i}`;
        const [created] = await Promise.all([
          store.createOrganization({ id, name: 'Racing', budgets, credit: 1 }).catch(() => null),
          new Promise((resolve) => setTimeout(resolve, i % 3)).then(() => store.deleteOrganization(id)),
        ]);
        if (created && (await store.getOrganization(id))) made.push(id);
      }),
    );
    const listed = new Set((await store.listOrganizations()).map((o) => o.id));
    expect(made.filter((id) => !listed.has(id))).toEqual([]);
  });
});

describe('keys', () => {
  it('creates a key shown once, stored only as its SHA-256 hash, and revokes it', async () => {
    const org = await store.createOrganization({ name: 'Keys', budgets, credit: 1 });
    const created = await store.createKey(org.id, 'ci');
    expect(created).not.toBeNull();
    const { key, ...info } = created!;
    expect(key).toMatch(/^tw-[A-Za-z0-9_-]{43}$/);
    expect(info).toMatchObject({ org_id: org.id, name: 'ci', last4: key.slice(-4), revoked_at: null });

    const everything = await redis.keys(`${prefix}*`);
    for (const name of everything) {
      const type = await redis.type(name);
      const dump =
        type === 'hash'
          ? JSON.stringify(await redis.hgetall(name))
          : type === 'set'
            ? JSON.stringify(await redis.smembers(name))
            : '';
      expect(dump).not.toContain(key);
      expect(name).not.toContain(key);
    }
    expect(await redis.hget(`${prefix}apikey:${hashApiKey(key)}`, 'key_id')).toBe(info.id);

    expect(await store.listKeys(org.id)).toEqual([info]);
    const revoked = await store.revokeKey(info.id);
    expect(revoked?.revoked_at).toBe(Math.floor(nowMs / 1000));
    expect(await redis.exists(`${prefix}apikey:${hashApiKey(key)}`)).toBe(0);
    expect((await store.listKeys(org.id))?.[0]?.revoked_at).not.toBeNull();
    expect(await store.revokeKey('key_nope')).toBeNull();
    expect(await store.createKey('missing-org')).toBeNull();
    expect(await store.listKeys('missing-org')).toBeNull();
  });

  it('deleting an organization removes its keys from the index', async () => {
    const org = await store.createOrganization({ name: 'Gone', budgets, credit: 1 });
    const created = await store.createKey(org.id);
    await store.deleteOrganization(org.id);
    expect(await redis.exists(`${prefix}apikey:${hashApiKey(created!.key)}`)).toBe(0);
    expect(await store.getKey(created!.id)).toBeNull();
  });

  it('no key created while its organization is deleted stays usable, nor comes back with an org of the same id', async () => {
    // The keys the store answered with are the ones a client could hold; every one must be dead.
    const handedOut: string[] = [];
    for (let round = 0; round < 30; round++) {
      const id = `race${round}`;
      await store.createOrganization({ id, name: 'Race', budgets, credit: 1 });
      const creates = Array.from({ length: 12 }, (_, i) =>
        store.createKey(id, `k${i}`, i % 2 === 0 ? 'standard' : 'admin').catch(() => null),
      );
      // The deletion starts among the creations, as a DELETE sent among POSTs does: after a few
      // milliseconds, or (every other round, so that some keys are handed out however busy the
      // machine is) once one of the creations has been answered.
      const start =
        round % 2 === 0
          ? new Promise((resolve) => setTimeout(resolve, round % 4))
          : (creates[round % creates.length] as Promise<unknown>);
      const deletion = start.then(() => store.deleteOrganization(id));
      const [keys] = await Promise.all([Promise.all(creates), deletion]);
      for (const key of keys) if (key) handedOut.push(key.key);
      // The id is retired; made again anyway (as the quickstart's dev organization may be).
      await store.createOrganization({ id, name: 'Same id, new owner', budgets, credit: 1 }, { reuseDeletedId: true });
      expect(await store.listKeys(id)).toEqual([]);
    }
    expect(handedOut.length).toBeGreaterThan(0);
    for (const key of handedOut) expect(await redis.exists(`${prefix}apikey:${hashApiKey(key)}`)).toBe(0);
    // Nothing of them left in the key-to-org index either.
    const index = await redis.hgetall(`${prefix}key-orgs`);
    expect(Object.values(index).filter((orgId) => orgId.startsWith('race'))).toEqual([]);
  });
});

describe('the cap on keys per organization', () => {
  const capped = createAccountStore({ redis, prefix, now: () => nowMs, maxKeysPerOrganization: 5 });

  /** An organization holding the cap's five keys, k0-k4. */
  async function fullOrganization(name: string) {
    const org = await capped.createOrganization({ name, budgets, credit: 1 });
    const made = [];
    for (let i = 0; i < 5; i++) made.push((await capped.createKey(org.id, `k${i}`))!);
    return { org, made };
  }

  /** Revokes each key with the clock `ms` after now. */
  async function revokeAt(revocations: Array<[string, number]>): Promise<void> {
    const started = nowMs;
    try {
      for (const [keyId, ms] of revocations) {
        nowMs = started + ms;
        await capped.revokeKey(keyId);
      }
    } finally {
      nowMs = started;
    }
  }

  it('refuses a key past the cap of live keys, leaving nothing of it behind', async () => {
    const { org, made } = await fullOrganization('Capped');
    const indexBefore = (await redis.keys(`${prefix}apikey:*`)).length;
    const refused = capped.createKey(org.id, 'one too many');
    await expect(refused).rejects.toMatchObject({ reason: 'key_limit_reached', orgId: org.id });
    await expect(capped.registerKey(org.id, `tw-${'Q'.repeat(43)}`, 'given')).rejects.toMatchObject({
      reason: 'key_limit_reached',
    });
    expect(await redis.scard(`${prefix}{org:${org.id}}:keys`)).toBe(5);
    expect((await redis.keys(`${prefix}apikey:*`)).length).toBe(indexBefore);
    expect((await capped.listKeys(org.id))?.map((k) => k.name).sort()).toEqual(['k0', 'k1', 'k2', 'k3', 'k4']);
    // A key registered already is answered as it is, cap or not (the dev key on every start).
    expect(await capped.registerKey(org.id, made[1]!.key, 'again')).toMatchObject({ id: made[1]!.id });
  });

  it('at the cap, gives a new key the place of the key revoked longest ago, and forgets that one', async () => {
    const { org, made } = await fullOrganization('Rotating');
    await revokeAt([
      [made[3]!.id, 0],
      [made[1]!.id, 5000],
    ]);
    const first = (await capped.createKey(org.id, 'new1'))!;
    expect((await capped.listKeys(org.id))?.map((k) => k.name).sort()).toEqual(['k0', 'k1', 'k2', 'k4', 'new1']);
    expect(await capped.getKey(made[3]!.id)).toBeNull();
    expect(await capped.revokeKey(made[3]!.id)).toBeNull();
    expect(await redis.hexists(`${prefix}key-orgs`, made[3]!.id)).toBe(0);
    expect(await redis.exists(`${prefix}{org:${org.id}}:key:${made[3]!.id}`)).toBe(0);
    await capped.createKey(org.id, 'new2');
    expect((await capped.listKeys(org.id))?.map((k) => k.name).sort()).toEqual(['k0', 'k2', 'k4', 'new1', 'new2']);
    // Five live keys: no revoked one left to give its place.
    await expect(capped.createKey(org.id, 'new3')).rejects.toMatchObject({ reason: 'key_limit_reached' });
    expect(await redis.scard(`${prefix}{org:${org.id}}:keys`)).toBe(5);
    expect(await capped.getKey(first.id)).toMatchObject({ name: 'new1', revoked_at: null });
  });

  it('forgets the key revoked longest ago to the millisecond, and leaves no secret of it working', async () => {
    const { org, made } = await fullOrganization('Same second');
    // Four revocations within one second, in the order 4, 2, 0, 3.
    await revokeAt([4, 2, 0, 3].map((i, n) => [made[i]!.id, 100 * (n + 1)]));
    const forgottenInOrder = [];
    for (let n = 0; n < 4; n++) {
      const before = new Set((await capped.listKeys(org.id))!.map((k) => k.id));
      await capped.createKey(org.id, `new${n}`);
      const after = new Set((await capped.listKeys(org.id))!.map((k) => k.id));
      forgottenInOrder.push(made.findIndex((k) => before.has(k.id) && !after.has(k.id)));
    }
    expect(forgottenInOrder).toEqual([4, 2, 0, 3]);
  });

  it('never forgets a key that still works: a revocation cut short leaves it unmarked, not marked and working', async () => {
    const { org, made } = await fullOrganization('Cut');
    // The state a revocation cut after its first step leaves: the key works nowhere, is not marked.
    const index = `${prefix}apikey:${hashApiKey(made[0]!.key)}`;
    await redis.del(index);
    expect((await capped.getKey(made[0]!.id))?.revoked_at).toBeNull();
    await expect(capped.createKey(org.id, 'past the cap')).rejects.toMatchObject({ reason: 'key_limit_reached' });
    // Sent again, the revocation marks it, and then it may give its place.
    expect((await capped.revokeKey(made[0]!.id))?.revoked_at).not.toBeNull();
    await capped.createKey(org.id, 'in its place');
    expect(await capped.getKey(made[0]!.id)).toBeNull();
    expect(await redis.exists(index)).toBe(0);
  });

  it('holds when many keys are created at once: exactly the cap is made, none past it', async () => {
    const org = await capped.createOrganization({ name: 'Burst', budgets, credit: 1 });
    const outcomes = await Promise.allSettled(Array.from({ length: 40 }, () => capped.createKey(org.id)));
    const made = outcomes.filter((o) => o.status === 'fulfilled' && o.value !== null);
    const refused = outcomes.filter((o) => o.status === 'rejected' && o.reason.reason === 'key_limit_reached');
    expect([made.length, refused.length]).toEqual([5, 35]);
    expect(await redis.scard(`${prefix}{org:${org.id}}:keys`)).toBe(5);
    for (const outcome of made) {
      const key = (outcome as PromiseFulfilledResult<{ key: string }>).value.key;
      expect(await redis.exists(`${prefix}apikey:${hashApiKey(key)}`)).toBe(1);
    }
  });

  it('defaults to DEFAULT_MAX_KEYS_PER_ORGANIZATION', () => {
    expect(store.maxKeysPerOrganization).toBe(DEFAULT_MAX_KEYS_PER_ORGANIZATION);
    expect(DEFAULT_MAX_KEYS_PER_ORGANIZATION).toBe(1000);
  });

  it('lists keys in one round trip for the records, not one per key', async () => {
    const org = await store.createOrganization({ name: 'Many keys', budgets, credit: 1 });
    await Promise.all(Array.from({ length: 50 }, (_, i) => store.createKey(org.id, `k${i}`)));
    const client = redis.duplicate();
    await client.ping();
    const writes = countSocketWrites(client);
    const listed = await createAccountStore({ redis: client, prefix }).listKeys(org.id);
    client.disconnect();
    expect(listed).toHaveLength(50);
    expect(writes()).toBeLessThanOrEqual(3); // the organization, its key set, the records
  });
});

describe('ensureDevOrganization', () => {
  it('is idempotent, and concurrent callers agree on one key id', async () => {
    const key = `tw-${'a'.repeat(40)}`;
    const results = await Promise.all([1, 2, 3].map(() => ensureDevOrganization({ redis, prefix, key })));
    expect(new Set(results.map((r) => r.keyId)).size).toBe(1);
    expect(results[0]?.orgId).toBe(DEV_ORG_ID);
    const again = await ensureDevOrganization({ redis, prefix, key });
    expect(again.keyId).toBe(results[0]?.keyId);
    expect(await store.listKeys(DEV_ORG_ID)).toHaveLength(1);
    expect((await store.getOrganization(DEV_ORG_ID))?.budgets.requests).toBeGreaterThanOrEqual(10_000);
    await expect(ensureDevOrganization({ redis, prefix, key: 'not-a-key' })).rejects.toMatchObject({
      reason: 'invalid_key',
    });
  });

  it('makes the dev organization again after an operator deleted it (its id is its own)', async () => {
    const key = `tw-${'b'.repeat(40)}`;
    await ensureDevOrganization({ redis, prefix, key });
    await store.deleteOrganization(DEV_ORG_ID);
    const again = await ensureDevOrganization({ redis, prefix, key });
    expect(again.orgId).toBe(DEV_ORG_ID);
    expect(await store.getOrganization(DEV_ORG_ID)).not.toBeNull();
    expect(await store.listKeys(DEV_ORG_ID)).toHaveLength(1);
  });
});

describe('usage', () => {
  it('reads per-minute hashes of the last hour, per model and in total', async () => {
    const org = await store.createOrganization({ name: 'Usage', budgets, credit: 1 });
    const minute = Math.floor(nowMs / 60_000);
    await redis.hset(`${prefix}{org:${org.id}}:usage:${minute}`, {
      requests: 2,
      input_tokens: 30,
      output_tokens: 40,
      spend: 0.5,
      'a/b|requests': 2,
      'a/b|input_tokens': 30,
      'a/b|output_tokens': 40,
      'a/b|spend': 0.5,
    });
    await redis.hset(`${prefix}{org:${org.id}}:usage:${minute - 59}`, { requests: 1, 'c/d|requests': 1 });
    await redis.hset(`${prefix}{org:${org.id}}:usage:${minute - 60}`, { requests: 100 });
    const usage = await store.getUsage(org.id);
    expect(usage?.totals).toEqual({ requests: 3, input_tokens: 30, output_tokens: 40, spend: 0.5 });
    expect(usage?.by_model.map((m) => [m.model, m.requests])).toEqual([
      ['a/b', 2],
      ['c/d', 1],
    ]);
    expect(usage?.by_minute.map((m) => m.minute)).toEqual([(minute - 59) * 60, minute * 60]);
    nowMs += 60_000;
    expect((await store.getUsage(org.id))?.totals.requests).toBe(2);
  });
});

describe('bucket balances', () => {
  it('are full for an unused organization, refilled to now, and count what live slices hold', async () => {
    const org = await store.createOrganization({
      name: 'Balances',
      budgets: { requests: 60, input_tokens: 6000, output_tokens: 600 },
      credit: 1,
    });
    expect(await store.getBucketBalances(org.id)).toEqual({
      requests: { limit: 60, remaining: 60 },
      input_tokens: { limit: 6000, remaining: 6000 },
      output_tokens: { limit: 600, remaining: 600 },
    });
    // 30 s ago: 10 requests and 1000 input tokens left; a minute's budget refills in a minute.
    await redis.hset(`${prefix}{org:${org.id}}:buckets`, {
      requests: 10,
      'requests:ts': nowMs - 30_000,
      input_tokens: 1000,
      'input_tokens:ts': nowMs - 30_000,
    });
    // A live slice holds 5 requests and 100 output tokens; an expired one holds nothing any more.
    await redis.hset(`${prefix}{org:${org.id}}:slices`, {
      live: `5|0|100|0.1|${nowMs + 1000}`,
      expired: `50|50|50|1|${nowMs - 1}`,
    });
    expect(await store.getBucketBalances(org.id)).toEqual({
      requests: { limit: 60, remaining: 10 + 30 + 5 },
      input_tokens: { limit: 6000, remaining: 1000 + 3000 },
      output_tokens: { limit: 600, remaining: 600 },
    });
    expect(await store.getBucketBalances('missing-org')).toBeNull();
  });
});

describe('session limits', () => {
  const fields = ['limit_sessions', 'limit_running_turns', 'limit_waiting_turns', 'turn_weight'];
  const stored = async (orgId: string) => redis.hmget(store.keys.org(orgId), ...fields);
  const none = { sessions: null, runningTurns: null, waitingTurns: null, weight: null };

  it('are stored as decimal fields of the organization hash; absent (or null) is the default', async () => {
    const org = await store.createOrganization({
      name: 'Limited',
      budgets,
      credit: 0,
      sessionLimits: { sessions: 1_000_000_000, runningTurns: 3, waitingTurns: null },
    });
    const limits = { sessions: 1_000_000_000, runningTurns: 3, waitingTurns: null, weight: null };
    expect(org.sessionLimits).toEqual(limits);
    expect(await stored(org.id)).toEqual(['1000000000', '3', null, null]);
    expect((await store.getOrganization(org.id))?.sessionLimits).toEqual(limits);
    const plain = await store.createOrganization({ name: 'Plain', budgets, credit: 0 });
    expect(plain.sessionLimits).toEqual(none);
    expect((await store.getOrganization(plain.id))?.sessionLimits).toEqual(none);
    expect(await stored(plain.id)).toEqual([null, null, null, null]);
  });

  it('an update sets any subset, keeps the rest, and null removes one (back to the default)', async () => {
    const org = await store.createOrganization({
      name: 'Tuned',
      budgets,
      credit: 0,
      sessionLimits: { sessions: 10, runningTurns: 2, waitingTurns: 100, weight: 1 },
    });
    const updated = await store.updateOrganization(org.id, { sessionLimits: { weight: 3, runningTurns: null } });
    expect(updated?.sessionLimits).toEqual({ sessions: 10, runningTurns: null, waitingTurns: 100, weight: 3 });
    expect(await stored(org.id)).toEqual(['10', null, '100', '3']);
    expect(await redis.hexists(store.keys.org(org.id), 'limit_running_turns')).toBe(0);
    // Budgets and credit are untouched by a limits-only update, and limits by a budgets-only one.
    expect(updated).toMatchObject({ budgets, credit: 0 });
    const budgetsOnly = await store.updateOrganization(org.id, { budgets: { requests: 99 } });
    expect(budgetsOnly?.sessionLimits).toEqual({ sessions: 10, runningTurns: null, waitingTurns: 100, weight: 3 });
    await store.updateOrganization(org.id, {
      sessionLimits: { sessions: null, runningTurns: null, waitingTurns: null, weight: null },
    });
    expect((await store.getOrganization(org.id))?.sessionLimits).toEqual(none);
    expect(await stored(org.id)).toEqual([null, null, null, null]);
  });

  it('refuses a limit out of its bounds (AccountError invalid_session_limit) and changes nothing', async () => {
    const org = await store.createOrganization({ name: 'Bounded', budgets, credit: 0, sessionLimits: { weight: 2 } });
    const bad: Array<Partial<Record<'sessions' | 'runningTurns' | 'waitingTurns' | 'weight', number>>> = [
      { sessions: 0 },
      { sessions: 1_000_000_001 },
      { runningTurns: 1_000_001 },
      { waitingTurns: -1 },
      { weight: 1001 },
      { weight: 1.5 },
      { weight: Number.NaN },
    ];
    for (const sessionLimits of bad) {
      await expect(store.updateOrganization(org.id, { name: 'Changed', sessionLimits })).rejects.toMatchObject({
        reason: 'invalid_session_limit',
      });
      await expect(
        store.createOrganization({ id: `bounded-${randomUUID()}`, name: 'B', budgets, credit: 0, sessionLimits }),
      ).rejects.toMatchObject({ reason: 'invalid_session_limit' });
    }
    expect(await store.getOrganization(org.id)).toMatchObject({ name: 'Bounded', sessionLimits: { weight: 2 } });
    // The bounds themselves are fine.
    const edges = { sessions: 1, runningTurns: 1_000_000, waitingTurns: 1_000_000_000, weight: 1000 };
    expect((await store.updateOrganization(org.id, { sessionLimits: edges }))?.sessionLimits).toEqual(edges);
  });

  it('reads a hand-edited field that is not a decimal integer in bounds as the default', async () => {
    const org = await store.createOrganization({ name: 'Edited', budgets, credit: 0 });
    await redis.hset(store.keys.org(org.id), {
      limit_sessions: '12abc',
      limit_running_turns: '0',
      limit_waiting_turns: ' 7',
      turn_weight: '5',
    });
    expect((await store.getOrganization(org.id))?.sessionLimits).toEqual({ ...none, weight: 5 });
  });

  it('an update of the limits alone is published on the org-change channel, as a budget update is', async () => {
    const org = await store.createOrganization({ name: 'Watched', budgets, credit: 0 });
    const subscriber = redis.duplicate();
    const heard: string[] = [];
    subscriber.on('message', (_channel: string, message: string) => heard.push(message));
    await subscriber.subscribe(store.keys.orgChangeChannel());
    try {
      await store.updateOrganization(org.id, { sessionLimits: { runningTurns: 4 } });
      await store.updateOrganization(org.id, { sessionLimits: { runningTurns: null } });
      const deadline = Date.now() + 2000;
      while (heard.length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(heard).toEqual([org.id, org.id]);
    } finally {
      subscriber.disconnect();
    }
  });

  it('are part of the idempotency fingerprints of create and update', async () => {
    const key = `limits-${randomUUID()}`;
    const first = await store.createOrganizationOnce(
      { name: 'Idem', budgets, credit: 0, sessionLimits: { weight: 2 } },
      key,
    );
    const again = await store.createOrganizationOnce(
      { name: 'Idem', budgets, credit: 0, sessionLimits: { weight: 2 } },
      key,
    );
    expect([first?.replayed, again?.replayed, again?.organization.id]).toEqual([false, true, first?.organization.id]);
    await expect(
      store.createOrganizationOnce({ name: 'Idem', budgets, credit: 0, sessionLimits: { weight: 3 } }, key),
    ).rejects.toMatchObject({ reason: 'idempotency_key_reused' });
    await expect(store.createOrganizationOnce({ name: 'Idem', budgets, credit: 0 }, key)).rejects.toMatchObject({
      reason: 'idempotency_key_reused',
    });

    const orgId = first!.organization.id;
    const updateKey = randomUUID();
    const set = { sessionLimits: { runningTurns: 5 } };
    expect((await store.updateOrganizationOnce(orgId, set, updateKey))?.replayed).toBe(false);
    expect((await store.updateOrganizationOnce(orgId, set, updateKey))?.replayed).toBe(true);
    for (const other of [{ runningTurns: 6 }, { runningTurns: null }, { waitingTurns: 5 }]) {
      await expect(store.updateOrganizationOnce(orgId, { sessionLimits: other }, updateKey)).rejects.toMatchObject({
        reason: 'idempotency_key_reused',
      });
    }
    // Reset and unchanged are other requests: null under a key that set 5 was refused above, and
    // a reset under its own key is made once.
    const resetKey = randomUUID();
    const reset = { sessionLimits: { runningTurns: null } };
    expect((await store.updateOrganizationOnce(orgId, reset, resetKey))?.organization.sessionLimits.runningTurns).toBe(
      null,
    );
    expect((await store.updateOrganizationOnce(orgId, reset, resetKey))?.replayed).toBe(true);
  });

  it('leave the fingerprint of a request without limits as it was before they existed', async () => {
    const org = await store.createOrganization({ name: 'Upgraded', budgets, credit: 1 });
    const key = randomUUID();
    // The record an update sent before the upgrade left: its fingerprint by the old formula.
    const old = createHash('sha256')
      .update(JSON.stringify(['update', '', '', '', '', 2]))
      .digest('hex');
    await redis.set(store.keys.idempotencyRecord(org.id, createHash('sha256').update(key).digest('hex')), old);
    const replay = await store.updateOrganizationOnce(org.id, { creditTopUp: 2 }, key);
    expect([replay?.replayed, replay?.organization.credit]).toEqual([true, 1]);
  });
});
