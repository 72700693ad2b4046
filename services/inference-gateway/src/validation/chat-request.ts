import { CreateChatCompletionRequest, WIRE_BOUNDS } from '@tollway/contracts';
import { formatIssuePath } from '@tollway/service-kit';
import type { CatalogStore } from '../catalog/catalog-store';
import { contextLengthOf, type CatalogModel } from '../catalog/catalog.schema';
import { bodyNotObject, modelNotFound, modelRequired, ParameterError } from '../errors';

/** Bounds of `top_p` on production-flagged models. */
const PRODUCTION_TOP_P = { min: 0.95, max: 1 } as const;

/** A request that passed every gateway check, with the catalog entry it names. */
export interface ValidChatRequest {
  request: CreateChatCompletionRequest;
  model: CatalogModel;
}

/**
 * Checks a parsed body in the order a client can act on: envelope errors first (`invalid_json`,
 * `model_required`, 404 `model_not_found`), then the generic wire bounds and the model's
 * narrowing in the engine's flat shape (ParameterError). Unknown fields are dropped here.
 */
export function validateChatRequest(body: unknown, catalog: CatalogStore): ValidChatRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw bodyNotObject();
  const modelField = (body as { model?: unknown }).model;
  if (modelField === undefined || modelField === null || modelField === '') throw modelRequired();
  if (typeof modelField !== 'string') throw new ParameterError("'model' must be a string.", 'model');
  const model = catalog.get(modelField);
  if (!model) throw modelNotFound(modelField);
  refuseOverlongLists(body as Record<string, unknown>);
  const parsed = CreateChatCompletionRequest.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const param = issue ? formatIssuePath(issue.path) : null;
    throw new ParameterError(`Invalid value for '${param ?? 'body'}': ${issue?.message ?? 'invalid request'}.`, param);
  }
  checkNarrowing(parsed.data, model);
  return { request: parsed.data, model };
}

/**
 * Lists and maps past their bounds, refused before the schema, which checks every item first and
 * only then counts them: 300,000 `logit_bias` entries (3.5 MB) held the event loop 1.3 s, 400,000
 * `stop` strings 0.2 s a 1.6 MB body, 300,000 `stream_options` keys 0.8 s, before the bound refused
 * them. Counting stops one past it.
 */
function refuseOverlongLists(body: Record<string, unknown>): void {
  refuseManyKeys(body.logit_bias, 'logit_bias', WIRE_BOUNDS.logit_bias.maxEntries);
  refuseManyKeys(body.stream_options, 'stream_options', WIRE_BOUNDS.streamOptions.maxKeys);
  refuseLongList(body.stop, 'stop', WIRE_BOUNDS.stop.maxItems);
  refuseLongList(body.tools, 'tools', WIRE_BOUNDS.tools.max);
  const messages = body.messages;
  if (!Array.isArray(messages)) return;
  refuseLongList(messages, 'messages', WIRE_BOUNDS.messages.max);
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i] as { content?: unknown; tool_calls?: unknown } | null;
    if (typeof message !== 'object' || message === null) continue;
    refuseLongList(message.content, `messages[${i}].content`, WIRE_BOUNDS.contentParts.max);
    refuseLongList(message.tool_calls, `messages[${i}].tool_calls`, WIRE_BOUNDS.toolCalls.max);
  }
}

/** An object of more than `max` own keys (the schema checks and copies each). */
function refuseManyKeys(value: unknown, param: string, max: number): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return;
  let keys = 0;
  for (const key in value) {
    if (Object.hasOwn(value, key) && ++keys > max) throw tooMany(param, max, 'entries');
  }
}

function refuseLongList(list: unknown, param: string, max: number): void {
  if (Array.isArray(list) && list.length > max) throw tooMany(param, max, 'items');
}

function tooMany(param: string, max: number, what: string): ParameterError {
  return new ParameterError(`Invalid value for '${param}': at most ${max} ${what}.`, param);
}

/**
 * The per-model limits of the catalog: `max_n`, the context length against the requested output
 * (the prompt is counted later, see checkContextLength), the narrowed family and production-flagged models.
 */
export function checkNarrowing(request: CreateChatCompletionRequest, model: CatalogModel): void {
  if (request.n != null && request.n > model.max_n) {
    throw new ParameterError(`Model '${model.id}' supports n up to ${model.max_n}, got n=${request.n}.`, 'n');
  }
  const requested = request.max_completion_tokens ?? request.max_tokens;
  const contextLength = contextLengthOf(model);
  if (requested != null && requested > contextLength) {
    const param = request.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens';
    throw contextExceeded(contextLength, requested, null, param);
  }
  if (model.narrowed) {
    if (request.n != null && request.n !== 1) {
      throw new ParameterError(`Model '${model.id}' only supports n=1, got n=${request.n}.`, 'n');
    }
    if (request.presence_penalty != null && request.presence_penalty !== 0) {
      throw new ParameterError(
        `Model '${model.id}' requires presence_penalty=0.0, got ${request.presence_penalty}.`,
        'presence_penalty',
      );
    }
    if (request.frequency_penalty != null && request.frequency_penalty !== 0) {
      throw new ParameterError(
        `Model '${model.id}' requires frequency_penalty=0.0, got ${request.frequency_penalty}.`,
        'frequency_penalty',
      );
    }
  }
  if (
    model.production &&
    request.top_p != null &&
    (request.top_p < PRODUCTION_TOP_P.min || request.top_p > PRODUCTION_TOP_P.max)
  ) {
    throw new ParameterError(
      `Model '${model.id}' is production-flagged: top_p must be within ${PRODUCTION_TOP_P.min} and ${PRODUCTION_TOP_P.max}, got ${request.top_p}.`,
      'top_p',
    );
  }
}

/** vLLM's refusal of prompt + max_tokens beyond the context window, after the prompt was counted. */
export function checkContextLength(
  request: CreateChatCompletionRequest,
  model: CatalogModel,
  promptTokens: number,
): void {
  const requested = request.max_completion_tokens ?? request.max_tokens ?? 0;
  const contextLength = contextLengthOf(model);
  if (promptTokens + requested > contextLength)
    throw contextExceeded(contextLength, requested, promptTokens, 'messages');
}

function contextExceeded(
  contextLength: number,
  requested: number,
  promptTokens: number | null,
  param: string,
): ParameterError {
  const detail =
    promptTokens === null
      ? `you requested ${requested} output tokens`
      : `you requested ${promptTokens + requested} tokens (${promptTokens} in the messages, ${requested} in the completion)`;
  return new ParameterError(
    `This model's maximum context length is ${contextLength} tokens. However, ${detail}. ` +
      'Please reduce the length of the messages or completion.',
    param,
  );
}
