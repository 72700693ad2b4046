import { z } from 'zod';
import type { ChatCompletionMessage, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { StoredMessage } from '../store/session-store';

/**
 * `user_params` a chat agent understands: the model and the sampling parameters of the inference
 * API. Other keys are ignored (they belong to other agents); a known key of the wrong type fails
 * the turn with a message naming it. Value bounds are the gateway's to enforce.
 */
export const ChatUserParams = z.object({
  model: z.string().min(1).optional(),
  temperature: z.number().nullish(),
  top_p: z.number().nullish(),
  top_k: z.number().int().nullish(),
  max_tokens: z.number().int().nullish(),
  max_completion_tokens: z.number().int().nullish(),
  presence_penalty: z.number().nullish(),
  frequency_penalty: z.number().nullish(),
  seed: z.number().int().nullish(),
  stop: z.union([z.string(), z.array(z.string())]).nullish(),
  logit_bias: z.record(z.string(), z.number()).nullish(),
  response_format: z.record(z.string(), z.unknown()).nullish(),
  reasoning_effort: z.string().nullish(),
  tools: z.array(z.record(z.string(), z.unknown())).optional(),
  tool_choice: z.union([z.string(), z.record(z.string(), z.unknown())]).nullish(),
  user: z.string().optional(),
});
export type ChatUserParams = z.infer<typeof ChatUserParams>;

/** Parses `user_params` for a chat agent; throws an Error naming the first bad key. */
export function parseChatUserParams(userParams: Record<string, unknown> | null): ChatUserParams {
  const parsed = ChatUserParams.safeParse(userParams ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw new Error(`invalid user_params.${issue?.path.join('.') ?? ''}: ${issue?.message ?? 'invalid value'}`);
}

const IMAGE_SIGNATURES: [string, string][] = [
  ['iVBORw0KGgo', 'image/png'],
  ['/9j/', 'image/jpeg'],
  ['R0lGOD', 'image/gif'],
  ['UklGR', 'image/webp'],
];

/** A `base64_image` as an image URL: a `data:` URL is kept, bare base64 gets its media type from its magic bytes. */
export function imageDataUrl(base64Image: string): string {
  if (base64Image.startsWith('data:')) return base64Image;
  const mediaType = IMAGE_SIGNATURES.find(([magic]) => base64Image.startsWith(magic))?.[1] ?? 'image/png';
  return `data:${mediaType};base64,${base64Image}`;
}

/** A stored message as a request message of the inference API; `base64_image` becomes an image content part. */
export function toRequestMessage(message: StoredMessage): ChatCompletionMessageParam {
  const name = message.name === undefined ? {} : { name: message.name };
  switch (message.role) {
    case 'user':
      if (message.base64_image !== undefined) {
        const parts: ({ type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } })[] = [];
        if (message.content) parts.push({ type: 'text', text: message.content });
        parts.push({ type: 'image_url', image_url: { url: imageDataUrl(message.base64_image) } });
        return { role: 'user', content: parts, ...name };
      }
      return { role: 'user', content: message.content ?? '', ...name };
    case 'system':
      return { role: 'system', content: message.content ?? '', ...name };
    case 'tool':
      return { role: 'tool', content: message.content ?? '', tool_call_id: message.tool_call_id ?? '' };
    case 'assistant': {
      const toolCalls = message.tool_calls as ChatCompletionMessage['tool_calls'];
      return {
        role: 'assistant',
        content: message.content,
        ...(toolCalls && toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
        ...name,
      };
    }
  }
}

/** The assistant message of a completion as a stored message (tool calls kept). */
export function fromResponseMessage(message: ChatCompletionMessage): StoredMessage {
  const stored: StoredMessage = { role: 'assistant', content: message.content ?? null };
  if (message.tool_calls && message.tool_calls.length > 0) {
    stored.tool_calls = message.tool_calls as unknown as NonNullable<StoredMessage['tool_calls']>;
  }
  return stored;
}

/** The sampling part of `user_params` (every key but `model`), as request fields. */
export function samplingFields(params: ChatUserParams): Record<string, unknown> {
  const { model: _model, ...rest } = params;
  return Object.fromEntries(Object.entries(rest).filter(([, value]) => value !== undefined));
}
