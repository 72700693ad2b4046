import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { createAccountStore } from './account-store';
import { createKeyAuthenticator, type KeyAuthenticator } from './key-authenticator';
import { deleteKeysWithPrefix } from './test-redis';

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
    // One lookup, and one `last_used` write (at most one per key and minute).
    expect(count() - before).toBe(2);
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
