/**
 * Redis key layout of the session store. Every key shares the hash tag `{sessions}`: the session
 * cap and the running-turn index are invariants across all organizations, enforced inside one
 * Lua script, so on a Redis Cluster the session service lives on one slot (see the README).
 */
export interface SessionKeys {
  /** Hash: status, org, turn_id, started_at, response, error, created_at, updated_at. */
  session(id: string): string;
  /** List of the history, one JSON StoredMessage per item, oldest first. */
  history(id: string): string;
  /** Sorted set: idle and errored session ids scored by last activity (ms); the TTL sweep reads it. */
  activity: string;
  /** Sorted set: running session ids scored by the turn's start (ms). */
  running: string;
  /**
   * Set: the ids of sessions in `error` (a subset of `activity`), kept by the same scripts that
   * change a status, so the count per status is ZCARD/SCARD, never a scan.
   */
  errored: string;
  /** Sorted set: one organization's session ids scored by creation (ms); `null` = sessions made without auth. */
  org(orgId: string | null): string;
  /**
   * String, expiring: a turn a reaper (or the API) ended, so a worker that takes its job later
   * knows the webhook was sent even once the session is deleted.
   */
  endedTurn(turnId: string): string;
}

/** The key layout under `prefix` (e.g. `tollway:`). */
export function sessionKeys(prefix: string): SessionKeys {
  const base = `${prefix}{sessions}:`;
  return {
    session: (id) => `${base}s:${id}`,
    history: (id) => `${base}h:${id}`,
    activity: `${base}activity`,
    running: `${base}running`,
    errored: `${base}errored`,
    org: (orgId) => (orgId === null ? `${base}no-org` : `${base}org:${orgId}`),
    endedTurn: (turnId) => `${base}ended:${turnId}`,
  };
}

/**
 * Channel of session events that wake long-polls: `{ session_id, status }` JSON with status
 * `idle` or `error` (plus the ended `turn_id` and `response`, the ChatMessage as a JSON string, or
 * `error`), or `deleted`.
 */
export function sessionEventsChannel(prefix: string): string {
  return `${prefix}session-events`;
}

/** Channel on which a deletion publishes `{ session_id, turn_id }` JSON of the turn it cancels. */
export function turnCancelChannel(prefix: string): string {
  return `${prefix}turn-cancel`;
}
