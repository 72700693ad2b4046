import type { AgentTurnJob } from '@tollway/contracts';
import { buildWebhookPayload, TURN_CANCELLED_ERROR, type TurnReport } from './webhook-payload';
import type { WebhookDelivery } from './webhook-delivery';

/**
 * Sends a turn's callback when its message asked for one. The event id is derived from the turn
 * (`msg_<turn_id>`): a turn ends exactly once (compare-and-set), so the id is unique per delivery
 * and stable for receivers that deduplicate.
 */
export class TurnNotifier {
  constructor(
    private readonly delivery: WebhookDelivery,
    private readonly tracingEnabled: boolean,
  ) {}

  /** Starts the delivery without waiting for it; nothing happens when the message had no webhook. */
  notify(job: Pick<AgentTurnJob, 'turn_id' | 'message'>, report: TurnReport): void {
    const spec = job.message.webhook;
    if (!spec) return;
    void this.delivery.deliver(
      spec,
      buildWebhookPayload(spec, report, this.tracingEnabled),
      webhookEventId(job.turn_id),
    );
  }

  /**
   * Sends the callback of a turn its session's deletion cancelled (`turn cancelled: session
   * deleted`, status `error`); `history` only where it is still known.
   */
  notifyCancelled(
    job: Pick<AgentTurnJob, 'session_id' | 'turn_id' | 'message'>,
    report: { durationMs: number; history?: TurnReport['history']; traceId?: string | null },
  ): void {
    this.notify(job, {
      sessionId: job.session_id,
      end: { kind: 'error', error: TURN_CANCELLED_ERROR },
      history: report.history ?? null,
      durationMs: report.durationMs,
      totalTokens: 0,
      traceId: report.traceId,
    });
  }

  /** Waits for deliveries under way. */
  drain(): Promise<void> {
    return this.delivery.drain();
  }
}

/** The Standard Webhooks event id of a turn's callback. */
export function webhookEventId(turnId: string): string {
  return `msg_${turnId}`;
}
