import http from 'node:http';
import https from 'node:https';
import type { WebhookPayload, WebhookSpec } from '@tollway/contracts';
import type { Logger } from '@tollway/service-kit';
import { AddressPolicy } from './address-policy';
import { WebhookSigner } from './webhook-signer';

/** Options of WebhookDelivery. */
export interface WebhookDeliveryOptions {
  logger: Logger;
  /** Timeout of one delivery attempt, response included, in ms (the spec's 10 s by default). */
  timeoutMs: number;
  /** Standard Webhooks secret (`whsec_…`); deliveries are signed when set. */
  signingSecret?: string;
  /** Host names, addresses and CIDRs exempt from the public-address rule. */
  allowedHosts?: readonly string[];
}

/** How one delivery went (also logged). */
export type DeliveryResult = { ok: true; status: number } | { ok: false; status?: number; reason: string };

/**
 * Delivers turn-complete callbacks by the spec's rules: one POST of the JSON payload, a timeout, no
 * retry, failures logged only; `Authorization: Bearer` only with a token; a unique `webhook-id`
 * (Standard Webhooks headers, signed when a secret is set); only to addresses the policy allows.
 */
export class WebhookDelivery {
  private readonly policy: AddressPolicy;
  private readonly signer: WebhookSigner;
  private readonly inFlight = new Set<Promise<DeliveryResult>>();

  constructor(private readonly options: WebhookDeliveryOptions) {
    this.policy = new AddressPolicy(options.allowedHosts);
    this.signer = new WebhookSigner(options.signingSecret);
  }

  /**
   * Starts a delivery and returns at once; the promise never rejects: it runs after the turn,
   * outside any request, where a throw would end the worker process (and every turn on it).
   */
  deliver(spec: WebhookSpec, payload: WebhookPayload, eventId: string): Promise<DeliveryResult> {
    const attempt = this.attempt(spec, payload, eventId)
      .catch((err: unknown): DeliveryResult => ({ ok: false, reason: `delivery could not start: ${describeAny(err)}` }))
      .then((result) => {
        this.inFlight.delete(attempt);
        const meta = { session_id: payload.session_id, webhook_id: eventId, host: safeHost(spec.url) };
        if (result.ok) this.options.logger.info('webhook delivered', { ...meta, status: result.status });
        else
          this.options.logger.warn('webhook delivery failed', {
            ...meta,
            status: result.status,
            reason: result.reason,
          });
        return result;
      });
    this.inFlight.add(attempt);
    return attempt;
  }

  /** Waits for the deliveries under way (orderly shutdown). */
  async drain(): Promise<void> {
    await Promise.all([...this.inFlight]);
  }

  private attempt(spec: WebhookSpec, payload: WebhookPayload, eventId: string): Promise<DeliveryResult> {
    return new Promise<DeliveryResult>((resolve) => {
      let url: URL;
      try {
        url = new URL(spec.url);
        if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('not an http(s) URL');
        this.policy.checkLiteral(url.hostname.replace(/^\[|\]$/g, ''));
      } catch (err) {
        return resolve({ ok: false, reason: err instanceof Error ? err.message : String(err) });
      }
      // Node refuses a header value it cannot send (ERR_INVALID_CHAR) by throwing; the token is
      // checked when the message is sent, this covers jobs queued before that check existed.
      try {
        this.send(url, spec, payload, eventId, resolve);
      } catch (err) {
        resolve({ ok: false, reason: describeAny(err) });
      }
    });
  }

  private send(
    url: URL,
    spec: WebhookSpec,
    payload: WebhookPayload,
    eventId: string,
    resolve: (result: DeliveryResult) => void,
  ): void {
    const body = JSON.stringify(payload);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      'user-agent': 'tollway-agent-session',
      ...this.signer.headers(eventId, body),
    };
    if (spec.token) headers.authorization = `Bearer ${spec.token}`;
    const transport = url.protocol === 'https:' ? https : http;
    const request = transport.request(url, {
      method: 'POST',
      headers,
      agent: false,
      lookup: this.policy.lookup as never,
      signal: AbortSignal.timeout(this.options.timeoutMs),
    });
    request.on('response', (response) => {
      const status = response.statusCode ?? 0;
      response.on('error', (err) => resolve({ ok: false, status, reason: describe(err, this.options.timeoutMs) }));
      response.on('end', () =>
        resolve(
          status >= 200 && status < 300 ? { ok: true, status } : { ok: false, status, reason: `status ${status}` },
        ),
      );
      response.on('close', () => resolve({ ok: false, status, reason: 'connection closed before the response ended' }));
      response.resume();
    });
    request.on('error', (err) => resolve({ ok: false, reason: describe(err, this.options.timeoutMs) }));
    request.end(body);
  }
}

function describeAny(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function describe(err: Error, timeoutMs: number): string {
  if (err.name === 'AbortError' || err.name === 'TimeoutError') return `timed out after ${timeoutMs} ms`;
  return err.message;
}

function safeHost(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return 'invalid-url';
  }
}
