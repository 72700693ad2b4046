import { z } from 'zod';
import { ChatMessage } from './session.schema.js';

export const WebhookSpec = z.object({
  /** Address the payload is POSTed to; http or https only. */
  url: z.url({ protocol: /^https?$/ }),
  token: z.string().nullable().default(null),
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
