import { createHash, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { generateApiKey, hashApiKey, isWellFormedApiKey } from './api-key';
import type {
  ApiKeyInfo,
  BucketBalances,
  CreatedApiKey,
  KeyRole,
  NewOrganization,
  Organization,
  OrganizationUpdate,
  SessionLimits,
  UsageReport,
} from './account.types';
import { readBucketBalances } from './bucket-balances';
import { luaScript } from './lua-script';
import { readOrganizationTurns, type OrganizationTurns } from './organization-turns';
import { execOrThrow } from './redis-batch';
import { accountKeys, type AccountKeys } from './redis-keys';
import {
  defaultSessionLimits,
  invalidSessionLimit,
  parseSessionLimits,
  SESSION_LIMIT_BOUNDS,
  SESSION_LIMIT_FIELDS,
  SESSION_LIMIT_NAMES,
} from './session-limits';
import { CREATE_ORG_LUA } from './scripts/create-org.lua';
import { ACTIVATE_KEY_LUA, DELETE_ORG_LUA, KEY_STILL_LIVE_LUA } from './scripts/key-lifecycle.lua';
import { UPDATE_ORG_LUA } from './scripts/update-org.lua';
import { readUsage } from './usage';

/** Organization ids: letters, digits, `_` and `-`, up to 64 characters. */
export const ORG_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

const createOrgScript = luaScript(CREATE_ORG_LUA, 'create_org');
const updateOrgScript = luaScript(UPDATE_ORG_LUA, 'update_org');
const activateKeyScript = luaScript(ACTIVATE_KEY_LUA, 'activate_key');
const deleteOrgScript = luaScript(DELETE_ORG_LUA, 'delete_org');
const keyStillLiveScript = luaScript(KEY_STILL_LIVE_LUA, 'key_still_live');

/** Options of createAccountStore. */
export interface AccountStoreOptions {
  redis: Redis;
  /** Key prefix, e.g. `tollway:`. */
  prefix: string;
  /** Milliseconds since the epoch; injectable for tests. Default Date.now. */
  now?: () => number;
  /** The most keys, live and revoked, one organization may hold; default DEFAULT_MAX_KEYS_PER_ORGANIZATION. */
  maxKeysPerOrganization?: number;
}

/**
 * The most keys one organization holds by default, live and revoked (a revoked key stays listed
 * until its organization is deleted): about 1.3 MB of Redis at most, and a key list that loads at
 * once. A team with a key per service and environment, rotated now and then, stays far below it.
 */
export const DEFAULT_MAX_KEYS_PER_ORGANIZATION = 1000;

/** Thrown when an argument can never be stored (bad id, duplicate id, malformed key). */
export class AccountError extends Error {
  constructor(
    message: string,
    readonly reason:
      | 'invalid_id'
      | 'conflict'
      | 'id_retired'
      | 'invalid_key'
      | 'idempotency_key_reused'
      | 'credit_out_of_range'
      | 'key_limit_reached'
      | 'invalid_session_limit',
    /** The organization id it is about (`conflict`, `id_retired`, `key_limit_reached`): given, or derived from an idempotency key. */
    readonly orgId?: string,
  ) {
    super(message);
    this.name = 'AccountError';
  }
}

/** How long an organization update's idempotency record is kept: a day, as Stripe keeps its keys. */
export const IDEMPOTENCY_RECORD_SECONDS = 24 * 60 * 60;

/**
 * The largest credit balance, in USD, either way: what one create or top-up may give (the admin
 * schema's bound), and what a top-up may take the balance to. Past it, the float the balance is
 * kept in loses the cents a request costs.
 */
export const CREDIT_LIMIT = 1e12;

function idempotencyKeyReused(): AccountError {
  return new AccountError(
    'This Idempotency-Key was used with another request for this organization.',
    'idempotency_key_reused',
  );
}

function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Throws AccountError `invalid_session_limit` for a limit given that is not null nor an integer in its bounds. */
function checkSessionLimits(limits: Partial<SessionLimits> | undefined): void {
  const name = invalidSessionLimit(limits);
  if (name === null) return;
  const { min, max } = SESSION_LIMIT_BOUNDS[name];
  throw new AccountError(
    `The session limit ${name} must be an integer from ${min} to ${max}, or null for the default.`,
    'invalid_session_limit',
  );
}

/**
 * The session limits as script arguments, in pairs (the hash field, its value), from one value per
 * limit in SESSION_LIMIT_NAMES order.
 */
function sessionLimitArgs(values: ReadonlyArray<string | number>): Array<string | number> {
  return SESSION_LIMIT_NAMES.flatMap((name, i) => [SESSION_LIMIT_FIELDS[name], values[i] ?? '']);
}

/**
 * The session limits' part of an idempotency fingerprint: nothing when none is given, so a request
 * without limits keeps the fingerprint it had before they existed (a retry across the upgrade is
 * still a replay, not a reused key).
 */
function limitsFingerprint(values: ReadonlyArray<string | number>): Array<string | number> {
  return values.some((value) => value !== '') ? [...values] : [];
}

/** Organizations and API keys in Redis. Methods return null where the organization or key does not exist. */
export class AccountStore {
  readonly keys: AccountKeys;
  /**
   * The most keys, live and revoked, one organization may hold: a new key then takes the place of
   * the key revoked longest ago, and with none revoked createKey and registerKey refuse it.
   */
  readonly maxKeysPerOrganization: number;
  private readonly redis: Redis;
  private readonly prefix: string;
  private readonly now: () => number;

  constructor(options: AccountStoreOptions) {
    this.redis = options.redis;
    this.prefix = options.prefix;
    this.keys = accountKeys(options.prefix);
    this.now = options.now ?? Date.now;
    this.maxKeysPerOrganization = options.maxKeysPerOrganization ?? DEFAULT_MAX_KEYS_PER_ORGANIZATION;
  }

  /**
   * Creates an organization; throws AccountError `conflict` when the id is taken, `id_retired`
   * when it was a deleted organization's (unless `reuseDeletedId`: see createOrganizationOnce),
   * `invalid_session_limit` for a session limit out of SESSION_LIMIT_BOUNDS.
   */
  async createOrganization(input: NewOrganization, options: { reuseDeletedId?: boolean } = {}): Promise<Organization> {
    const created = await this.createOrganizationOnce(input, null, options);
    return created!.organization;
  }

  /**
   * Creates an organization once per `idempotencyKey` (null: every call creates). Without an
   * `id`, the key names the organization (`org_` and 12 characters of its SHA-256), so the same
   * create sent again finds the one it made: within IDEMPOTENCY_RECORD_SECONDS it changes nothing
   * and answers `replayed` with the organization as it is now (null if it was deleted since).
   * Another request under that key throws AccountError `idempotency_key_reused`; an id taken by
   * an organization made otherwise, `conflict`. The id of a deleted organization is never given
   * out again (`id_retired`): a new organization would inherit what the old one left under it
   * (its sessions on the session service, its usage, turns still queued and billed to the id).
   * `reuseDeletedId` lifts that for an organization whose past is its own (the quickstart's `dev`).
   */
  async createOrganizationOnce(
    input: NewOrganization,
    idempotencyKey: string | null,
    options: { reuseDeletedId?: boolean } = {},
  ): Promise<{ organization: Organization; replayed: boolean } | null> {
    const id =
      input.id ??
      `org_${(idempotencyKey === null ? randomBytes(9) : createHash('sha256').update(`org:${idempotencyKey}`).digest())
        .toString('base64url')
        .slice(0, 12)
        .replace(/[-_]/g, 'x')}`;
    if (!ORG_ID_PATTERN.test(id)) throw new AccountError(`Organization id "${id}" is not valid.`, 'invalid_id');
    checkSessionLimits(input.sessionLimits);
    const created = Math.floor(this.now() / 1000);
    const { budgets } = input;
    const sessionLimits = defaultSessionLimits();
    for (const name of SESSION_LIMIT_NAMES) sessionLimits[name] = input.sessionLimits?.[name] ?? null;
    const limitValues = SESSION_LIMIT_NAMES.map((name) => sessionLimits[name] ?? '');
    const keys = [this.keys.org(id), this.keys.tombstone(id)];
    const args: Array<string | number> = [
      input.name,
      created,
      budgets.requests,
      budgets.input_tokens,
      budgets.output_tokens,
      input.credit,
      options.reuseDeletedId ? '1' : '',
      '',
      0,
      ...sessionLimitArgs(limitValues),
    ];
    if (idempotencyKey !== null) {
      // The key's record lives with the organization it made; this global claim ties the key to
      // that organization, so a create naming another id (or none) under the same key is refused.
      const claim = this.keys.createIdempotencyClaim(sha256Hex(idempotencyKey));
      const claimed = await this.redis.set(claim, id, 'EX', IDEMPOTENCY_RECORD_SECONDS, 'NX');
      if (claimed === null && (await this.redis.get(claim)) !== id) throw idempotencyKeyReused();
      const request = [input.id ?? null, input.name, budgets.requests, budgets.input_tokens, budgets.output_tokens];
      keys.push(this.keys.idempotencyRecord(id, sha256Hex(idempotencyKey)));
      args[7] = sha256Hex(JSON.stringify(['create', ...request, input.credit, ...limitsFingerprint(limitValues)]));
      args[8] = IDEMPOTENCY_RECORD_SECONDS;
    }
    // Listed first, created second: if the call fails between the two (a lost answer, Redis gone),
    // the index names an organization that does not exist, which listing skips, rather than an
    // organization existing that no listing shows. (Two calls: the index is a global key, the
    // organization lives in its own hash slot.)
    await this.redis.sadd(this.keys.orgIndex(), id);
    const outcome = await createOrgScript.run(this.redis, keys, args);
    if (outcome === 3) throw idempotencyKeyReused();
    if (outcome === 0) throw new AccountError(`Organization "${id}" already exists.`, 'conflict', id);
    if (outcome === 4) {
      // A retired id never gets an organization again: its index entry, just added, goes.
      await this.redis.srem(this.keys.orgIndex(), id);
      throw new AccountError(
        `Organization id "${id}" belonged to a deleted organization and is not given out again.`,
        'id_retired',
        id,
      );
    }
    if (outcome === 2) {
      const organization = await this.getOrganization(id);
      // Made before and deleted since: its id is retired, so nothing will take the entry just added.
      if (!organization) await this.redis.srem(this.keys.orgIndex(), id);
      return organization && { organization, replayed: true };
    }
    return {
      organization: { id, name: input.name, budgets: { ...budgets }, credit: input.credit, created, sessionLimits },
      replayed: false,
    };
  }

  /** One organization, or null. */
  async getOrganization(orgId: string): Promise<Organization | null> {
    if (!ORG_ID_PATTERN.test(orgId)) return null;
    return toOrganization(orgId, await this.redis.hgetall(this.keys.org(orgId)));
  }

  /** All organizations, ordered by creation time then id. */
  async listOrganizations(): Promise<Organization[]> {
    const ids = await this.redis.smembers(this.keys.orgIndex());
    const orgs = await Promise.all(ids.map((id) => this.getOrganization(id)));
    return orgs
      .filter((org): org is Organization => org !== null)
      .sort((a, b) => a.created - b.created || a.id.localeCompare(b.id));
  }

  /** Applies a partial update; null when there is no such organization. */
  async updateOrganization(orgId: string, update: OrganizationUpdate): Promise<Organization | null> {
    return (await this.updateOrganizationOnce(orgId, update, null))?.organization ?? null;
  }

  /**
   * Applies a partial update once per `idempotencyKey` (any string; null: every call applies):
   * within IDEMPOTENCY_RECORD_SECONDS, the same update under the same key changes nothing again
   * and answers `replayed` with the organization as it is now; another update under that key
   * throws AccountError `idempotency_key_reused`. So a client that lost the answer to a credit
   * top-up can send it again. Null when there is no such organization. A session limit set to null
   * goes back to the session service's default; one out of SESSION_LIMIT_BOUNDS throws
   * `invalid_session_limit`. Every update, a replay included, is published on the org-change
   * channel, which the session service's cache of these limits follows.
   */
  async updateOrganizationOnce(
    orgId: string,
    update: OrganizationUpdate,
    idempotencyKey: string | null,
  ): Promise<{ organization: Organization; replayed: boolean } | null> {
    if (!ORG_ID_PATTERN.test(orgId)) return null;
    checkSessionLimits(update.sessionLimits);
    const b = update.budgets ?? {};
    const fields = [
      update.name ?? '',
      b.requests ?? '',
      b.input_tokens ?? '',
      b.output_tokens ?? '',
      update.creditTopUp === undefined ? '' : update.creditTopUp,
    ];
    const limitValues = SESSION_LIMIT_NAMES.map((name) => {
      const value = update.sessionLimits?.[name];
      return value === undefined ? '' : value === null ? 'default' : value;
    });
    const keys = [this.keys.org(orgId)];
    const args: Array<string | number> = [...fields, '', 0, CREDIT_LIMIT, ...sessionLimitArgs(limitValues)];
    if (idempotencyKey !== null) {
      keys.push(this.keys.idempotencyRecord(orgId, sha256Hex(idempotencyKey)));
      args[5] = sha256Hex(JSON.stringify(['update', ...fields, ...limitsFingerprint(limitValues)]));
      args[6] = IDEMPOTENCY_RECORD_SECONDS;
    }
    const outcome = await updateOrgScript.run(this.redis, keys, args);
    if (outcome === 3) throw idempotencyKeyReused();
    if (outcome === 4) {
      throw new AccountError(
        `The top-up would take the credit past ${CREDIT_LIMIT} either way; nothing was changed.`,
        'credit_out_of_range',
        orgId,
      );
    }
    if (outcome !== 1 && outcome !== 2) return null;
    // Replicas holding quota slices of this organization give them back and admit afresh, and the
    // session service drops its cached session limits (again on a replay: the first call's
    // answer, and maybe this message, was lost).
    await this.redis.publish(this.keys.orgChangeChannel(), orgId);
    const organization = await this.getOrganization(orgId);
    return organization && { organization, replayed: outcome === 2 };
  }

  /**
   * Deletes an organization and revokes its keys; false when there was none. The record goes
   * first, in one step with the listing of its keys: from then on no key can join it (a key being
   * created meanwhile is refused, see registerKey), so every key it had is revoked here, in
   * pipelined batches. Key authenticators refuse the keys of an organization that no longer
   * exists, so a delete that dies before the revocations leaves no key working; a delete sent again
   * finds the keys still listed, finishes their revocation and answers true.
   */
  async deleteOrganization(orgId: string): Promise<boolean> {
    if (!ORG_ID_PATTERN.test(orgId)) return false;
    const [existed, keyIds] = await deleteOrganizationRecord(this.redis, this.keys, orgId, this.now());
    for (let i = 0; i < keyIds.length; i += REVOCATION_BATCH) {
      await this.revokeBatch(orgId, keyIds.slice(i, i + REVOCATION_BATCH));
    }
    // The key set goes last: until then a delete sent again finds what is left to revoke.
    const multi = this.redis.multi();
    for (const keyId of keyIds) multi.del(this.keys.key(orgId, keyId));
    await execOrThrow(multi.del(this.keys.orgKeys(orgId)));
    // Only an organization that existed leaves the index: a delete that found none must not take
    // out the entry of a create of that id under way (listed first, made second: see create).
    const cleanup = this.redis.multi().hdel(this.keys.keyOrgs(), ...(keyIds.length > 0 ? keyIds : ['-']));
    if (existed === 1) cleanup.srem(this.keys.orgIndex(), orgId);
    await execOrThrow(cleanup);
    await this.redis.publish(this.keys.orgChangeChannel(), orgId);
    return existed === 1 || keyIds.length > 0;
  }

  /** Takes the keys out of the hash index and publishes their revocation: two round trips a batch. */
  private async revokeBatch(orgId: string, keyIds: readonly string[]): Promise<void> {
    const read = this.redis.pipeline();
    for (const keyId of keyIds) read.hget(this.keys.key(orgId, keyId), 'hash');
    const hashes = (await execOrThrow(read)).filter((hash): hash is string => typeof hash === 'string');
    if (hashes.length === 0) return;
    const write = this.redis.pipeline();
    for (const hash of hashes) write.del(this.keys.keyByHash(hash)).publish(this.keys.revocationChannel(), hash);
    await execOrThrow(write);
  }

  /**
   * Creates a random key for an organization (role default `standard`); the plaintext is in the
   * result and nowhere else. At maxKeysPerOrganization keys (revoked ones included) it takes the
   * place of the key revoked longest ago; AccountError `key_limit_reached` when none is revoked.
   */
  async createKey(orgId: string, name?: string | null, role: KeyRole = 'standard'): Promise<CreatedApiKey | null> {
    return this.registerKey(orgId, generateApiKey(), name ?? null, role);
  }

  /**
   * Registers a given plaintext key (the dev key of the quickstart). Idempotent: a key that is
   * already registered to this organization is returned as it is. Null when the org is missing;
   * AccountError `key_limit_reached` when it holds maxKeysPerOrganization live keys already.
   */
  async registerKey(
    orgId: string,
    key: string,
    name: string | null,
    role: KeyRole = 'standard',
  ): Promise<CreatedApiKey | null> {
    if (!isWellFormedApiKey(key)) throw new AccountError('The API key is not well-formed.', 'invalid_key');
    if (!(await this.redis.exists(this.keys.org(orgId)))) return null;
    const hash = hashApiKey(key);
    const id = `key_${randomBytes(12).toString('base64url').replace(/[-_]/g, 'x')}`;
    // Claim the hash first, so two replicas registering the same dev key at once agree on one id.
    if (!(await this.redis.hsetnx(this.keys.keyByHash(hash), 'key_id', id))) {
      // Another process holds the claim; its record appears within a few round trips.
      for (let attempt = 0; attempt < 40; attempt++) {
        const existing = await this.redis.hgetall(this.keys.keyByHash(hash));
        if (existing.org_id !== undefined && existing.org_id !== orgId) {
          throw new AccountError('The API key belongs to another organization.', 'conflict');
        }
        const info = existing.org_id && existing.key_id ? await this.getKey(existing.key_id) : null;
        if (info) return { ...info, key };
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      throw new AccountError('The API key is being registered elsewhere and did not complete.', 'conflict');
    }
    const info: ApiKeyInfo = {
      id,
      org_id: orgId,
      name,
      role,
      last4: key.slice(-4),
      created: Math.floor(this.now() / 1000),
      last_used_at: null,
      revoked_at: null,
    };
    const record = { id, org_id: orgId, name: name ?? '', role, last4: info.last4, created: info.created, hash };
    const [recorded, forgotten, forgottenHash] = (await activateKeyScript.run(
      this.redis,
      [this.keys.org(orgId), this.keys.orgKeys(orgId), this.keys.key(orgId, id)],
      [id, this.maxKeysPerOrganization, this.keys.key(orgId, ''), ...Object.entries(record).flat()],
    )) as [number, string?, string?];
    if (recorded === 2) {
      await this.redis.del(this.keys.keyByHash(hash));
      throw new AccountError(
        `Organization "${orgId}" holds ${this.maxKeysPerOrganization} live keys, the most one may. Revoke one to make room.`,
        'key_limit_reached',
        orgId,
      );
    }
    // The revoked key whose place the new one took: its id names nothing any more, and its secret
    // works nowhere (its index entry went with its revocation; gone again here, should that have
    // been cut short).
    if (forgotten) {
      const cleanup = this.redis.multi().hdel(this.keys.keyOrgs(), forgotten);
      if (forgottenHash)
        cleanup.del(this.keys.keyByHash(forgottenHash)).publish(this.keys.revocationChannel(), forgottenHash);
      await execOrThrow(cleanup);
    }
    if (recorded !== 1) {
      // The organization was deleted since the check above: nothing of the key may stay.
      await this.redis.del(this.keys.keyByHash(hash));
      return null;
    }
    await this.redis.hset(this.keys.keyOrgs(), id, orgId);
    // Last: the index entry that makes the key usable.
    await this.redis.hset(this.keys.keyByHash(hash), { org_id: orgId, key_id: id, hash, role });
    // An organization deleted since the key was recorded revoked it, maybe before that entry was
    // written: then it is taken back, and the key is never handed out.
    const live = await keyStillLiveScript.run(this.redis, [this.keys.org(orgId), this.keys.key(orgId, id)], []);
    if (live !== 1) {
      await this.redis
        .multi()
        .del(this.keys.keyByHash(hash))
        .hdel(this.keys.keyOrgs(), id)
        .del(this.keys.key(orgId, id))
        .srem(this.keys.orgKeys(orgId), id)
        .exec();
      await this.redis.publish(this.keys.revocationChannel(), hash);
      return null;
    }
    return { ...info, key };
  }

  /** One key's record, or null. */
  async getKey(keyId: string): Promise<ApiKeyInfo | null> {
    const orgId = await this.redis.hget(this.keys.keyOrgs(), keyId);
    if (!orgId) return null;
    return toKeyInfo(await this.redis.hgetall(this.keys.key(orgId, keyId)));
  }

  /** The organization's keys, live and revoked, oldest first; null when the org is missing. */
  async listKeys(orgId: string): Promise<ApiKeyInfo[] | null> {
    if (!ORG_ID_PATTERN.test(orgId) || !(await this.redis.exists(this.keys.org(orgId)))) return null;
    const ids = await this.redis.smembers(this.keys.orgKeys(orgId));
    // One round trip for all the records, not one per key.
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hgetall(this.keys.key(orgId, id));
    return (await execOrThrow(pipeline))
      .map((record) => toKeyInfo(record as Record<string, string>))
      .filter((info): info is ApiKeyInfo => info !== null)
      .sort((a, b) => a.created - b.created || a.id.localeCompare(b.id));
  }

  /**
   * Revokes a key: removes it from the hash index and tells every replica's authenticator
   * (pub/sub) to forget it. Revoking twice is harmless. Null when there is no such key.
   */
  async revokeKey(keyId: string): Promise<ApiKeyInfo | null> {
    const orgId = await this.redis.hget(this.keys.keyOrgs(), keyId);
    if (!orgId) return null;
    const record = await this.redis.hgetall(this.keys.key(orgId, keyId));
    const info = toKeyInfo(record);
    if (!info) return null;
    // The key stops working first (its index entry goes, every replica's cache is told), and only
    // then is it marked revoked: a revocation cut between the two leaves a key that looks live but
    // works nowhere (sent again, it is marked), never one marked revoked that still works, which
    // the cap on keys would forget with its secret still valid.
    if (record.hash) {
      await this.redis.del(this.keys.keyByHash(record.hash));
      await this.redis.publish(this.keys.revocationChannel(), record.hash);
    }
    if (info.revoked_at === null) {
      const now = this.now();
      info.revoked_at = Math.floor(now / 1000);
      // Milliseconds too, so the cap forgets the key revoked longest ago, not one of the same second.
      await this.redis.hset(this.keys.key(orgId, keyId), { revoked_at: info.revoked_at, revoked_at_ms: now });
    }
    return info;
  }

  /** The current balance of the organization's three per-minute buckets; null when the org is missing. */
  async getBucketBalances(orgId: string): Promise<BucketBalances | null> {
    const org = await this.getOrganization(orgId);
    if (!org) return null;
    return readBucketBalances(this.redis, this.keys, org, this.now());
  }

  /**
   * The organization's live counts on the session service (sessions held, turns running and
   * waiting), read under this store's prefix, which the session service shares; zeros for an
   * organization it holds nothing of. Does not check that the organization exists.
   */
  async getOrganizationTurns(orgId: string): Promise<OrganizationTurns> {
    return readOrganizationTurns(this.redis, this.prefix, orgId);
  }

  /** Usage over the last `minutes` (default 60) minutes; null when the org is missing. */
  async getUsage(orgId: string, minutes = 60): Promise<UsageReport | null> {
    if (!ORG_ID_PATTERN.test(orgId) || !(await this.redis.exists(this.keys.org(orgId)))) return null;
    return readUsage(this.redis, this.keys, orgId, this.now(), minutes);
  }
}

/** Builds an AccountStore. */
export function createAccountStore(options: AccountStoreOptions): AccountStore {
  return new AccountStore(options);
}

/**
 * The first step of AccountStore.deleteOrganization alone: the organization's record, buckets and
 * slices go, its id is retired and the deletion published; its keys are listed, not revoked. What
 * a process killed right after it leaves (tests simulate that with it). Resolves whether the
 * organization existed (1 or 0) and its key ids.
 */
export async function deleteOrganizationRecord(
  redis: Redis,
  keys: AccountKeys,
  orgId: string,
  nowMs: number,
): Promise<[number, string[]]> {
  return (await deleteOrgScript.run(
    redis,
    [keys.org(orgId), keys.orgKeys(orgId), keys.buckets(orgId), keys.slices(orgId), keys.tombstone(orgId)],
    [Math.floor(nowMs / 1000), keys.orgChangeChannel(), orgId],
  )) as [number, string[]];
}

/** Keys revoked per pipelined batch when an organization is deleted. */
const REVOCATION_BATCH = 500;

function toOrganization(id: string, hash: Record<string, string>): Organization | null {
  if (hash.name === undefined) return null;
  return {
    id,
    name: hash.name,
    budgets: {
      requests: Number(hash.budget_requests ?? 0),
      input_tokens: Number(hash.budget_input_tokens ?? 0),
      output_tokens: Number(hash.budget_output_tokens ?? 0),
    },
    credit: roundUsd(Number(hash.credit ?? 0)),
    created: Number(hash.created ?? 0),
    sessionLimits: parseSessionLimits(hash),
  };
}

function toKeyInfo(hash: Record<string, string>): ApiKeyInfo | null {
  if (!hash.id || !hash.org_id) return null;
  return {
    id: hash.id,
    org_id: hash.org_id,
    name: hash.name ? hash.name : null,
    role: hash.role === 'admin' ? 'admin' : 'standard',
    last4: hash.last4 ?? '',
    created: Number(hash.created ?? 0),
    last_used_at: hash.last_used ? Number(hash.last_used) : null,
    revoked_at: hash.revoked_at ? Number(hash.revoked_at) : null,
  };
}

/** USD amounts are doubles summed in Redis; twelve decimals hide the binary noise. */
export function roundUsd(value: number): number {
  return Math.round(value * 1e12) / 1e12;
}
