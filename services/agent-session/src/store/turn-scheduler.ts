import type { Redis } from 'ioredis';
import { runInPipeline } from '@tollway/accounts';
import { claimTurnsScript } from './lua/claim-turns.script';
import { finishTurnScript } from './lua/finish-turn.script';
import { reapTurnsScript } from './lua/reap-turns.script';
import { RUNNING_SCORE } from './lua/scheduler.lua';
import { requeueTurnScript } from './lua/requeue-turn.script';
import {
  appendedMessages,
  ENDED_MARKER_TTL_MS,
  outcomeArgs,
  type StoredMessage,
  type TurnOutcome,
} from './session-store';
import { schedulerOrg, sessionEventsChannel, sessionKeyBase, sessionKeys, type SessionKeys } from './session-keys';
import {
  DEFAULT_EVENT_LOG_RETENTION,
  streamKeys,
  turnEndLogArgs,
  turnEndLogSettings,
  type EventLogRetention,
  type StreamKeys,
  type TurnEndEvents,
} from './event-log-keys';

/** A turn a worker claimed: leased to it, its job and the history it runs on. */
export interface ClaimedTurn {
  sessionId: string;
  turnId: string;
  /** The session's organization; null for sessions made without auth. */
  orgId: string | null;
  /** The turn's AgentTurnJob as the API queued it (JSON). */
  jobJson: string;
  /** The session's history, ending with the turn's own message. */
  history: StoredMessage[];
  /** The session had readers of its event stream when the turn's history was read (right after its claim). */
  watched: boolean;
}

/** A turn a reaper took from a worker that stopped heartbeating. */
export interface ReapedTurn {
  sessionId: string;
  turnId: string;
  /** `ended`: ended in error now; `deleted`: its session was deleted while its worker was gone. */
  how: 'ended' | 'deleted';
  /** The turn's job JSON (null when it could not be found any more). */
  jobJson: string | null;
}

/** How ending a turn went: applied or stale, and whether this worker still held its lease. */
export interface FinishResult {
  result: 'applied' | 'stale';
  /** False when a reaper had taken the turn's lease first (this worker seemed gone). */
  stillLeased: boolean;
  /** The turns claimed in the same step. */
  next: ClaimedTurn[];
}

/**
 * What keeps the leases of the turns a worker claimed (its registration's heartbeat): told of each
 * turn as soon as the claim's reply names it, before its history is read.
 */
export interface ClaimedLeases {
  hold(sessionId: string, turnId: string, orgId: string | null): void;
  forget(sessionId: string, turnId: string, orgId: string | null): void;
}

/** Waits between tries of reading claimed turns' histories while Redis does not answer, ms (the last one repeats). */
const HISTORY_RETRY_DELAYS_MS = [100, 250, 500, 1000, 2000];
/**
 * How long a worker keeps trying to read the histories of turns it claimed, ms: as long as it
 * keeps trying to end a turn (END_TURN_RETRY_FOR_MS), past any outage a deployment rides out.
 */
const HISTORY_RETRY_FOR_MS = 120_000;

/** The wait on the wake token ends after this long anyway, in seconds: a token lost with a worker costs no more. */
const WAKE_TIMEOUT_SECONDS = 2;

/**
 * The worker's side of the fair turn scheduler (the Lua in `lua/scheduler.lua.ts`): claim turns
 * in fair order across organizations, end a turn and claim the next in one round trip, reap turns
 * whose worker stopped, and wait for work on a blocking connection.
 */
export class TurnScheduler {
  private readonly base: string;
  private readonly keys: SessionKeys;
  private readonly eventsChannel: string;
  private readonly streams: StreamKeys;

  constructor(
    private readonly redis: Redis,
    prefix: string,
    private readonly clock: () => number = Date.now,
    /** Retention of the session event logs the turns' ends write to. */
    private readonly eventLog: EventLogRetention = DEFAULT_EVENT_LOG_RETENTION,
    /** A worker's: keeps the claimed turns' leases while their histories are read (see withHistories). */
    private readonly leases?: ClaimedLeases,
  ) {
    this.base = sessionKeyBase(prefix);
    this.keys = sessionKeys(prefix);
    this.eventsChannel = sessionEventsChannel(prefix);
    this.streams = streamKeys(prefix);
  }

  /**
   * Claims up to `max` turns, each leased for `leaseTtlMs`. With `baton`, a claim that took all it
   * asked for while more wait leaves a wake token for another idle worker.
   */
  async claim(max: number, leaseTtlMs: number, baton = true): Promise<ClaimedTurn[]> {
    const reply = await claimTurnsScript.run(
      this.redis,
      [this.keys.ready, this.keys.leases],
      [this.base, max, leaseTtlMs, baton ? 1 : 0],
    );
    return this.withHistories(reply);
  }

  /**
   * Claims up to `max` turns (as `claim`, with a baton) on `blocking`, with a wait on the wake token
   * written behind it (waitForWork): Redis reads both at once, runs the claim, then blocks, so a
   * token left after the claim ends the wait. `claimed` resolves with the claim's own reply.
   */
  claimThenWait(
    blocking: Redis,
    max: number,
    leaseTtlMs: number,
  ): { claimed: Promise<ClaimedTurn[]>; woken: Promise<boolean> } {
    const pipeline = blocking.pipeline();
    const reply = runInPipeline(
      claimTurnsScript,
      pipeline,
      [this.keys.ready, this.keys.leases],
      [this.base, max, leaseTtlMs, 1],
      this.redis,
    );
    const woken = new Promise<boolean>((resolve, reject) => {
      pipeline.bzpopmin(this.keys.wake, WAKE_TIMEOUT_SECONDS, (err, popped) => (err ? reject(err) : resolve(!!popped)));
    });
    void pipeline.exec().catch(() => undefined);
    return { claimed: reply.then((claimed) => this.withHistories(claimed)), woken };
  }

  /**
   * Ends a turn its worker ran: releases its lease, ends it compare-and-set, and claims up to
   * `claimNext` turns, all in one step; `events` go to the session's event log with the end.
   */
  async finish(
    turn: { sessionId: string; turnId: string; orgId: string | null },
    outcome: TurnOutcome,
    claimNext: number,
    leaseTtlMs: number,
    events?: TurnEndEvents,
  ): Promise<FinishResult> {
    const [result, released, claimed] = (await finishTurnScript.run(
      this.redis,
      [this.keys.session(turn.sessionId), this.keys.leases],
      [
        this.base,
        turn.sessionId,
        turn.turnId,
        schedulerOrg(turn.orgId),
        this.clock(),
        this.eventsChannel,
        ...outcomeArgs(outcome),
        ENDED_MARKER_TTL_MS,
        claimNext,
        leaseTtlMs,
        ...appendedMessages(outcome),
        ...turnEndLogArgs(this.eventLog, events),
      ],
    )) as ['applied' | 'stale', number, unknown];
    return { result, stillLeased: Number(released) === 1, next: await this.withHistories(claimed) };
  }

  /** Hands a claimed turn that never started back to the front of its queue; false when it was no longer this worker's. */
  async requeue(turn: { sessionId: string; turnId: string; orgId: string | null }): Promise<boolean> {
    const requeued = await requeueTurnScript.run(
      this.redis,
      [this.keys.leases],
      [this.base, turn.sessionId, turn.turnId, schedulerOrg(turn.orgId)],
    );
    return Number(requeued) === 1;
  }

  /** Takes up to `limit` turns whose lease expired and ends each in error with `error` (one step each). */
  async reap(limit: number, error: string): Promise<ReapedTurn[]> {
    const reply = (await reapTurnsScript.run(
      this.redis,
      [this.keys.leases],
      [this.base, limit, this.eventsChannel, ENDED_MARKER_TTL_MS, error, turnEndLogSettings(this.eventLog)],
    )) as Array<[string, string, 'ended' | 'deleted', string | null | false]>;
    return reply.map(([sessionId, turnId, how, jobJson]) => ({
      sessionId,
      turnId,
      how,
      jobJson: typeof jobJson === 'string' ? jobJson : null,
    }));
  }

  /**
   * Waits on `blocking` (a connection of its own: the wait holds it) until a wake token is left or
   * a couple of seconds pass: true when it took a token. The caller claims next either way.
   */
  async waitForWork(blocking: Redis): Promise<boolean> {
    return (await blocking.bzpopmin(this.keys.wake, WAKE_TIMEOUT_SECONDS)) !== null;
  }

  /** Leaves a wake token for an idle worker (one this worker took and cannot use). */
  async wake(): Promise<void> {
    await this.redis.zadd(this.keys.wake, 0, 'w');
  }

  /**
   * The claimed turns of a claim's reply, each with its session's history and whether the session
   * has readers of its event stream (its turn's events are then written, and its model calls
   * streamed, from the start), read in one pipeline (a running session's history does not change
   * until its turn ends; a session deleted since reads empty, and its turn is cancelled). The claim
   * leased the turns to this worker: with `leases`, they are held (heartbeated) from the reply on,
   * and a read that meets a Redis outage is tried again until Redis answers, so an outage at the
   * claim does not cost the turns. A read given up on (or without `leases`) leaves them to lapse:
   * the reaper ends them, as for a claim whose reply was lost.
   */
  private async withHistories(reply: unknown): Promise<ClaimedTurn[]> {
    const claimed = ((reply as Array<[string, string, string, string]> | null) ?? []).map(
      ([sessionId, turnId, org, jobJson]) => ({
        sessionId,
        turnId,
        orgId: org === '' ? null : org,
        jobJson,
      }),
    );
    if (claimed.length === 0) return [];
    for (const turn of claimed) this.leases?.hold(turn.sessionId, turn.turnId, turn.orgId);
    try {
      const reads = await this.readHistories(claimed.map((turn) => turn.sessionId));
      return claimed.map((turn, i) => ({
        ...turn,
        history: (reads[i]?.history ?? []).map((item) => JSON.parse(item) as StoredMessage),
        watched: reads[i]?.watched ?? false,
      }));
    } catch (err) {
      for (const turn of claimed) this.leases?.forget(turn.sessionId, turn.turnId, turn.orgId);
      throw err;
    }
  }

  /**
   * The histories of `sessionIds` and whether each has readers, in one pipeline; tried again while
   * Redis does not answer when leases are held.
   */
  private async readHistories(sessionIds: string[]): Promise<Array<{ history: string[]; watched: boolean }>> {
    const startedAt = Date.now();
    for (let attempt = 0; ; attempt++) {
      try {
        const pipeline = this.redis.pipeline();
        for (const id of sessionIds) pipeline.lrange(this.keys.history(id), 0, -1).exists(this.streams.watch(id));
        const results = (await pipeline.exec()) ?? [];
        const reply = (at: number): unknown => {
          const [err, value] = results[at] ?? [new Error('no reply'), null];
          if (err) throw err;
          return value;
        };
        return sessionIds.map((_, i) => ({
          history: reply(2 * i) as string[],
          watched: Number(reply(2 * i + 1)) === 1,
        }));
      } catch (err) {
        if (!this.leases || Date.now() - startedAt >= HISTORY_RETRY_FOR_MS) throw err;
        const delay = HISTORY_RETRY_DELAYS_MS[Math.min(attempt, HISTORY_RETRY_DELAYS_MS.length - 1)] as number;
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  /**
   * Turns waiting and executing, cluster-wide, in one round trip of O(log n) reads: executing =
   * the leases held, waiting = the running sessions (their turn accepted) less those.
   */
  async counts(): Promise<{ waiting: number; active: number }> {
    const results = await this.redis
      .multi()
      .zcount(this.keys.activity, RUNNING_SCORE, '+inf')
      .zcard(this.keys.leases)
      .exec();
    const running = Number(results?.[0]?.[1] ?? 0);
    const active = Number(results?.[1]?.[1] ?? 0);
    return { waiting: Math.max(0, running - active), active };
  }
}
