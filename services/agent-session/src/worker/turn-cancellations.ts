import type { Redis } from 'ioredis';
import type { Logger } from '@tollway/service-kit';
import { sessionKeys } from '../store/session-keys';
import { turnCancelChannel } from '../store/session-store';

/**
 * Listens on the turn-cancel channel (`{ session_id, turn_id }` JSON, published when a session is
 * deleted while it runs) and aborts the controller of a turn this worker holds. A turn is tracked
 * from before its context is read, so a deletion racing the start is never missed. Pub/sub is
 * at-most-once (a message published while the subscriber reconnects is lost), so `checkDeleted`,
 * run with every heartbeat, also cancels held turns whose session no longer exists.
 */
export class TurnCancellations {
  private readonly held = new Map<string, { sessionId: string; controller: AbortController }>();

  private constructor(
    private readonly subscriber: Redis,
    private readonly logger: Logger,
  ) {}

  /** Subscribes `subscriber` (a dedicated connection) to the cancel channel under `prefix`. */
  static async start(subscriber: Redis, prefix: string, logger: Logger): Promise<TurnCancellations> {
    const cancellations = new TurnCancellations(subscriber, logger);
    const channel = turnCancelChannel(prefix);
    subscriber.on('message', (from: string, payload: string) => {
      if (from === channel) cancellations.onMessage(payload);
    });
    await subscriber.subscribe(channel);
    return cancellations;
  }

  /** Starts tracking a turn; its signal aborts when the turn's session is deleted. */
  track(turnId: string, sessionId: string): AbortSignal {
    const controller = new AbortController();
    this.held.set(turnId, { sessionId, controller });
    return controller.signal;
  }

  /** Cancels every held turn whose session is gone (deleted while a cancel message was lost). */
  async checkDeleted(redis: Redis, prefix: string): Promise<void> {
    const held = [...this.held.entries()];
    if (held.length === 0) return;
    const keys = sessionKeys(prefix);
    const pipeline = redis.pipeline();
    for (const [, turn] of held) pipeline.exists(keys.session(turn.sessionId));
    const results = (await pipeline.exec()) ?? [];
    held.forEach(([turnId, turn], i) => {
      if (results[i]?.[0] === null && results[i]?.[1] === 0 && !turn.controller.signal.aborted) {
        this.cancel(turnId, 'session gone');
      }
    });
  }

  /** Stops tracking a turn. */
  untrack(turnId: string): void {
    this.held.delete(turnId);
  }

  /** Unsubscribes and closes the subscriber connection. */
  async close(): Promise<void> {
    await this.subscriber.quit().catch(() => this.subscriber.disconnect());
  }

  private onMessage(payload: string): void {
    let turnId: unknown;
    try {
      turnId = (JSON.parse(payload) as { turn_id?: unknown }).turn_id;
    } catch {
      this.logger.warn('ignoring a malformed turn-cancel message');
      return;
    }
    if (typeof turnId === 'string') this.cancel(turnId, 'cancel message');
  }

  private cancel(turnId: string, reason: string): void {
    const turn = this.held.get(turnId);
    if (!turn) return;
    this.logger.info('cancelling turn: session deleted', { turn_id: turnId, session_id: turn.sessionId, reason });
    turn.controller.abort();
  }
}
