import type { Redis } from 'ioredis';
import type { ChatMessage, SessionStatus } from '@tollway/contracts';
import { confirmReplicated, type ReplicaWait } from '@tollway/service-kit';
import { createSessionScript } from './lua/create-session.script';
import { deleteSessionScript } from './lua/delete-session.script';
import { startTurnScript } from './lua/start-turn.script';
import { endTurnScript } from './lua/end-turn.script';
import { watchSessionScript } from './lua/watch-session.script';
import { RUNNING_SCORE } from './lua/scheduler.lua';
import {
  schedulerOrg,
  sessionEventsChannel,
  sessionKeyBase,
  sessionKeys,
  turnCancelChannel,
  type SessionKeys,
} from './session-keys';

import {
  DEFAULT_EVENT_LOG_RETENTION,
  deletionLogArg,
  turnEndLogArgs,
  type EventLogRetention,
  type TurnEndEvents,
} from './event-log-keys';
import { TURN_CANCELLED_ERROR } from '../domain/turn-errors';

export { sessionEventsChannel, turnCancelChannel } from './session-keys';

/** One history item as stored: a ChatMessage plus the tool-turn and image fields when present. */
export interface StoredMessage extends ChatMessage {
  tool_calls?: Array<Record<string, unknown>>;
  tool_call_id?: string;
  name?: string;
  base64_image?: string;
}

/** A session as the API shows it. `org` is null for sessions created without auth. */
export interface SessionRecord {
  sessionId: string;
  status: SessionStatus;
  org: string | null;
  /** The running turn, when status is `running`. */
  turnId: string | null;
  response: ChatMessage | null;
  error: string | null;
}

/** One line of `GET /sessions`. */
export interface SessionListItem {
  sessionId: string;
  status: SessionStatus;
  totalMessages: number;
}

/**
 * How long the marker of a turn another than its worker ended lives, ms: past any pause of a
 * worker that held it (its lease was taken meanwhile).
 */
export const ENDED_MARKER_TTL_MS = 3_600_000;

/**
 * How long the job of a turn whose session was deleted while it executed is kept, ms: the reaper
 * that ends it, should its worker be gone, sends its cancellation callback from it.
 */
export const CANCELLED_JOB_TTL_MS = 3_600_000;

/** Who ends a turn: its worker, a reaper that found it orphaned, or the API. */
export type TurnEnder = 'worker' | 'reaper' | 'api';

export type TurnOutcome =
  { kind: 'success'; append: StoredMessage[]; response: ChatMessage } | { kind: 'error'; error: string };

/**
 * Result of a create: `created`, `exists` (PUT of a taken id), `limit` (the service's cap is
 * reached), `org_limit` (the organization's own cap is) or `too_large` (the history is).
 */
export type CreateResult = 'created' | 'exists' | 'limit' | 'org_limit' | 'too_large';

/**
 * Result of a send: `ok` (now running, its turn queued), `missing` (absent or another org's),
 * `busy` (already running), `full` (the history would pass its bound) or `queue_full` (the
 * organization has as many turns waiting as it may).
 */
export type StartTurnResult = 'ok' | 'missing' | 'busy' | 'full' | 'queue_full';

/** An organization's limits as the session service applies them (0 = none). */
export interface OrganizationTurnLimits {
  /** Sessions it may hold (0 = only the service's cap applies). */
  maxSessions: number;
  /** Turns it may have executing at once (0 = no cap). */
  maxRunningTurns: number;
  /** Turns it may have waiting (0 = no limit). */
  maxWaitingTurns: number;
  /** Its share when organizations wait: `weight` turns dispatched for each of a weight-1 organization. */
  weight: number;
}

/** How a turn is ended (see SessionStore.endTurn). */
export interface TurnEndOptions {
  /** Who ends it; default the worker. */
  endedBy?: TurnEnder;
  /** The session's organization (its scheduler entry); null without auth. */
  org?: string | null;
  /** What the session's event log gets with the end (the worker's events not written yet). */
  events?: TurnEndEvents;
}

/** A session's deletion: whether it was there, and the job of a turn that was waiting (it never ran). */
export interface DeleteResult {
  deleted: boolean;
  /** The waiting turn's job JSON, removed from the queue: its cancellation callback is the caller's to send. */
  waitingJob: string | null;
}

/** Options of SessionStore. */
export interface SessionStoreOptions {
  redis: Redis;
  /** Key prefix, e.g. `tollway:`. */
  prefix: string;
  /** Unix ms; injectable so TTL tests need no sleeping. Default `Date.now`. */
  clock?: () => number;
  /** Retention of the session event logs; default DEFAULT_EVENT_LOG_RETENTION. */
  eventLog?: EventLogRetention;
  /**
   * Sends made durable before they are answered (REDIS_WAIT_REPLICAS): turns start on `redis`, a
   * connection of their own (WAIT holds its connection while it waits), and confirmTurnStarted
   * waits for `wait.replicas` replicas to hold them. Absent: on the main connection, unconfirmed.
   */
  durableSends?: { redis: Redis; wait: ReplicaWait };
}

const ORG_NONE = '';
const SWEEP_BATCH = 500;

/**
 * The Redis-backed session store shared by the API and the workers. Every transition is one
 * Lua script (atomic); reads are single round trips. All org-scoped calls treat a session of
 * another organization exactly like a missing one.
 */
export class SessionStore {
  readonly prefix: string;
  private readonly redis: Redis;
  private readonly base: string;
  private readonly keys: SessionKeys;
  private readonly clock: () => number;
  private readonly eventsChannel: string;
  private readonly cancelChannel: string;
  private readonly eventLog: EventLogRetention;
  private readonly durableSends: { redis: Redis; wait: ReplicaWait } | null;

  constructor(options: SessionStoreOptions) {
    this.redis = options.redis;
    this.durableSends = options.durableSends ?? null;
    this.prefix = options.prefix;
    this.keys = sessionKeys(options.prefix);
    this.base = sessionKeyBase(options.prefix);
    this.clock = options.clock ?? Date.now;
    this.eventsChannel = sessionEventsChannel(options.prefix);
    this.cancelChannel = turnCancelChannel(options.prefix);
    this.eventLog = options.eventLog ?? DEFAULT_EVENT_LOG_RETENTION;
  }

  /**
   * Creates an idle session with `history` preloaded; never exceeds `maxSessions`, even under
   * concurrent creates. `too_large` (nothing written) when the history's JSON is over `maxHistoryBytes`.
   */
  async create(
    sessionId: string,
    org: string | null,
    history: StoredMessage[],
    limits: { maxSessions: number; maxHistoryBytes: number; orgMaxSessions?: number },
  ): Promise<CreateResult> {
    const messages = history.map((message) => JSON.stringify(message));
    let bytes = 0;
    for (const message of messages) bytes += Buffer.byteLength(message);
    if (bytes > limits.maxHistoryBytes) return 'too_large';
    const result = await createSessionScript.run(
      this.redis,
      [this.keys.session(sessionId), this.keys.history(sessionId), this.keys.activity, this.keys.org(org)],
      [sessionId, org ?? ORG_NONE, this.clock(), limits.maxSessions, bytes, limits.orgMaxSessions ?? 0, ...messages],
    );
    return result === 1 ? 'created' : result === 0 ? 'exists' : result === -2 ? 'org_limit' : 'limit';
  }

  /** The session if it exists and belongs to `org`, else null. */
  async get(sessionId: string, org: string | null): Promise<SessionRecord | null> {
    const [status, owner, turnId, response, error] = await this.redis.hmget(
      this.keys.session(sessionId),
      'status',
      'org',
      'turn_id',
      'response',
      'error',
    );
    if (!status || owner !== (org ?? ORG_NONE)) return null;
    return sessionRecord(sessionId, org, status, turnId ?? null, response ?? null, error ?? null);
  }

  /**
   * `get` for a long-poll of API replica `replicaId` (SessionEventHub.replicaId): while a turn
   * runs, the replica is registered among the session's `waiters` in the same step, so the turn's
   * end is published on its channel. One round trip, as `get`.
   */
  async getWatched(sessionId: string, org: string | null, replicaId: string): Promise<SessionRecord | null> {
    const [status, turnId, response, error] = (await watchSessionScript.run(
      this.redis,
      [this.keys.session(sessionId)],
      [org ?? ORG_NONE, replicaId],
    )) as [string | null, string | null, string | null, string | null];
    if (!status) return null;
    return sessionRecord(sessionId, org, status, turnId ?? null, response ?? null, error ?? null);
  }

  /** The full history, oldest first, or null when the session is absent or another org's. */
  async messages(sessionId: string, org: string | null): Promise<StoredMessage[] | null> {
    const results = await this.redis
      .multi()
      .hget(this.keys.session(sessionId), 'org')
      .lrange(this.keys.history(sessionId), 0, -1)
      .exec();
    const owner = results?.[0]?.[1] as string | null | undefined;
    if (owner === null || owner === undefined || owner !== (org ?? ORG_NONE)) return null;
    return ((results?.[1]?.[1] as string[] | undefined) ?? []).map((item) => JSON.parse(item) as StoredMessage);
  }

  /** `org`'s sessions in creation order with their status and history length. */
  async list(org: string | null): Promise<SessionListItem[]> {
    const ids = await this.redis.zrange(this.keys.org(org), 0, -1);
    if (ids.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hget(this.keys.session(id), 'status').llen(this.keys.history(id));
    const results = (await pipeline.exec()) ?? [];
    const items: SessionListItem[] = [];
    ids.forEach((sessionId, i) => {
      const status = results[2 * i]?.[1] as string | null | undefined;
      if (status)
        items.push({ sessionId, status: status as SessionStatus, totalMessages: Number(results[2 * i + 1]?.[1] ?? 0) });
    });
    return items;
  }

  /** Resolves when Redis answers (a reaper's probe after an outage). */
  async ping(): Promise<void> {
    await this.redis.ping();
  }

  /** Number of sessions held, all organizations together. */
  async count(): Promise<number> {
    return this.redis.zcard(this.keys.activity);
  }

  /**
   * Moves an idle or errored session to running with `turnId`, appends `message` and queues the
   * turn (`job`, its JSON) for its organization, in one step; exactly one concurrent send wins.
   * `full` and `queue_full` write nothing; `waiting` is the organization's count of waiting turns then.
   * `waiter`: the accepting API replica's id (SessionEventHub.replicaId), registered among the
   * session's `waiters` so the turn's end is published on its channel.
   */
  async startTurn(
    sessionId: string,
    org: string | null,
    turn: { turnId: string; message: StoredMessage; job: string },
    limits: { maxHistoryBytes: number } & Omit<OrganizationTurnLimits, 'maxSessions'>,
    waiter = '',
  ): Promise<{ result: StartTurnResult; waiting?: number }> {
    const json = JSON.stringify(turn.message);
    const [result, waiting] = (await startTurnScript.run(
      this.durableSends?.redis ?? this.redis,
      [
        this.keys.session(sessionId),
        this.keys.history(sessionId),
        this.keys.activity,
        this.keys.errored,
        this.keys.scheduler(org),
        this.keys.queue(org),
      ],
      [
        this.base,
        sessionId,
        schedulerOrg(org),
        turn.turnId,
        this.clock(),
        json,
        Buffer.byteLength(json),
        limits.maxHistoryBytes,
        turn.job,
        limits.maxWaitingTurns,
        limits.weight,
        limits.maxRunningTurns,
        RUNNING_SCORE,
        waiter,
        this.eventsChannel,
      ],
    )) as [StartTurnResult, number?];
    return waiting === undefined ? { result } : { result, waiting: Number(waiting) };
  }

  /**
   * Resolves once the replicas hold the turns started so far (with `durableSends`; at once
   * without): a failover can then no longer lose them. Rejects with a ReplicationShortfallError
   * when too few replicas acknowledged them in time, or with the connection's error.
   */
  async confirmTurnStarted(): Promise<void> {
    if (this.durableSends) await confirmReplicated(this.durableSends.redis, this.durableSends.wait);
  }

  /**
   * Ends `turnId` wherever it stands, compare-and-set (still running this turn): success appends
   * and goes idle, error goes to error and appends nothing; a waiting turn leaves the queue, an
   * executing one gives its lease back. Wakes long-polls on every replica. `stale` = discarded.
   * `endedBy` is kept with the turn id (see endedBy()). `released`: this call took the turn's lease.
   * The turn's ending event (after `events`, those its worker had not written) goes to the
   * session's event log when it has readers.
   */
  async finishTurn(
    sessionId: string,
    turnId: string,
    outcome: TurnOutcome,
    options: TurnEndOptions = {},
  ): Promise<'applied' | 'stale'> {
    return (await this.endTurn(sessionId, turnId, outcome, options)).result;
  }

  /** finishTurn, also saying whether this call released the turn's lease. */
  async endTurn(
    sessionId: string,
    turnId: string,
    outcome: TurnOutcome,
    { endedBy = 'worker', org = null, events }: TurnEndOptions = {},
  ): Promise<{ result: 'applied' | 'stale'; released: boolean }> {
    const [result, released] = (await endTurnScript.run(
      this.redis,
      [this.keys.session(sessionId)],
      [
        this.base,
        sessionId,
        turnId,
        schedulerOrg(org),
        this.clock(),
        this.eventsChannel,
        endedBy,
        ...outcomeArgs(outcome),
        ENDED_MARKER_TTL_MS,
        ...appendedMessages(outcome),
        ...turnEndLogArgs(this.eventLog, events),
      ],
    )) as ['applied' | 'stale', number];
    return { result, released: Number(released) === 1 };
  }

  /**
   * Who ended `turnId`: the session's record of its last ended turn, else the turn's ended marker
   * (a reaper or the API ended it, the session may be gone since); null otherwise (ended by its
   * worker and another turn ended since, or deleted). A worker whose finishTurn got no reply asks it.
   */
  async endedBy(sessionId: string, turnId: string): Promise<TurnEnder | null> {
    const [ended, marker] = await Promise.all([
      this.redis.hget(this.keys.session(sessionId), 'ended_turn'),
      this.redis.get(this.keys.endedTurn(turnId)),
    ]);
    const [turn, by] = ended?.split(' ') ?? [];
    if (turn === turnId) return (by ?? null) as TurnEnder | null;
    return marker as TurnEnder | null;
  }

  /**
   * Sessions held per status, all organizations together, in one round trip of three O(1) or
   * O(log n) reads: the status scripts keep `activity` (every session, running ones at the running
   * score) and `errored`.
   */
  async countByStatus(): Promise<Record<SessionStatus, number>> {
    const results = await this.redis
      .multi()
      .zcard(this.keys.activity)
      .zcount(this.keys.activity, RUNNING_SCORE, '+inf')
      .scard(this.keys.errored)
      .exec();
    const [all, running, error] = [0, 1, 2].map((i) => Number(results?.[i]?.[1] ?? 0)) as [number, number, number];
    return { idle: Math.max(0, all - running - error), running, error };
  }

  /**
   * Deletes `org`'s session at once, cancelling a running turn: a waiting one leaves the queue (its
   * job is returned), an executing one's worker is told on the turn-cancel channel.
   */
  async delete(sessionId: string, org: string | null): Promise<DeleteResult> {
    const [result, waitingJob] = await this.runDelete(sessionId, org, 'delete', 0);
    return { deleted: result === 'deleted', waitingJob };
  }

  /**
   * Deletes every session of `org` (a deleted organization's), as DELETE does each: a running turn
   * is cancelled. Index entries left without a session are dropped. Returns how many were deleted
   * and the jobs of the turns that were waiting (their cancellation callbacks are the caller's).
   */
  async deleteOrganizationSessions(org: string): Promise<{ removed: number; waitingJobs: string[] }> {
    let removed = 0;
    const waitingJobs: string[] = [];
    for (;;) {
      const ids = await this.redis.zrange(this.keys.org(org), 0, SWEEP_BATCH - 1);
      if (ids.length === 0) return { removed, waitingJobs };
      const stale: string[] = [];
      for (const id of ids) {
        const [result, waitingJob] = await this.runDelete(id, org, 'delete', 0);
        if (result === 'deleted') removed++;
        else stale.push(id);
        if (waitingJob !== null) waitingJobs.push(waitingJob);
      }
      if (stale.length > 0) await this.redis.zrem(this.keys.org(org), ...stale);
    }
  }

  /**
   * The organizations that hold sessions, as their index keys name them (SCAN: a pass over the
   * keyspace in steps, never blocking Redis).
   */
  async organizationsWithSessions(): Promise<string[]> {
    const marker = this.keys.org('');
    const pattern = `${marker.replace(/[*?[\]\\]/g, '\\$&')}*`;
    const orgs = new Set<string>();
    let cursor = '0';
    do {
      const [next, names] = await this.redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      for (const name of names) if (name.length > marker.length) orgs.add(name.slice(marker.length));
      cursor = next;
    } while (cursor !== '0');
    return [...orgs];
  }

  /**
   * Removes idle and errored sessions whose last activity is `ttlMs` or more ago; running ones
   * are never touched. Safe to run on several replicas at once. Returns how many were removed.
   */
  async sweepExpired(ttlMs: number): Promise<number> {
    const cutoff = this.clock() - ttlMs;
    let removed = 0;
    for (;;) {
      const ids = await this.redis.zrangebyscore(this.keys.activity, '-inf', cutoff, 'LIMIT', 0, SWEEP_BATCH);
      if (ids.length === 0) return removed;
      const pipeline = this.redis.pipeline();
      for (const id of ids) pipeline.hget(this.keys.session(id), 'org');
      const owners = (await pipeline.exec()) ?? [];
      let progressed = false;
      for (const [i, id] of ids.entries()) {
        const owner = (owners[i]?.[1] as string | null | undefined) ?? ORG_NONE;
        const [result] = await this.runDelete(id, owner === ORG_NONE ? null : owner, 'sweep', cutoff);
        if (result === 'deleted') removed++;
        if (result !== 'kept') progressed = true;
      }
      if (!progressed || ids.length < SWEEP_BATCH) return removed;
    }
  }

  private async runDelete(
    sessionId: string,
    org: string | null,
    mode: 'delete' | 'sweep',
    cutoff: number,
  ): Promise<[string, string | null]> {
    const [result, waitingJob] = (await deleteSessionScript.run(
      this.redis,
      [
        this.keys.session(sessionId),
        this.keys.history(sessionId),
        this.keys.activity,
        this.keys.org(org),
        this.keys.errored,
      ],
      [
        sessionId,
        org ?? ORG_NONE,
        this.eventsChannel,
        this.cancelChannel,
        mode,
        cutoff,
        this.base,
        CANCELLED_JOB_TTL_MS,
        deletionLogArg(this.eventLog, TURN_CANCELLED_ERROR),
      ],
    )) as [string, string | false | null | undefined];
    return [result, typeof waitingJob === 'string' ? waitingJob : null];
  }
}

/** The outcome's kind and its text (the response JSON, or the error), as the end scripts take them. */
export function outcomeArgs(outcome: TurnOutcome): [string, string] {
  return outcome.kind === 'success' ? ['success', JSON.stringify(outcome.response)] : ['error', outcome.error];
}

/** The messages a successful turn appends, one JSON each. */
export function appendedMessages(outcome: TurnOutcome): string[] {
  return outcome.kind === 'success' ? outcome.append.map((message) => JSON.stringify(message)) : [];
}

/** A session as read: the running turn only while running, the response only while not, the error only in error. */
function sessionRecord(
  sessionId: string,
  org: string | null,
  status: string,
  turnId: string | null,
  response: string | null,
  error: string | null,
): SessionRecord {
  return {
    sessionId,
    status: status as SessionStatus,
    org,
    turnId: status === 'running' ? turnId || null : null,
    response: status !== 'running' && response ? (JSON.parse(response) as ChatMessage) : null,
    error: status === 'error' ? (error ?? null) : null,
  };
}
