import type { Redis } from 'ioredis';
import type { KeyRole } from './account.types';
import { hashApiKey, isWellFormedApiKey, sameKeyHash } from './api-key';
import { luaScript } from './lua-script';
import { accountKeys } from './redis-keys';

/** Who a key belongs to. Same shape as the gateway's `Principal`, plus the key's role. */
export interface KeyPrincipal {
  orgId: string;
  keyId: string;
  role: KeyRole;
}

/** How often one process records a key's `last_used` (ms): at most one write per key per minute. */
export const LAST_USED_RESOLUTION_MS = 60_000;

// KEYS[1] the key record. ARGV[1] unix seconds. Writes only into an existing record, so a key
// whose organization was deleted meanwhile is not brought back as a stray hash. Returns nothing.
const TOUCH_KEY_LUA = `
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], 'last_used', ARGV[1]) end
`;
const touchKeyScript = luaScript(TOUCH_KEY_LUA, 'touch_key');

/** Options of createKeyAuthenticator. */
export interface KeyAuthenticatorOptions {
  redis: Redis;
  /**
   * A connection for the revocation and organization-change channels. When absent one is made
   * with `redis.duplicate()` and closed by `close()`; a given one is left open.
   */
  subscriber?: Redis;
  /** Key prefix, e.g. `tollway:`. */
  prefix: string;
  /** How long a positive lookup is cached (ms); default 5000. Pub/sub invalidates sooner. */
  cacheTtlMs?: number;
  /** Cached keys before the cache is cleared wholesale; default 10 000. */
  maxCacheEntries?: number;
}

/** Resolves bearer tokens to principals; same shape as the gateway's `Authenticator`. */
export interface KeyAuthenticator {
  /** Null for a missing, malformed, unknown or revoked key; a malformed one costs no Redis call. */
  authenticate(bearerToken: string | undefined): Promise<KeyPrincipal | null>;
  /** Resolves once the revocation channel is subscribed (until then nothing is cached). */
  ready(): Promise<void>;
  /** Stops listening for revocations (and closes the subscriber if this authenticator made it). */
  close(): Promise<void>;
}

interface CacheEntry {
  principal: KeyPrincipal;
  expires: number;
}

/**
 * API-key authentication with an in-process cache. A revocation is published on a Redis channel
 * and evicts the key on every replica at once; the cache is only used while the subscription is
 * live (it is bypassed and emptied whenever the subscriber connection drops), and entries expire
 * after `cacheTtlMs` as a backstop. Unknown keys are never cached, so a new key works at once.
 *
 * A key whose organization no longer exists is refused, revoked or not: deleting an organization
 * removes its record first and revokes its keys after, and a process that dies in between must
 * leave none of them working. That costs a second round trip on a cache miss only (an EXISTS once
 * the key's organization is known); the deletion is published on the organization-change channel
 * in the same step as the record goes, and evicts that organization's cached keys at once.
 */
export function createKeyAuthenticator(options: KeyAuthenticatorOptions): KeyAuthenticator {
  const { redis } = options;
  const keys = accountKeys(options.prefix);
  const channel = keys.revocationChannel();
  const orgChannel = keys.orgChangeChannel();
  const ttlMs = options.cacheTtlMs ?? 5000;
  const maxEntries = options.maxCacheEntries ?? 10_000;
  const ownsSubscriber = options.subscriber === undefined;
  const subscriber = options.subscriber ?? redis.duplicate({ connectionName: 'accounts:revocations' });
  const cache = new Map<string, CacheEntry>();
  const inFlight = new Map<string, Promise<KeyPrincipal | null>>();
  const touched = new Map<string, number>();
  let live = false;
  let closed = false;
  // Organization changes seen so far: a lookup that one overtook is not cached (it may have read
  // an organization that was being deleted).
  let orgChanges = 0;

  const onMessage = (from: string, message: string) => {
    if (from === channel) cache.delete(message);
    if (from === orgChannel) forgetOrganization(message);
  };
  // Rare (an organization updated or deleted); the cache holds at most maxEntries keys.
  const forgetOrganization = (orgId: string) => {
    orgChanges++;
    for (const [hash, entry] of cache) if (entry.principal.orgId === orgId) cache.delete(hash);
  };
  const onDown = () => {
    live = false;
    cache.clear();
  };
  const subscribe = () =>
    subscriber.subscribe(channel, orgChannel).then(
      () => {
        if (!closed) live = true;
      },
      () => onDown(),
    );
  const onReady = () => void subscribe();
  subscriber.on('message', onMessage);
  subscriber.on('close', onDown);
  subscriber.on('reconnecting', onDown);
  subscriber.on('ready', onReady);
  const subscribed = subscribe();

  async function lookup(hash: string): Promise<KeyPrincipal | null> {
    const record = await redis.hgetall(keys.keyByHash(hash));
    if (!record.org_id || !record.key_id || !record.hash || !sameKeyHash(record.hash, hash)) return null;
    if ((await redis.exists(keys.org(record.org_id))) === 0) return null;
    return { orgId: record.org_id, keyId: record.key_id, role: record.role === 'admin' ? 'admin' : 'standard' };
  }

  // Fire and forget: `last_used` is informational, and a lost write must never fail a request.
  function touch(principal: KeyPrincipal, now: number): KeyPrincipal {
    const last = touched.get(principal.keyId);
    if (last !== undefined && now - last < LAST_USED_RESOLUTION_MS) return principal;
    if (touched.size >= maxEntries) touched.clear();
    touched.set(principal.keyId, now);
    touchKeyScript
      .run(redis, [keys.key(principal.orgId, principal.keyId)], [Math.floor(now / 1000)])
      .catch(() => touched.delete(principal.keyId));
    return principal;
  }

  return {
    async authenticate(bearerToken) {
      const token = bearerToken?.replace(/^Bearer\s+/i, '').trim();
      if (!isWellFormedApiKey(token)) return null;
      const hash = hashApiKey(token);
      const now = Date.now();
      if (live) {
        const hit = cache.get(hash);
        if (hit && hit.expires > now) return touch(hit.principal, now);
      }
      const pending = inFlight.get(hash);
      if (pending) return pending;
      const wasLive = live;
      const changesBefore = orgChanges;
      const promise = lookup(hash).finally(() => inFlight.delete(hash));
      inFlight.set(hash, promise);
      const principal = await promise;
      // Cache only when the subscription was live for the whole lookup and no organization
      // changed meanwhile: a revocation or deletion published in between would otherwise be missed.
      if (principal && wasLive && live && orgChanges === changesBefore) {
        if (cache.size >= maxEntries) cache.clear();
        cache.set(hash, { principal, expires: now + ttlMs });
      }
      return principal && touch(principal, now);
    },
    ready: () => subscribed,
    async close() {
      closed = true;
      live = false;
      cache.clear();
      subscriber.off('message', onMessage);
      subscriber.off('close', onDown);
      subscriber.off('reconnecting', onDown);
      subscriber.off('ready', onReady);
      if (ownsSubscriber) subscriber.disconnect();
      // The organization-change channel stays subscribed on a shared connection: others listen to
      // it there (the session service's purge of deleted organizations' sessions).
      else await subscriber.unsubscribe(channel).catch(() => undefined);
    },
  };
}
