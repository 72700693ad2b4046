import type { Redis } from 'ioredis';
import type { ChatMessage, SessionStatus } from '@tollway/contracts';
import { confirmReplicated, type ReplicaWait } from '@tollway/service-kit';
import { createSessionScript } from './lua/create-session.script';
import { deleteSessionScript } from './lua/delete-session.script';
import { finishTurnScript } from './lua/finish-turn.script';
import { startTurnScript } from './lua/start-turn.script';
import { sessionEventsChannel, sessionKeys, turnCancelChannel, type SessionKeys } from './session-keys';

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
 * worker that fetched its job (a failed job is kept 10 minutes).
 */
const ENDED_MARKER_TTL_MS = 3_600_000;

/** How a turn ended, as the worker reports it. */
/** Who ends a turn: its worker, a reaper that found it orphaned, or the API that could not queue it. */
export type TurnEnder = 'worker' | 'reaper' | 'api';

export type TurnOutcome =
  { kind: 'success'; append: StoredMessage[]; response: ChatMessage } | { kind: 'error'; error: string };

/** Result of a create: `created`, `exists` (PUT of a taken id) or `limit` (the cap is reached). */
export type CreateResult = 'created' | 'exists' | 'limit' | 'too_large';

/** Result of a send: `ok` (now running), `missing` (absent or another org's) or `busy` (already running). */
export type StartTurnResult = 'ok' | 'missing' | 'busy' | 'full';

/** Options of SessionStore. */
export interface SessionStoreOptions {
  redis: Redis;
  /** Key prefix, e.g. `tollway:`. */
  prefix: string;
  /** Unix ms; injectable so TTL tests need no sleeping. Default `Date.now`. */
  clock?: () => number;
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
  private readonly keys: SessionKeys;
  private readonly clock: () => number;
  private readonly eventsChannel: string;
  private readonly cancelChannel: string;
  private readonly durableSends: { redis: Redis; wait: ReplicaWait } | null;

  constructor(options: SessionStoreOptions) {
    this.redis = options.redis;
    this.durableSends = options.durableSends ?? null;
    this.prefix = options.prefix;
    this.keys = sessionKeys(options.prefix);
    this.clock = options.clock ?? Date.now;
    this.eventsChannel = sessionEventsChannel(options.prefix);
    this.cancelChannel = turnCancelChannel(options.prefix);
  }

  /**
   * Creates an idle session with `history` preloaded; never exceeds `maxSessions`, even under
   * concurrent creates. `too_large` (nothing written) when the history's JSON is over `maxHistoryBytes`.
   */
  async create(
    sessionId: string,
    org: string | null,
    history: StoredMessage[],
    limits: { maxSessions: number; maxHistoryBytes: number },
  ): Promise<CreateResult> {
    const messages = history.map((message) => JSON.stringify(message));
    let bytes = 0;
    for (const message of messages) bytes += Buffer.byteLength(message);
    if (bytes > limits.maxHistoryBytes) return 'too_large';
    const result = await createSessionScript.run(
      this.redis,
      [
        this.keys.session(sessionId),
        this.keys.history(sessionId),
        this.keys.activity,
        this.keys.running,
        this.keys.org(org),
      ],
      [sessionId, org ?? ORG_NONE, this.clock(), limits.maxSessions, bytes, ...messages],
    );
    return result === 1 ? 'created' : result === 0 ? 'exists' : 'limit';
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
    return {
      sessionId,
      status: status as SessionStatus,
      org,
      turnId: status === 'running' ? (turnId ?? null) : null,
      response: status !== 'running' && response ? (JSON.parse(response) as ChatMessage) : null,
      error: status === 'error' ? (error ?? null) : null,
    };
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

  /** Number of sessions held, all organizations together. */
  async count(): Promise<number> {
    const results = await this.redis.multi().zcard(this.keys.activity).zcard(this.keys.running).exec();
    return Number(results?.[0]?.[1] ?? 0) + Number(results?.[1]?.[1] ?? 0);
  }

  /**
   * Moves an idle or errored session to running with `turnId` and appends `message`; exactly one
   * concurrent send wins. `full` (nothing written) when the history would pass `maxHistoryBytes`.
   */
  async startTurn(
    sessionId: string,
    org: string | null,
    turnId: string,
    message: StoredMessage,
    maxHistoryBytes: number,
  ): Promise<StartTurnResult> {
    const json = JSON.stringify(message);
    const result = await startTurnScript.run(
      this.durableSends?.redis ?? this.redis,
      [
        this.keys.session(sessionId),
        this.keys.history(sessionId),
        this.keys.activity,
        this.keys.running,
        this.keys.errored,
      ],
      [sessionId, org ?? ORG_NONE, turnId, this.clock(), json, Buffer.byteLength(json), maxHistoryBytes],
    );
    return result as StartTurnResult;
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
   * What a worker needs to run `turnId`: the history, which ends with the turn's own message.
   * `{ ended: true }` when the turn was ended already (a reaper ended it, and sent its webhook);
   * null when the session is gone or runs another turn (deleted, or deleted and made again).
   */
  async getTurnContext(
    sessionId: string,
    turnId: string,
  ): Promise<{ history: StoredMessage[] } | { ended: true } | null> {
    const results = await this.redis
      .multi()
      .hmget(this.keys.session(sessionId), 'status', 'turn_id', 'ended_turn')
      .lrange(this.keys.history(sessionId), 0, -1)
      .exists(this.keys.endedTurn(turnId))
      .exec();
    const [status, current, endedTurn] = (results?.[0]?.[1] as Array<string | null> | undefined) ?? [];
    // Ended by a reaper (its webhook sent), then deleted: still ended, not a deleted session's turn.
    if (results?.[2]?.[1] === 1) return { ended: true };
    if (status === null || status === undefined) return null;
    if (status !== 'running' || current !== turnId) {
      // Ended already (a reaper took it from a worker that stopped) or never this session's turn.
      return endedTurn?.split(' ')[0] === turnId ? { ended: true } : null;
    }
    return {
      history: ((results?.[1]?.[1] as string[] | undefined) ?? []).map((item) => JSON.parse(item) as StoredMessage),
    };
  }

  /**
   * Where `turnId` stands, without its history: `running` (still the session's current turn),
   * `ended` (ended already: a reaper took it from a worker that seemed gone, and sent its webhook),
   * `gone` (the session is gone or runs another turn). A worker asks again before it runs a turn
   * whose context it read a while ago.
   */
  async turnState(sessionId: string, turnId: string): Promise<'running' | 'ended' | 'gone'> {
    const [hash, marked] = await Promise.all([
      this.redis.hmget(this.keys.session(sessionId), 'status', 'turn_id', 'ended_turn'),
      this.redis.exists(this.keys.endedTurn(turnId)),
    ]);
    const [status, current, endedTurn] = hash;
    if (marked === 1) return 'ended';
    if (status === null || status === undefined) return 'gone';
    if (status === 'running' && current === turnId) return 'running';
    return endedTurn?.split(' ')[0] === turnId ? 'ended' : 'gone';
  }

  /**
   * Ends `turnId` compare-and-set (still running this turn): success appends and goes idle, error
   * goes to error and appends nothing. Wakes long-polls on every replica. `stale` = discarded.
   * `endedBy` is kept with the turn id (see endedBy()).
   */
  async finishTurn(
    sessionId: string,
    turnId: string,
    outcome: TurnOutcome,
    endedBy: TurnEnder = 'worker',
  ): Promise<'applied' | 'stale'> {
    const [text, ...append] =
      outcome.kind === 'success'
        ? [JSON.stringify(outcome.response), ...outcome.append.map((message) => JSON.stringify(message))]
        : [outcome.error];
    const result = await finishTurnScript.run(
      this.redis,
      [
        this.keys.session(sessionId),
        this.keys.history(sessionId),
        this.keys.activity,
        this.keys.running,
        this.keys.errored,
        this.keys.endedTurn(turnId),
      ],
      [
        sessionId,
        turnId,
        this.clock(),
        this.eventsChannel,
        endedBy,
        outcome.kind,
        text,
        ENDED_MARKER_TTL_MS,
        ...append,
      ],
    );
    return result as 'applied' | 'stale';
  }

  /** Whether the session exists (of any organization): a reaper tells a deleted turn from an ended one. */
  async exists(sessionId: string): Promise<boolean> {
    return (await this.redis.exists(this.keys.session(sessionId))) === 1;
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
   * Sessions held per status, all organizations together, in one round trip of three O(1)
   * commands: the status scripts keep `activity` (idle and error), `running` and `errored`.
   */
  async countByStatus(): Promise<Record<SessionStatus, number>> {
    const results = await this.redis
      .multi()
      .zcard(this.keys.activity)
      .zcard(this.keys.running)
      .scard(this.keys.errored)
      .exec();
    const [settled, running, error] = [0, 1, 2].map((i) => Number(results?.[i]?.[1] ?? 0)) as [number, number, number];
    return { idle: Math.max(0, settled - error), running, error };
  }

  /** Turns running now, cluster-wide, with their start time (Unix ms); the worker's reaper reads it. */
  async listRunningTurns(): Promise<Array<{ sessionId: string; turnId: string; startedAt: number }>> {
    const flat = await this.redis.zrange(this.keys.running, 0, -1, 'WITHSCORES');
    if (flat.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (let i = 0; i < flat.length; i += 2) pipeline.hget(this.keys.session(flat[i] as string), 'turn_id');
    const results = (await pipeline.exec()) ?? [];
    const turns: Array<{ sessionId: string; turnId: string; startedAt: number }> = [];
    for (let i = 0; i < flat.length; i += 2) {
      const turnId = results[i / 2]?.[1] as string | null | undefined;
      if (turnId) turns.push({ sessionId: flat[i] as string, turnId, startedAt: Number(flat[i + 1]) });
    }
    return turns;
  }

  /** Deletes `org`'s session at once, cancelling a running turn (published on the turn-cancel channel). */
  async delete(sessionId: string, org: string | null): Promise<'deleted' | 'missing'> {
    const result = await this.runDelete(sessionId, org, 'delete', 0);
    return result === 'deleted' ? 'deleted' : 'missing';
  }

  /**
   * Deletes every session of `org` (a deleted organization's), as DELETE does each: a running turn
   * is cancelled. Index entries left without a session are dropped. Returns how many were deleted.
   */
  async deleteOrganizationSessions(org: string): Promise<number> {
    let removed = 0;
    for (;;) {
      const ids = await this.redis.zrange(this.keys.org(org), 0, SWEEP_BATCH - 1);
      if (ids.length === 0) return removed;
      const stale: string[] = [];
      for (const id of ids) {
        if ((await this.runDelete(id, org, 'delete', 0)) === 'deleted') removed++;
        else stale.push(id);
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
        const result = await this.runDelete(id, owner === ORG_NONE ? null : owner, 'sweep', cutoff);
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
  ): Promise<string> {
    return (await deleteSessionScript.run(
      this.redis,
      [
        this.keys.session(sessionId),
        this.keys.history(sessionId),
        this.keys.activity,
        this.keys.running,
        this.keys.org(org),
        this.keys.errored,
      ],
      [sessionId, org ?? ORG_NONE, this.eventsChannel, this.cancelChannel, mode, cutoff],
    )) as string;
  }
}
