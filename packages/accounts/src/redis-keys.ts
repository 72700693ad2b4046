/**
 * Where accounts live in Redis. Every key starts with the configured prefix; the keys of one
 * organization share the Redis Cluster hash tag `{org:<id>}` so one Lua script may touch them
 * all (the gateway's admission and settlement scripts do). The key index and the organization
 * index are global keys, only ever read or written one at a time.
 */
export interface AccountKeys {
  /**
   * Hash: name, created, budget_requests, budget_input_tokens, budget_output_tokens, credit, and
   * the optional session limits limit_sessions, limit_running_turns, limit_waiting_turns,
   * turn_weight (see SESSION_LIMIT_FIELDS; absent = the session service's default).
   */
  org(orgId: string): string;
  /** Set of the organization's key ids (revoked ones included). */
  orgKeys(orgId: string): string;
  /**
   * String, kept for good once the organization is deleted (when, unix seconds): its id is retired,
   * never given to a new organization, which would otherwise inherit what was left under it.
   */
  tombstone(orgId: string): string;
  /** Hash: id, org_id, name, role, last4, created, last_used, revoked_at. */
  key(orgId: string, keyId: string): string;
  /** Hash of the three token buckets: `<kind>` = balance, `<kind>:ts` = last refill (ms). */
  buckets(orgId: string): string;
  /**
   * Hash of the quota slices replicas hold (the gateway's local admission): slice id →
   * `requests|input_tokens|output_tokens|usd|expiry_ms`. Tokens in a slice are out of the buckets.
   */
  slices(orgId: string): string;
  /**
   * String: the fingerprint of the update made under one idempotency key (by the SHA-256 hex of
   * the key, so no client-chosen text becomes a key name), expiring after a day.
   */
  idempotencyRecord(orgId: string, keyHashHex: string): string;
  /**
   * Global string: the id of the organization a create under one idempotency key (by the SHA-256
   * hex of the key) was made for, expiring with the record; another create under it is refused.
   */
  createIdempotencyClaim(keyHashHex: string): string;
  /** Hash of one minute's usage (see USAGE_FIELDS), expiring after USAGE_RETENTION_SECONDS. */
  usageMinute(orgId: string, epochMinute: number): string;
  /** Global hash: SHA-256 hex of a live key → its org, key id and role. Deleted on revocation. */
  keyByHash(hashHex: string): string;
  /** Global hash: key id → org id, so a key can be revoked by id alone. */
  keyOrgs(): string;
  /** Global set of organization ids. */
  orgIndex(): string;
  /** Pub/sub channel carrying the SHA-256 hex of every revoked key. */
  revocationChannel(): string;
  /** Pub/sub channel carrying the id of every organization updated or deleted. */
  orgChangeChannel(): string;
  /**
   * Hash of the settlement batches one gateway process (`writer`) first sent in one minute:
   * batch number → 1. A batch sent again after its outcome was lost is applied once.
   */
  settlementMarks(writer: string, epochMinute: number): string;
}

/** Builds the key names under `prefix` (e.g. `tollway:`). */
export function accountKeys(prefix: string): AccountKeys {
  const tag = (orgId: string) => `${prefix}{org:${orgId}}`;
  return {
    org: (orgId) => `${tag(orgId)}:org`,
    orgKeys: (orgId) => `${tag(orgId)}:keys`,
    tombstone: (orgId) => `${tag(orgId)}:deleted`,
    key: (orgId, keyId) => `${tag(orgId)}:key:${keyId}`,
    buckets: (orgId) => `${tag(orgId)}:buckets`,
    slices: (orgId) => `${tag(orgId)}:slices`,
    usageMinute: (orgId, epochMinute) => `${tag(orgId)}:usage:${epochMinute}`,
    idempotencyRecord: (orgId, keyHashHex) => `${tag(orgId)}:idempotency:${keyHashHex}`,
    keyByHash: (hashHex) => `${prefix}apikey:${hashHex}`,
    createIdempotencyClaim: (keyHashHex) => `${prefix}create-idempotency:${keyHashHex}`,
    keyOrgs: () => `${prefix}key-orgs`,
    orgIndex: () => `${prefix}orgs`,
    revocationChannel: () => `${prefix}keys:revoked`,
    orgChangeChannel: () => `${prefix}orgs:changed`,
    settlementMarks: (writer, epochMinute) => `${prefix}settled:${writer}:${epochMinute}`,
  };
}

/** Usage hashes keep this long (seconds): the usage API reads the last hour. */
export const USAGE_RETENTION_SECONDS = 2 * 60 * 60;

/**
 * Fields of a usage-minute hash: totals under these names, per model under `<model>|<field>`.
 * Spend is in USD.
 */
export const USAGE_FIELDS = ['requests', 'input_tokens', 'output_tokens', 'spend'] as const;
export type UsageField = (typeof USAGE_FIELDS)[number];

/** Separates the model id from the field name in per-model usage fields. */
export const USAGE_MODEL_SEPARATOR = '|';
