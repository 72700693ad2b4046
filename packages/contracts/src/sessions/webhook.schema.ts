import { z } from 'zod';
import { ChatMessage } from './session.schema.js';

/** Bounds of a WebhookSpec: the URL's length and the token's length. */
export const WEBHOOK_BOUNDS = { urlMaxLength: 2048, tokenMaxLength: 4096 } as const;

/**
 * A bearer token is sent as `Authorization: Bearer <token>`, so it must be a valid header value;
 * visible ASCII only (RFC 6750 tokens are a subset), checked when the message is sent, not when
 * the delivery would fail.
 */
const WEBHOOK_TOKEN = /^[\x21-\x7e]*$/;

export const WebhookSpec = z.object({
  /** Address the payload is POSTed to; http or https only, at most 2048 characters. */
  url: z.url({ protocol: /^https?$/ }).max(WEBHOOK_BOUNDS.urlMaxLength),
  /** Bearer token of the delivery: visible ASCII (no spaces or control characters), at most 4096 characters. */
  token: z
    .string()
    .max(WEBHOOK_BOUNDS.tokenMaxLength)
    .regex(WEBHOOK_TOKEN, 'must be visible ASCII characters only (it is sent in the Authorization header)')
    .nullable()
    .default(null),
  include_messages: z.boolean().default(false),
});
export type WebhookSpec = z.infer<typeof WebhookSpec>;

export const TraceMetrics = z.object({
  trace_id: z.string().nullable(),
  /** Wall-clock seconds for the turn. */
  total_duration: z.number(),
  total_tokens: z.number().int().min(0),
  has_error: z.boolean(),
});
export type TraceMetrics = z.infer<typeof TraceMetrics>;

export const WebhookPayload = z.object({
  session_id: z.string(),
  status: z.enum(['idle', 'error']),
  response: ChatMessage.nullable(),
  error: z.string().nullable(),
  messages: z.array(ChatMessage).nullable(),
  trace_metrics: TraceMetrics.nullable(),
});
export type WebhookPayload = z.infer<typeof WebhookPayload>;
