import { Webhook } from 'standardwebhooks';

/** Standard Webhooks headers of one delivery. */
export interface WebhookSignatureHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature'?: string;
}

/**
 * Signs deliveries per Standard Webhooks with `WEBHOOK_SIGNING_SECRET` (`whsec_…`, base64): the
 * signature covers `<id>.<timestamp>.<body>`. Without a secret the id and timestamp are still sent,
 * so idempotent receivers can deduplicate.
 */
export class WebhookSigner {
  private readonly webhook: Webhook | null;

  constructor(secret: string | undefined) {
    this.webhook = secret ? new Webhook(secret) : null;
  }

  /** The headers of a delivery of `body` with event id `eventId` at `at`. */
  headers(eventId: string, body: string, at: Date = new Date()): WebhookSignatureHeaders {
    const timestamp = String(Math.floor(at.getTime() / 1000));
    if (!this.webhook) return { 'webhook-id': eventId, 'webhook-timestamp': timestamp };
    return {
      'webhook-id': eventId,
      'webhook-timestamp': timestamp,
      'webhook-signature': this.webhook.sign(eventId, at, body),
    };
  }
}
