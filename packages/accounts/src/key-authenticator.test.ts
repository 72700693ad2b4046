import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { createAccountStore, deleteOrganizationRecord } from './account-store';
import { hashApiKey } from './api-key';
import { createKeyAuthenticator, type KeyAuthenticator } from './key-authenticator';
import { countSocketWrites, deleteKeysWithPrefix } from './test-redis';

const prefix = `test-${randomUUID()}:`;
const redis = new Redis('redis://127.0.0.1:6379');
const store = createAccountStore({ redis, prefix });
const budgets = { requests: 10, input_tokens: 1000, output_tokens: 2000 };
const authenticators: KeyAuthenticator[] = [];

function authenticator(cacheTtlMs = 60_000): KeyAuthenticator {
  const auth = createKeyAuthenticator({ redis, prefix, cacheTtlMs });
  authenticators.push(auth);
  return auth;
}

/** A connection that counts the commands sent through it (other test files share the server). */
function countingRedis(): { client: Redis; count: () => number } {
  const client = redis.duplicate();
  let sent = 0;
  const send = client.sendCommand.bind(client);
  client.sendCommand = (...args: Parameters<Redis['sendCommand']>) => {
    sent++;
    return send(...args);
  };
  counted.push(client);
  return { client, count: () => sent };
}
const counted: Redis[] = [];

afterAll(async () => {
  await Promise.all(authenticators.map((a) => a.close()));
  for (const client of counted) client.disconnect();
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
});

describe('createKeyAuthenticator', () => {
  it('resolves a live key, with or without the Bearer word, and refuses unknown ones', async () => {
    const auth = authenticator();
    await auth.ready();
    const org = await store.createOrganization({ name: 'Auth', budgets, credit: 1 });
    const created = await store.createKey(org.id);
    expect(await auth.authenticate(created!.key)).toEqual({ orgId: org.id, keyId: created!.id, role: 'standard' });
    expect(await auth.authenticate(`Bearer ${created!.key}`)).toEqual({
      orgId: org.id,
      keyId: created!.id,
      role: 'standard',
    });
    expect(await auth.authenticate(`tw-${'Z'.repeat(43)}`)).toBeNull();
  });

  it('answers a missing or malformed token without a Redis call', async () => {
    const { client, count } = countingRedis();
    const auth = createKeyAuthenticator({ redis: client, prefix });
    authenticators.push(auth);
    await auth.ready();
    await client.ping(); // the connection's own start-up commands are done
    const before = count();
    for (const token of [undefined, '', 'Bearer', 'sk-abc', 'tw-short', `tw-${'a'.repeat(40)}!`]) {
      expect(await auth.authenticate(token)).toBeNull();
    }
    expect(await auth.authenticate(`tw-${'a'.repeat(40)}`)).toBeNull();
    expect(count() - before).toBe(1);
  });

  it("records a key's last use, at most once a minute per process, into a live key only", async () => {
    const auth = authenticator();
    await auth.ready();
    const org = await store.createOrganization({ name: 'Last used', budgets, credit: 1 });
    const created = (await store.createKey(org.id))!;
    expect((await store.getKey(created.id))?.last_used_at).toBeNull();
    const before = Math.floor(Date.now() / 1000);
    expect(await auth.authenticate(created.key)).not.toBeNull();
    let lastUsed: number | null = null;
    for (let i = 0; i < 50 && lastUsed === null; i++) {
      lastUsed = (await store.getKey(created.id))?.last_used_at ?? null;
      if (lastUsed === null) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(lastUsed).toBeGreaterThanOrEqual(before);
    expect(lastUsed).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
  });

  it('serves repeated lookups from the cache', async () => {
    const { client, count } = countingRedis();
    const auth = createKeyAuthenticator({ redis: client, prefix, cacheTtlMs: 60_000 });
    authenticators.push(auth);
    await auth.ready();
    const org = await store.createOrganization({ name: 'Cache', budgets, credit: 1 });
    const created = await store.createKey(org.id);
    await client.ping();
    const before = count();
    for (let i = 0; i < 20; i++) expect(await auth.authenticate(created!.key)).not.toBeNull();
    // One lookup (the key, then its organization), and one `last_used` write (at most one per key and minute).
    expect(count() - before).toBe(3);
  });

  it('sees a revocation on another replica within a second despite a long cache TTL', async () => {
    const replicaA = authenticator(60_000);
    const replicaB = authenticator(60_000);
    await Promise.all([replicaA.ready(), replicaB.ready()]);
    const org = await store.createOrganization({ name: 'Revoke', budgets, credit: 1 });
    const created = await store.createKey(org.id);
    expect(await replicaA.authenticate(created!.key)).not.toBeNull();
    expect(await replicaB.authenticate(created!.key)).not.toBeNull();
    const revokedAt = Date.now();
    await store.revokeKey(created!.id);
    let seenAfter = Infinity;
    while (Date.now() - revokedAt < 1000) {
      if ((await replicaB.authenticate(created!.key)) === null) {
        seenAfter = Date.now() - revokedAt;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(seenAfter).toBeLessThan(1000);
    expect(await replicaA.authenticate(created!.key)).toBeNull();
  });

  it('does not cache while the revocation channel is down', async () => {
    const subscriber = redis.duplicate();
    const auth = createKeyAuthenticator({ redis, subscriber, prefix, cacheTtlMs: 60_000 });
    await auth.ready();
    const org = await store.createOrganization({ name: 'Down', budgets, credit: 1 });
    const created = await store.createKey(org.id);
    expect(await auth.authenticate(created!.key)).not.toBeNull();
    subscriber.disconnect();
    await new Promise((resolve) => setTimeout(resolve, 20));
    // Revoke by deleting the index directly: no message could reach a dead subscriber anyway.
    await store.revokeKey(created!.id);
    expect(await auth.authenticate(created!.key)).toBeNull();
    await auth.close();
  });
});

describe('keys of a deleted organization', () => {
  it('are refused, cached or not, when the delete died before revoking them; a delete sent again finishes it', async () => {
    const cached = authenticator(60_000);
    await cached.ready();
    const org = await store.createOrganization({ name: 'Interrupted', budgets, credit: 1 });
    const created = [
      (await store.createKey(org.id))!,
      (await store.createKey(org.id, 'admin', 'admin'))!,
      (await store.createKey(org.id))!,
    ];
    for (const key of created) expect(await cached.authenticate(key.key)).not.toBeNull();

    await deleteOrganizationRecord(redis, store.keys, org.id, Date.now()); // and killed there
    // Not revoked: their index entries are still there.
    for (const key of created) expect(await redis.exists(`${prefix}apikey:${hashApiKey(key.key)}`)).toBe(1);
    const fresh = authenticator(60_000);
    await fresh.ready();
    for (const key of created) expect(await fresh.authenticate(key.key)).toBeNull();
    // The replica that had them cached drops them on the deletion's message.
    const deletedAt = Date.now();
    while ((await cached.authenticate(created[0]!.key)) !== null && Date.now() - deletedAt < 1000) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    for (const key of created) expect(await cached.authenticate(key.key)).toBeNull();

    // The operator sends the delete again: it revokes what is left and answers as a delete.
    expect(await store.deleteOrganization(org.id)).toBe(true);
    for (const key of created) expect(await redis.exists(`${prefix}apikey:${hashApiKey(key.key)}`)).toBe(0);
    expect(await store.deleteOrganization(org.id)).toBe(false);
  });

  it('are refused by a fresh lookup even when no message told of the deletion', async () => {
    const org = await store.createOrganization({ name: 'Silent', budgets, credit: 1 });
    const created = (await store.createKey(org.id))!;
    await redis.del(store.keys.org(org.id));
    const auth = authenticator();
    await auth.ready();
    expect(await auth.authenticate(created.key)).toBeNull();
  });

  it('are revoked in pipelined batches: a delete of 1,000 keys (the cap) takes a few round trips, not some per key', async () => {
    const org = await store.createOrganization({ name: 'Many', budgets, credit: 1 });
    const created = [];
    for (let i = 0; i < 1000; i += 200) {
      created.push(...(await Promise.all(Array.from({ length: 200 }, () => store.createKey(org.id)))));
    }
    const client = redis.duplicate();
    await client.ping();
    const writes = countSocketWrites(client);
    expect(await createAccountStore({ redis: client, prefix }).deleteOrganization(org.id)).toBe(true);
    client.disconnect();
    expect(writes()).toBeLessThanOrEqual(20);
    for (const key of created.slice(0, 50)) {
      expect(await redis.exists(`${prefix}apikey:${hashApiKey(key!.key)}`)).toBe(0);
    }
    expect(await redis.scard(store.keys.orgKeys(org.id))).toBe(0);
  }, 60_000);
});
