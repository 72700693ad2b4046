import type { Redis } from 'ioredis';
import type { Logger } from '@tollway/service-kit';
import type { AgentStreamEvent } from '../agents/agent.types';
import { sessionKeys } from '../store/session-keys';
import { streamKeys, type EventLogRetention, type TurnEndEvents } from '../store/event-log-keys';
import { EventBatch, serializeEvents, type PendingEvent } from './event-batch';
import { appendEventsScript } from './lua/append-events.script';

/** Options of TurnEventStreams. */
export interface TurnEventStreamsOptions {
  /** The worker's command connection. */
  redis: Redis;
  /** A subscriber connection (shared with other listeners of the worker); not closed here. */
  subscriber: Redis;
  prefix: string;
  retention: EventLogRetention;
  /** Least time between two writes of one turn's events, ms. */
  flushIntervalMs: number;
  /** Text (characters) waiting that makes a write go out before the interval. */
  flushChars: number;
  logger: Logger;
}

/** The turn a stream writes for. */
export interface TurnIdentityForEvents {
  sessionId: string;
  turnId: string;
  /** The session's organization, null without auth. */
  orgId: string | null;
}

/** Waits before writing again after a write failed (Redis unreachable), ms; the last repeats. */
const RETRY_DELAYS_MS = [100, 250, 500, 1000, 2000];

/**
 * The worker's side of the session event streams: one TurnEventStream per running turn, and the
 * subscription that tells a turn its session just got a reader (a watch key created, published
 * on the watch channel), so it starts writing at once instead of at its next check.
 */
export class TurnEventStreams {
  private readonly bySession = new Map<string, Set<TurnEventStream>>();
  private readonly channel: string;
  private connectedOnce = false;

  private constructor(readonly options: TurnEventStreamsOptions) {
    this.channel = streamKeys(options.prefix).watchChannel;
  }

  /** Subscribes the watch channel; resolves once notices flow. */
  static async start(options: TurnEventStreamsOptions): Promise<TurnEventStreams> {
    const streams = new TurnEventStreams(options);
    const { subscriber } = options;
    subscriber.on('message', (channel: string, sessionId: string) => {
      if (channel === streams.channel) streams.notify(sessionId);
    });
    subscriber.on('ready', () => {
      // A notice published while the subscriber was away is lost: every turn not yet streaming
      // checks again once the subscription is back.
      if (!streams.connectedOnce) return;
      const recheck = () => {
        for (const sessionId of streams.bySession.keys()) streams.notify(sessionId);
      };
      subscriber.subscribe(streams.channel).then(recheck, recheck);
    });
    await subscriber.subscribe(streams.channel);
    streams.connectedOnce = true;
    return streams;
  }

  /** A stream for one turn; `begin()` it as the agent starts, `close()` it when the turn is over. */
  open(turn: TurnIdentityForEvents): TurnEventStream {
    const stream = new TurnEventStream(this, turn);
    let set = this.bySession.get(turn.sessionId);
    if (!set) this.bySession.set(turn.sessionId, (set = new Set()));
    set.add(stream);
    return stream;
  }

  /** @internal */
  forget(stream: TurnEventStream): void {
    const set = this.bySession.get(stream.turn.sessionId);
    set?.delete(stream);
    if (set?.size === 0) this.bySession.delete(stream.turn.sessionId);
  }

  private notify(sessionId: string): void {
    for (const stream of this.bySession.get(sessionId) ?? []) stream.watched();
  }
}

/**
 * The events of one running turn on their way to its session's log. While no one reads the
 * session they wait here, deltas merged (the text written so far is one delta), and cost Redis
 * nothing but the check at the turn's start; once a reader appears they are written, and from
 * then on in batches, at most one write per flush interval (sooner when much text waits), never
 * one per token. The worker never waits on a reader: it only writes to Redis. What is left when
 * the turn ends goes out with the script that ends it (`finishing`).
 */
export class TurnEventStream {
  private readonly batch = new EventBatch();
  private mode: 'check' | 'write' = 'check';
  private startId = '';
  private state: 'open' | 'finishing' | 'closed' = 'open';
  private inFlight: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private lastWriteAt = 0;
  private failures = 0;
  private recheck = false;
  /** A notice that the session has a reader came (maybe before `begin`). */
  private noticed = false;
  /** The session has readers (a reader was known at the turn's start, or a write went out since). */
  private isLive = false;
  private readonly liveListeners: Array<() => void> = [];

  constructor(
    private readonly owner: TurnEventStreams,
    readonly turn: TurnIdentityForEvents,
  ) {}

  /**
   * The turn starts: `turn.started` waits first, and one check asks whether the session has
   * readers. `watched` false skips that check when the caller read the watch key already, in the
   * step that claimed the turn (a reader that comes after is announced on the watch channel).
   */
  begin(watched?: boolean): void {
    this.batch.add({ type: 'turn.started', session_id: this.turn.sessionId, turn_id: this.turn.turnId });
    if (watched === true) this.goLive();
    if (watched !== false || this.noticed) void this.flush();
  }

  /** True while the session has readers: the agent streams its model calls then. */
  get live(): boolean {
    return this.isLive;
  }

  /** Calls `listener` once when the turn goes live (a reader came). */
  onLive(listener: () => void): void {
    if (!this.isLive) this.liveListeners.push(listener);
  }

  private goLive(): void {
    if (this.isLive) return;
    this.isLive = true;
    for (const listener of this.liveListeners.splice(0)) listener();
  }

  /** Events the agent emitted (the child pool hands them over). */
  push(events: AgentStreamEvent[]): void {
    if (this.state !== 'open') return;
    for (const event of events) {
      this.batch.add({ ...event, session_id: this.turn.sessionId, turn_id: this.turn.turnId } as PendingEvent);
    }
    if (this.mode === 'write') this.schedule();
  }

  /** The session may have a reader now: a turn not streaming yet checks (and writes if so). */
  watched(): void {
    this.noticed = true;
    if (this.state !== 'open' || this.mode === 'write') return;
    if (this.inFlight) this.recheck = true;
    else void this.flush();
  }

  /**
   * The turn ends: writing stops (a write under way is waited for) and what was not written is
   * returned, to go with the script that ends the turn, with the ending event's `trace_metrics`.
   */
  async finishing(traceMetricsJson: string): Promise<TurnEndEvents> {
    this.state = 'finishing';
    this.clearTimer();
    await this.inFlight;
    return { mode: this.mode, startId: this.startId, traceMetricsJson, pending: serializeEvents(this.batch.take()) };
  }

  /** The turn is over (ended, cancelled or dropped): nothing more is written. */
  close(): void {
    this.state = 'closed';
    this.clearTimer();
    this.owner.forget(this);
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private schedule(delayMs?: number): void {
    if (this.timer || this.inFlight || this.state !== 'open' || this.batch.length === 0) return;
    const { flushIntervalMs, flushChars } = this.owner.options;
    const wait =
      delayMs ??
      (this.batch.textChars >= flushChars ? 0 : Math.max(0, this.lastWriteAt + flushIntervalMs - Date.now()));
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.flush();
    }, wait);
  }

  private flush(): Promise<void> {
    if (this.state !== 'open' || this.inFlight) return this.inFlight ?? Promise.resolve();
    const taken = this.batch.take();
    if (taken.length === 0) return Promise.resolve();
    const { redis, prefix, retention, logger } = this.owner.options;
    const { sessionId, turnId, orgId } = this.turn;
    const streams = streamKeys(prefix);
    const args: Array<string | number> = [turnId, orgId ?? '', retention.maxEntries, retention.retentionMs];
    args.push(this.mode, this.startId, ...serializeEvents(taken).flat());
    this.inFlight = (async () => {
      let retryIn: number | undefined;
      try {
        const [written, startId] = (await appendEventsScript.run(
          redis,
          [sessionKeys(prefix).session(sessionId), streams.events(sessionId), streams.watch(sessionId)],
          args,
        )) as [number, string];
        this.failures = 0;
        if (written === 1) {
          this.mode = 'write';
          this.startId = startId;
          this.lastWriteAt = Date.now();
          this.goLive();
        } else if (written === 0) {
          this.batch.restore(taken);
        } else {
          // Ended or deleted meanwhile: nothing of it may be written any more.
          this.state = this.state === 'open' ? 'closed' : this.state;
        }
      } catch (err) {
        this.batch.restore(taken);
        if (this.failures++ === 0) {
          logger.warn('writing turn events failed; trying again', { turn_id: turnId, err: (err as Error).message });
        }
        retryIn = RETRY_DELAYS_MS[Math.min(this.failures - 1, RETRY_DELAYS_MS.length - 1)];
      } finally {
        this.inFlight = null;
      }
      if (this.mode === 'write') this.schedule(retryIn);
      else if (this.recheck || retryIn !== undefined) {
        this.recheck = false;
        if (retryIn === undefined) void this.flush();
        else this.retryCheck(retryIn);
      }
    })();
    return this.inFlight;
  }

  /** A failed check is tried again (while the turn runs): a reader must not wait for the next notice. */
  private retryCheck(delayMs: number): void {
    if (this.timer || this.state !== 'open') return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.flush();
    }, delayMs);
  }
}
