import { z } from 'zod';

/** Roles a request message may carry. */
export const REQUEST_MESSAGE_ROLES = ['system', 'user', 'assistant', 'tool', 'function', 'developer'] as const;
export const RequestMessageRole = z.enum(REQUEST_MESSAGE_ROLES);
export type RequestMessageRole = z.infer<typeof RequestMessageRole>;

/** Values of `finish_reason` besides null. */
export const FINISH_REASONS = ['stop', 'length', 'tool_calls', 'content_filter'] as const;
export const FinishReason = z.enum(FINISH_REASONS);
export type FinishReason = z.infer<typeof FinishReason>;

/**
 * Generic wire bounds of the request; a catalog model may narrow them further (its context
 * length bounds max_tokens, its `max_n` bounds n). The spec's bounds plus the ones that keep the
 * work and memory of one request bounded, at the values OpenAI and vLLM use: n up to 128 and
 * top_logprobs up to 20 (vLLM's default max_logprobs), logit_bias up to 300 entries of -100..100,
 * up to 2048 messages and 128 tools. Integers are JSON-safe (|x| < 2^53), seed included.
 */
export const WIRE_BOUNDS = {
  temperature: { min: 0, max: 2 },
  top_p: { min: 0, max: 1 },
  presence_penalty: { min: -2, max: 2 },
  frequency_penalty: { min: -2, max: 2 },
  max_tokens: { min: 1 },
  max_completion_tokens: { min: 1 },
  n: { min: 1, max: 128 },
  top_logprobs: { min: 0, max: 20 },
  top_k: { min: -1 },
  logit_bias: { maxEntries: 300, min: -100, max: 100 },
  stop: { maxItems: 16, maxLength: 1024 },
  messages: { min: 1, max: 2048 },
  /** Parts of one message's array `content`. */
  contentParts: { max: 1024 },
  /** Tool calls of one message. */
  toolCalls: { max: 128 },
  /** Keys of `stream_options`, whose unknown keys are kept (and sent to the engine). */
  streamOptions: { maxKeys: 16 },
  tools: { max: 128, maxJsonBytes: 256 * 1024 },
  /** `model`, `user`, message `name` and `tool_call_id`. */
  idLength: { max: 256 },
  reasoning_effort: { maxLength: 32 },
} as const;

/**
 * An object whose fields are the engine's business: taken as it is, not copied key by key as
 * z.record would (300,000 keys in a request's response_format held the gateway's event loop
 * 0.8 s, in one tool 2 s). Described in JSON Schema as z.record describes it.
 */
const looseObject = z
  .custom<Record<string, unknown>>((value) => typeof value === 'object' && value !== null && !Array.isArray(value), {
    message: 'Invalid input: expected object',
  })
  .meta({ type: 'object', propertyNames: { type: 'string' }, additionalProperties: {} });
const shortString = z.string().max(WIRE_BOUNDS.idLength.max);

export const RequestMessage = z.object({
  role: RequestMessageRole,
  content: z.union([z.string(), z.array(z.unknown()).max(WIRE_BOUNDS.contentParts.max)]).nullish(),
  name: shortString.optional(),
  tool_calls: z.array(looseObject).max(WIRE_BOUNDS.toolCalls.max).optional(),
  tool_call_id: shortString.optional(),
});
export type RequestMessage = z.infer<typeof RequestMessage>;

export const StreamOptions = z
  .looseObject({
    include_usage: z.boolean().nullish(),
  })
  .refine((options) => Object.keys(options).length <= WIRE_BOUNDS.streamOptions.maxKeys, {
    message: `at most ${WIRE_BOUNDS.streamOptions.maxKeys} entries`,
  });
export type StreamOptions = z.infer<typeof StreamOptions>;

/**
 * The request body of `POST /chat/completions`. Fields outside the spec's table are stripped,
 * so they are never forwarded to an engine.
 */
export const CreateChatCompletionRequest = z.object({
  model: z.string().min(1).max(WIRE_BOUNDS.idLength.max),
  messages: z.array(RequestMessage).min(WIRE_BOUNDS.messages.min).max(WIRE_BOUNDS.messages.max),
  max_tokens: z.number().int().min(WIRE_BOUNDS.max_tokens.min).nullish(),
  max_completion_tokens: z.number().int().min(WIRE_BOUNDS.max_completion_tokens.min).nullish(),
  temperature: z.number().min(WIRE_BOUNDS.temperature.min).max(WIRE_BOUNDS.temperature.max).nullish(),
  top_p: z.number().min(WIRE_BOUNDS.top_p.min).max(WIRE_BOUNDS.top_p.max).nullish(),
  top_k: z.number().int().min(WIRE_BOUNDS.top_k.min).nullish(),
  n: z.number().int().min(WIRE_BOUNDS.n.min).max(WIRE_BOUNDS.n.max).nullish(),
  stop: z
    .union([
      z.string().max(WIRE_BOUNDS.stop.maxLength),
      z.array(z.string().max(WIRE_BOUNDS.stop.maxLength)).max(WIRE_BOUNDS.stop.maxItems),
    ])
    .nullish(),
  stream: z.boolean().nullish(),
  stream_options: StreamOptions.nullish(),
  presence_penalty: z.number().min(WIRE_BOUNDS.presence_penalty.min).max(WIRE_BOUNDS.presence_penalty.max).nullish(),
  frequency_penalty: z.number().min(WIRE_BOUNDS.frequency_penalty.min).max(WIRE_BOUNDS.frequency_penalty.max).nullish(),
  seed: z.number().int().nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(WIRE_BOUNDS.top_logprobs.min).max(WIRE_BOUNDS.top_logprobs.max).nullish(),
  logit_bias: z
    .record(z.string(), z.number().min(WIRE_BOUNDS.logit_bias.min).max(WIRE_BOUNDS.logit_bias.max))
    .refine((bias) => Object.keys(bias).length <= WIRE_BOUNDS.logit_bias.maxEntries, {
      message: `at most ${WIRE_BOUNDS.logit_bias.maxEntries} entries`,
    })
    .nullish(),
  response_format: looseObject.nullish(),
  reasoning_effort: z.string().max(WIRE_BOUNDS.reasoning_effort.maxLength).nullish(),
  tools: z
    .array(looseObject)
    .max(WIRE_BOUNDS.tools.max)
    .refine((tools) => tools.length === 0 || JSON.stringify(tools).length <= WIRE_BOUNDS.tools.maxJsonBytes, {
      message: `the tool definitions must be at most ${WIRE_BOUNDS.tools.maxJsonBytes} bytes of JSON together`,
    })
    .optional(),
  tool_choice: z.union([shortString, looseObject]).nullish(),
  user: shortString.optional(),
});
export type CreateChatCompletionRequest = z.infer<typeof CreateChatCompletionRequest>;

export const CompletionTokensDetails = z.looseObject({
  reasoning_tokens: z.number().int().optional(),
});

export const Usage = z.object({
  prompt_tokens: z.number().int(),
  completion_tokens: z.number().int(),
  total_tokens: z.number().int(),
  prompt_tokens_details: looseObject.nullish(),
  completion_tokens_details: CompletionTokensDetails.nullish(),
});
export type Usage = z.infer<typeof Usage>;

export const ResponseMessage = z.object({
  role: z.literal('assistant'),
  content: z.string().nullish(),
  reasoning_content: z.string().nullish(),
  tool_calls: z.array(looseObject).nullish(),
});
export type ResponseMessage = z.infer<typeof ResponseMessage>;

export const Choice = z.object({
  index: z.number().int(),
  message: ResponseMessage,
  logprobs: looseObject.nullish(),
  finish_reason: FinishReason.nullable(),
});
export type Choice = z.infer<typeof Choice>;

export const ChatCompletionResponse = z.object({
  id: z.string(),
  object: z.literal('chat.completion'),
  created: z.number().int(),
  model: z.string(),
  choices: z.array(Choice),
  usage: Usage.optional(),
});
export type ChatCompletionResponse = z.infer<typeof ChatCompletionResponse>;

export const Delta = z.object({
  role: z.string().nullish(),
  content: z.string().nullish(),
  reasoning_content: z.string().nullish(),
  tool_calls: z.array(looseObject).nullish(),
});
export type Delta = z.infer<typeof Delta>;

export const ChunkChoice = z.object({
  index: z.number().int(),
  delta: Delta,
  logprobs: looseObject.nullish(),
  finish_reason: FinishReason.nullish(),
});
export type ChunkChoice = z.infer<typeof ChunkChoice>;

export const ChatCompletionChunk = z.object({
  id: z.string(),
  object: z.literal('chat.completion.chunk'),
  created: z.number().int(),
  model: z.string(),
  choices: z.array(ChunkChoice),
  usage: Usage.nullish(),
});
export type ChatCompletionChunk = z.infer<typeof ChatCompletionChunk>;

/** The literal last line of every successful stream; it is not JSON. */
export const SSE_DONE_LINE = 'data: [DONE]';
