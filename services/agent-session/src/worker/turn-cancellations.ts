import type { Redis } from 'ioredis';
import type { Logger } from '@tollway/service-kit';
import { turnCancelChannel } from '../store/session-store';

/**
 * Listens on the turn-cancel channel (`{ session_id, turn_id }` JSON, published when a session is
 * deleted while it runs) and aborts the controller of a turn this worker holds. A turn is tracked
 * from before its context is read, so a deletion racing the start is never missed.
 */
export class TurnCancellations {
  private readonly held = new Map<string, AbortController>();

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
  track(turnId: string): AbortSignal {
    const controller = new AbortController();
    this.held.set(turnId, controller);
    return controller.signal;
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
    if (typeof turnId !== 'string') return;
    const controller = this.held.get(turnId);
    if (!controller) return;
    this.logger.info('cancelling turn: session deleted', { turn_id: turnId });
    controller.abort();
  }
}
