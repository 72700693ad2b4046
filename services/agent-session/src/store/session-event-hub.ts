import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { endAnswersChannel, replicaEventsChannel, sessionEventsChannel } from './session-keys';

/**
 * A turn's end or a deletion, as published by the store's scripts; or `running`: a turn another
 * replica started on a session whose previous turn this replica accepted (see recentEnd).
 */
export interface SessionEvent {
  session_id: string;
  status: 'idle' | 'error' | 'deleted' | 'running';
  /** The turn that ended, or started (absent for `deleted`). */
  turn_id?: string;
  /** The ChatMessage as JSON, when status is `idle`. */
  response?: string;
  /** The error message, when status is `error`. */
  error?: string;
}

/** Why a wait ended: a session event arrived, the timeout passed, or the waiter was disposed. */
export type WaitOutcome = 'event' | 'timeout' | 'disposed';

/**
 * One long-poll's registration. Register before reading the session's status: an event that
 * arrives between the read and `next()` is remembered, so no wake-up is lost.
 */
export interface SessionWaiter {
  /** Resolves at the next event for the session (or a pending one), at `deadline` (Unix ms, null = never), or on dispose. */
  next(deadline: number | null): Promise<WaitOutcome>;
  /** The latest event received (null after a reconnect, when the session must be re-read). */
  lastEvent(): SessionEvent | null;
  /** Frees the waiter; a pending `next()` resolves `disposed`. Idempotent. */
  dispose(): void;
}

interface WaiterState {
  pending: boolean;
  event: SessionEvent | null;
  disposed: boolean;
  wake: ((outcome: WaitOutcome) => void) | null;
}

/** Most sessions whose turn a replica remembers from its own sends (see runningTurn, endedHere). */
const MAX_STARTED = 100_000;
/** Most ended turn ids a replica remembers: an end can overtake the reply to its own send. */
const MAX_ENDED = 10_000;

/**
 * How long after its arrival a turn's end answers a long-poll here without a read, ms: a long-poll
 * the end overtook comes within milliseconds of the send's reply; later ones read.
 */
export const END_ANSWER_MS = 1_000;
/** Most bytes of turn ends held for those answers (an end over a tenth of it is not held). */
const END_ANSWER_BYTES = 8 * 1024 * 1024;
/** How often a replica checks that every API replica up tells others of the turns it starts, ms. */
const PEER_CHECK_MS = 5_000;

/** Options of SessionEventHub. */
export interface SessionEventHubOptions {
  /**
   * A connection for commands: with it, long-polls that a turn's end overtook are answered from
   * the end itself (recentEnd) once this replica has checked that every API replica up is of a
   * build that allows it; without it they always read.
   */
  redis?: Redis;
  /** Clock of END_ANSWER_MS (tests). */
  clock?: () => number;
  /** How often the replicas up are checked, ms (PEER_CHECK_MS; tests). */
  peerCheckMs?: number;
  /** Most bytes of turn ends held for answers (END_ANSWER_BYTES; tests). */
  endAnswerBytes?: number;
}

/** A turn a replica started: running until its end arrives, then (for a while) that end. */
interface StartedTurn {
  turnId: string;
  org: string | null;
  ended: boolean;
  /** The end as it arrived, for answers (recentEnd), and when it arrived. */
  end?: SessionEvent;
  endedAt?: number;
}

/** Longest delay setTimeout honours; later deadlines are waited for in steps. */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * Fans session events out to in-process long-polls over ONE Redis subscriber connection per
 * process, so thousands of waiters cost a Map entry each, not a connection. It listens on two
 * channels: this replica's own (`replicaId`), where a turn's end arrives when a long-poll here
 * registered on its session (SessionStore.getWatched: the session hash's `waiters`), and the
 * shared one, where deletions arrive, and the ends of turns no replica registered on (as
 * published by builds before the registration). So a turn's end costs Redis one delivery per
 * replica that waits on it, not one per replica. After the subscriber reconnects every waiter is
 * woken to re-read (and register again), since events published while it was down are lost.
 */
export class SessionEventHub {
  /** This process's id among the API replicas, in the `waiters` of the sessions it waits on. */
  readonly replicaId = randomUUID();
  private readonly waiters = new Map<string, Set<WaiterState>>();
  /**
   * Sessions whose latest turn this replica started (and registered on), oldest first: running
   * until its end arrives here (`ended`), after which a long-poll that the end overtook reads the
   * session plainly (see endedHere).
   */
  private readonly startedTurns = new Map<string, StartedTurn>();
  /** The latest turn ids seen ending here, oldest first. */
  private readonly ended = new Set<string>();
  /** The ends held in `startedTurns` for answers (recentEnd), oldest first, with their size. */
  private readonly heldEnds: Array<{ sessionId: string; turnId: string; at: number; bytes: number }> = [];
  private heldBytes = 0;
  /** True while every API replica subscribed is of a build whose sends tell others (see recentEnd). */
  private peersTell = false;
  private peerCheck: NodeJS.Timeout | null = null;
  private readonly channel: string;
  private readonly ownChannel: string;
  private readonly answersChannel: string;
  private started: Promise<void> | null = null;
  private connectedOnce = false;
  private closed = false;

  private readonly redis: Redis | null;
  private readonly clock: () => number;
  private readonly peerCheckMs: number;
  private readonly endAnswerBytes: number;

  constructor(
    private readonly subscriber: Redis,
    prefix: string,
    options: SessionEventHubOptions = {},
  ) {
    this.redis = options.redis ?? null;
    this.clock = options.clock ?? Date.now;
    this.peerCheckMs = options.peerCheckMs ?? PEER_CHECK_MS;
    this.endAnswerBytes = options.endAnswerBytes ?? END_ANSWER_BYTES;
    this.channel = sessionEventsChannel(prefix);
    this.ownChannel = replicaEventsChannel(prefix, this.replicaId);
    this.answersChannel = endAnswersChannel(prefix);
  }

  /** Subscribes the channel; resolves once events flow. Call before serving long-polls. */
  start(): Promise<void> {
    this.started ??= (async () => {
      this.subscriber.on('message', (channel: string, message: string) => {
        if (channel === this.channel || channel === this.ownChannel) this.onMessage(message);
      });
      this.subscriber.on('ready', () => {
        // Re-read only once the subscription is confirmed again, so no event falls in between.
        if (this.connectedOnce) {
          this.subscriber.subscribe(...this.channels()).then(
            () => this.wakeAll(),
            () => this.wakeAll(),
          );
        }
      });
      await this.subscriber.subscribe(...this.channels());
      this.connectedOnce = true;
      if (this.redis && !this.closed) {
        await this.checkPeers();
        this.peerCheck = setInterval(() => void this.checkPeers(), this.peerCheckMs);
        this.peerCheck.unref();
      }
    })();
    return this.started;
  }

  private channels(): string[] {
    return this.redis ? [this.channel, this.ownChannel, this.answersChannel] : [this.channel, this.ownChannel];
  }

  /**
   * Whether every API replica up tells the replica that accepted a session's previous turn when it
   * starts the next (the start script of this build does): every replica subscribes to the shared
   * channel, and those of this build also to the answers channel, so the counts match only when no
   * replica of an earlier build (whose sends tell no one) is up. Until it is known, nothing is
   * answered from ends.
   */
  private async checkPeers(): Promise<void> {
    try {
      const counts = (await this.redis?.call('PUBSUB', 'NUMSUB', this.channel, this.answersChannel)) as unknown[];
      const all = Number(counts?.[1] ?? Infinity);
      const telling = Number(counts?.[3] ?? 0);
      this.peersTell = all <= telling;
    } catch {
      this.peersTell = false;
    }
  }

  /** Number of registered waiters (for tests and metrics). */
  get size(): number {
    let total = 0;
    for (const set of this.waiters.values()) total += set.size;
    return total;
  }

  /**
   * Notes that this replica started `turnId` on `sessionId` (registering itself among the
   * session's `waiters` in the same step): until the turn's end arrives here, a long-poll here
   * knows the session runs it without reading Redis (see runningTurn). Not while the subscriber is
   * away (events may be lost then), nor for a turn whose end already arrived.
   */
  noteStarted(sessionId: string, turnId: string, org: string | null): void {
    this.forgetSession(sessionId);
    if (this.closed || this.subscriber.status !== 'ready' || this.ended.has(turnId)) return;
    this.remember(sessionId, { turnId, org, ended: false });
  }

  /**
   * The turn `sessionId` runs, when this replica started it for `org` and has seen neither its end
   * nor the session's deletion since (nor a reconnection of the subscriber); else null (read it).
   */
  runningTurn(sessionId: string, org: string | null): string | null {
    const known = this.startedTurns.get(sessionId);
    return known && !known.ended && known.org === org ? known.turnId : null;
  }

  /**
   * True when this replica started the turn `sessionId` last ran for `org` (as far as it knows) and
   * has seen that turn end since, with no deletion or reconnection in between: the session most
   * likely does not run now, so a long-poll reads it without registering (SessionStore.get), and
   * registers only if it finds a turn started elsewhere since. A hint, never an answer: the session
   * is still read.
   */
  endedHere(sessionId: string, org: string | null): boolean {
    const known = this.startedTurns.get(sessionId);
    return known !== undefined && known.ended && known.org === org;
  }

  /**
   * Forgets what this replica knows of `sessionId`'s turns; a send calls it before its script runs,
   * so a send whose outcome is unknown (its reply lost) leaves nothing here to answer from.
   */
  forgetSession(sessionId: string): void {
    this.startedTurns.delete(sessionId);
  }

  /**
   * The end of the turn this replica last started on `sessionId` for `org`, when it arrived here
   * under END_ANSWER_MS ago and nothing since says the session changed: an answer for a long-poll
   * that the end overtook, without reading Redis. It is the session's state unless another replica
   * started a turn since; a send of this build on another replica tells this one of it (it is the
   * session's `sent_on`), and ends are answered from only while every API replica up is of such a
   * build (checked every few seconds). So an answer is older than its request by at most that
   * notice's way from Redis to here, as for a long-poll woken by an end. Else null (read).
   */
  recentEnd(sessionId: string, org: string | null): SessionEvent | null {
    const known = this.startedTurns.get(sessionId);
    if (!this.peersTell || this.closed || this.subscriber.status !== 'ready') return null;
    if (!known?.end || known.org !== org) return null;
    if (this.clock() - (known.endedAt ?? 0) > END_ANSWER_MS) return null;
    return known.end;
  }

  /** Registers a waiter for `sessionId`; dispose it when the request ends. */
  register(sessionId: string): SessionWaiter {
    const state: WaiterState = { pending: false, event: null, disposed: false, wake: null };
    let set = this.waiters.get(sessionId);
    if (!set) this.waiters.set(sessionId, (set = new Set()));
    set.add(state);
    const dispose = () => {
      if (state.disposed) return;
      state.disposed = true;
      const current = this.waiters.get(sessionId);
      current?.delete(state);
      if (current?.size === 0) this.waiters.delete(sessionId);
      state.wake?.('disposed');
    };
    const next = (deadline: number | null) =>
      new Promise<WaitOutcome>((resolve) => {
        if (state.disposed) return resolve('disposed');
        if (this.closed) return resolve('timeout');
        if (state.pending) {
          state.pending = false;
          return resolve('event');
        }
        let timer: NodeJS.Timeout | null = null;
        const arm = () => {
          if (deadline === null) return;
          const remaining = deadline - Date.now();
          if (remaining <= 0) return finish('timeout');
          timer = setTimeout(arm, Math.min(remaining, MAX_TIMER_MS));
        };
        const finish = (outcome: WaitOutcome) => {
          if (timer) clearTimeout(timer);
          state.wake = null;
          if (outcome === 'event') state.pending = false;
          resolve(outcome);
        };
        state.wake = finish;
        arm();
      });
    return { next, dispose, lastEvent: () => state.event };
  }

  /**
   * Ends every wait as if its timeout had passed (each long-poll answers its current state) and
   * makes later waits end at once; for shutdown, so open long-polls do not hold the server.
   */
  close(): void {
    this.closed = true;
    if (this.peerCheck) clearInterval(this.peerCheck);
    for (const set of this.waiters.values()) for (const state of set) state.wake?.('timeout');
  }

  private onMessage(message: string): void {
    let event: SessionEvent;
    try {
      event = JSON.parse(message) as SessionEvent;
    } catch {
      return;
    }
    if (typeof event?.session_id !== 'string') return;
    if (event.status === 'running') {
      // Another replica started a turn on a session whose previous turn this one accepted: what
      // this one knows of it no longer holds (unless it is that very turn). No long-poll waits on it.
      if (this.startedTurns.get(event.session_id)?.turnId !== event.turn_id) this.forgetSession(event.session_id);
      return;
    }
    this.forgetStarted(event, message.length);
    const set = this.waiters.get(event.session_id);
    if (set) for (const state of set) this.notify(state, event);
  }

  /** A turn's end or a deletion: the session no longer runs the turn this replica noted. */
  private forgetStarted(event: SessionEvent, bytes: number): void {
    const known = this.startedTurns.get(event.session_id);
    if (event.status === 'deleted' || typeof event.turn_id !== 'string') {
      this.startedTurns.delete(event.session_id);
      return;
    }
    if (known?.turnId === event.turn_id) {
      this.startedTurns.delete(event.session_id);
      const ended: StartedTurn = { turnId: known.turnId, org: known.org, ended: true };
      if (this.redis && bytes <= this.endAnswerBytes / 10) {
        ended.end = event;
        ended.endedAt = this.clock();
        this.holdEnd(event.session_id, known.turnId, ended.endedAt, bytes);
      }
      this.remember(event.session_id, ended);
    }
    this.ended.add(event.turn_id);
    if (this.ended.size > MAX_ENDED) this.ended.delete(this.ended.values().next().value as string);
  }

  /**
   * Accounts for an end held for answers; drops the oldest held ends (their answers, not what they
   * say of the session) past END_ANSWER_MS or END_ANSWER_BYTES.
   */
  private holdEnd(sessionId: string, turnId: string, at: number, bytes: number): void {
    this.heldEnds.push({ sessionId, turnId, at, bytes });
    this.heldBytes += bytes;
    while (this.heldEnds.length > 0) {
      const oldest = this.heldEnds[0] as (typeof this.heldEnds)[number];
      if (this.heldBytes <= this.endAnswerBytes && at - oldest.at <= END_ANSWER_MS) break;
      this.heldEnds.shift();
      this.heldBytes -= oldest.bytes;
      const known = this.startedTurns.get(oldest.sessionId);
      if (known?.turnId === oldest.turnId) delete known.end;
    }
  }

  /** Notes a session's latest turn as the newest entry, dropping the oldest past MAX_STARTED. */
  private remember(sessionId: string, turn: StartedTurn): void {
    this.startedTurns.set(sessionId, turn);
    if (this.startedTurns.size > MAX_STARTED) this.startedTurns.delete(this.startedTurns.keys().next().value as string);
  }

  private wakeAll(): void {
    // Events may have been lost while the subscriber was away: what was noted is read again.
    this.startedTurns.clear();
    for (const set of this.waiters.values()) for (const state of set) this.notify(state, null);
  }

  private notify(state: WaiterState, event: SessionEvent | null): void {
    state.event = event;
    if (state.wake) state.wake('event');
    else state.pending = true;
  }
}
