import { z } from 'zod';
import { ChatMessageRole } from './session.schema.js';
import { WebhookSpec } from './webhook.schema.js';

/**
 * Body of `POST /sessions/{session_id}/messages`. Extends ChatMessage with `tool_calls`,
 * `tool_call_id`, `name` and `base64_image` (types chosen as OpenAI's: an array of tool-call
 * objects, strings, and a base64 image without or with a `data:` URL prefix).
 */
export const MessageRequest = z.object({
  content: z.string().nullable().default(null),
  role: ChatMessageRole.default('user'),
  user_params: z.record(z.string(), z.unknown()).nullable().default(null),
  webhook: WebhookSpec.nullable().default(null),
  tool_calls: z.array(z.record(z.string(), z.unknown())).optional(),
  tool_call_id: z.string().optional(),
  name: z.string().optional(),
  base64_image: z.string().min(1).optional(),
});
export type MessageRequest = z.infer<typeof MessageRequest>;

export const MessageResponse = z.object({
  session_id: z.uuid(),
  status: z.literal('running'),
});
export type MessageResponse = z.infer<typeof MessageResponse>;
