import type { Redis } from 'ioredis';
import type { Logger } from '@tollway/service-kit';
import { turnCancelChannel } from '../store/session-store';

/**
 * Listens on the turn-cancel channel (`{ session_id, turn_id }` JSON, published when a session is
 * deleted while it runs) and aborts the controller of a turn this worker holds. Pub/sub is
 * at-most-once (a message published while the subscriber reconnects is lost), so the heartbeat also
 * reports held turns whose session no longer exists (or whose lease a reaper took), and
 * `cancelLost` stops them.
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

  /** Cancels the held turns the heartbeat found without their session or their lease. */
  cancelLost(turns: ReadonlyArray<{ turnId: string }>): void {
    for (const { turnId } of turns) {
      const turn = this.held.get(turnId);
      if (turn && !turn.controller.signal.aborted) this.cancel(turnId, 'session or lease gone');
    }
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
