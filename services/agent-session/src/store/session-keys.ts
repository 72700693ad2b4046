import { sessionSchedulerKeys } from '@tollway/accounts';

/**
 * Redis key layout of the session store and its turn scheduler. Every key shares the hash tag
 * `{sessions}`: the session cap, the activity index and the scheduler's ready set are
 * invariants across all organizations, enforced inside one Lua script, so on a Redis Cluster the
 * session service lives on one slot (see the README, "The ceiling of one Redis").
 */
export interface SessionKeys {
  /**
   * Hash: status, org, turn_id, job, response, error, created_at, updated_at, history_bytes,
   * ended_turn, waiters, readers ('0' until a reader of its event stream first joins, then '1': the
   * end of a turn of a session no reader ever joined asks for no readers or log; absent on sessions
   * made before it, whose ends always ask).
   */
  session(id: string): string;
  /** List of the history, one JSON StoredMessage per item, oldest first. */
  history(id: string): string;
  /**
   * Sorted set of every session: idle and errored ones scored by last activity (ms), which the TTL
   * sweep reads oldest first; running ones (their turn waiting or executing) at RUNNING_SCORE, past
   * any time, so it never reaches them. ZCARD = sessions held.
   */
  activity: string;
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
  /**
   * String, expiring: the job of a turn whose session was deleted while it executed, kept for the
   * reaper that would end it if its worker is gone (the session hash, which held it, is deleted).
   */
  cancelledJob(turnId: string): string;
  /** Hash of one organization's scheduling state: waiting, running, vt (virtual time), weight, cap. */
  scheduler(orgId: string | null): string;
  /** List: one organization's waiting turns, `<session id>:<turn id>|<job JSON>`, oldest first. */
  queue(orgId: string | null): string;
  /** Sorted set: organizations with a turn to dispatch now, scored by their next turn's virtual start. */
  ready: string;
  /** String: the virtual time of the last dispatch, kept for when no organization is ready. */
  vclock: string;
  /** Sorted set of at most one member: a token that wakes one idle worker (BZPOPMIN). */
  wake: string;
  /** Sorted set: `<session id>:<turn id>:<org>` of every executing turn → lease expiry (ms, Redis clock). */
  leases: string;
  /** Sorted set: live worker id → registration expiry (ms, Redis clock). */
  workers: string;
  /** Hash: worker id → its concurrency. */
  workerSlots: string;
}

/** The scheduler's name of a session's organization: its id, or '' for sessions made without auth. */
export function schedulerOrg(orgId: string | null): string {
  return orgId ?? '';
}

/** The key layout under `prefix` (e.g. `tollway:`). */
export function sessionKeys(prefix: string): SessionKeys {
  const base = sessionKeyBase(prefix);
  // The two keys the gateway's admin API reads to show an organization's sessions and turns.
  const shown = sessionSchedulerKeys(prefix);
  return {
    session: (id) => `${base}s:${id}`,
    history: (id) => `${base}h:${id}`,
    activity: `${base}activity`,
    errored: `${base}errored`,
    org: (orgId) => (orgId === null ? `${base}no-org` : shown.sessions(orgId)),
    endedTurn: (turnId) => `${base}ended:${turnId}`,
    cancelledJob: (turnId) => `${base}cancelled:${turnId}`,
    scheduler: (orgId) => (orgId === null ? `${base}sched:` : shown.scheduler(orgId)),
    queue: (orgId) => `${base}q:${schedulerOrg(orgId)}`,
    ready: `${base}ready`,
    vclock: `${base}vclock`,
    wake: `${base}wake`,
    leases: `${base}leases`,
    workers: `${base}workers`,
    workerSlots: `${base}worker-slots`,
  };
}

/** What every key of the session service starts with: the prefix and the `{sessions}` hash tag. */
export function sessionKeyBase(prefix: string): string {
  return `${prefix}{sessions}:`;
}

/**
 * Channel of session events that wake long-polls: `{ session_id, status }` JSON with status
 * `idle` or `error` (plus the ended `turn_id` and `response`, the ChatMessage as a JSON string, or
 * `error`), or `deleted`.
 */
export function sessionEventsChannel(prefix: string): string {
  return `${prefix}session-events`;
}

/**
 * The events channel of one API replica (`replicaId`, random per process): a turn's end is
 * published there for each replica whose long-polls registered on the session (the session hash's
 * `waiters`), instead of to every replica on the shared channel; see SessionEventHub.
 */
export function replicaEventsChannel(prefix: string, replicaId: string): string {
  return `${sessionEventsChannel(prefix)}:${replicaId}`;
}

/**
 * A channel nothing is published on: API replicas that answer long-polls from the turn ends they
 * hold (and whose sends tell the replica that accepted a session's previous turn of the next one)
 * subscribe to it, so its subscriber count against the shared channel's says whether any replica
 * of an earlier build is up (see SessionEventHub).
 */
export function endAnswersChannel(prefix: string): string {
  return `${sessionEventsChannel(prefix)}:answers-from-ends`;
}

/** Channel on which a deletion publishes `{ session_id, turn_id }` JSON of the turn it cancels. */
export function turnCancelChannel(prefix: string): string {
  return `${prefix}turn-cancel`;
}
