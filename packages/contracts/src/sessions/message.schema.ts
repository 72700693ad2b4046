import { z } from 'zod';
import { ChatMessageRole } from './session.schema.js';
import { WebhookSpec } from './webhook.schema.js';

/**
 * Bounds of a MessageRequest besides the service's body size: `user_params` as JSON, the tool
 * calls of one message, and the strings that name things.
 */
export const MESSAGE_BOUNDS = { userParamsMaxJsonBytes: 64 * 1024, toolCallsMax: 128, idMaxLength: 256 } as const;

/**
 * Body of `POST /sessions/{session_id}/messages`. Extends ChatMessage with `tool_calls`,
 * `tool_call_id`, `name` and `base64_image` (types chosen as OpenAI's: an array of tool-call
 * objects, strings, and a base64 image without or with a `data:` URL prefix).
 */
export const MessageRequest = z.object({
  content: z.string().nullable().default(null),
  role: ChatMessageRole.default('user'),
  /** Passed to the agent; at most 64 KiB as JSON. */
  user_params: z
    .record(z.string(), z.unknown())
    .refine((params) => JSON.stringify(params).length <= MESSAGE_BOUNDS.userParamsMaxJsonBytes, {
      message: `must be at most ${MESSAGE_BOUNDS.userParamsMaxJsonBytes} bytes as JSON`,
    })
    .nullable()
    .default(null),
  webhook: WebhookSpec.nullable().default(null),
  tool_calls: z.array(z.record(z.string(), z.unknown())).max(MESSAGE_BOUNDS.toolCallsMax).optional(),
  tool_call_id: z.string().max(MESSAGE_BOUNDS.idMaxLength).optional(),
  name: z.string().max(MESSAGE_BOUNDS.idMaxLength).optional(),
  base64_image: z.string().min(1).optional(),
});
export type MessageRequest = z.infer<typeof MessageRequest>;

export const MessageResponse = z.object({
  session_id: z.uuid(),
  status: z.literal('running'),
});
export type MessageResponse = z.infer<typeof MessageResponse>;
