import type { Usage } from '@tollway/contracts';
import { contextLengthOf, type CatalogModel } from '../catalog/catalog.schema';

/**
 * The most tokens a request's usage may claim. An engine's usage is what the gateway bills, so a
 * broken or hostile engine must not bill an organization 1e308 or 2^64 tokens (a number the
 * budgets could never take back, or one Redis refuses in the middle of a settlement batch): a
 * prompt is at most the model's context length, a completion at most the output the request
 * allowed, `max_completion_tokens` or `max_tokens` per choice (else the context left after the
 * prompt) times `n`.
 */
export interface UsageBounds {
  maxPromptTokens: number;
  maxCompletionTokens: number;
}

/** No bound (tests, and callers that check elsewhere). */
export const UNBOUNDED: UsageBounds = Object.freeze({
  maxPromptTokens: Number.MAX_SAFE_INTEGER,
  maxCompletionTokens: Number.MAX_SAFE_INTEGER,
});

/** The bounds of one validated request to `model`, whose prompt the gateway counted at `promptTokens`. */
export function usageBoundsOf(
  request: { max_completion_tokens?: number | null; max_tokens?: number | null; n?: number | null },
  model: CatalogModel,
  promptTokens: number,
): UsageBounds {
  const contextLength = contextLengthOf(model);
  const perChoice = request.max_completion_tokens ?? request.max_tokens ?? Math.max(contextLength - promptTokens, 1);
  return {
    maxPromptTokens: Math.max(contextLength, promptTokens),
    maxCompletionTokens: perChoice * (request.n ?? 1),
  };
}

/** A token count: a non-negative safe integer. */
export function isTokenCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

/**
 * The usage to use from an engine's `value`: null unless its three counts are token counts; the
 * same object when within `bounds` and its details fit (flat objects of counts within their side's
 * total); a copy without the details that do not (a `reasoning_tokens` or `cached_tokens` that is
 * no count, details that are not objects: clients that validate usage, as the Vercel AI SDK does,
 * would fail on the whole answer); else a copy with the counts cut to the bounds (an engine that overshot `max_tokens` by a
 * token is billed the bound, not refused).
 */
export function usableUsage(value: unknown, bounds: UsageBounds): Usage | null {
  if (typeof value !== 'object' || value === null) return null;
  const usage = value as Partial<Usage>;
  const { prompt_tokens: prompt, completion_tokens: completion } = usage;
  if (!isTokenCount(prompt) || !isTokenCount(completion) || !isTokenCount(usage.total_tokens)) return null;
  if (prompt <= bounds.maxPromptTokens && completion <= bounds.maxCompletionTokens) {
    return detailsFit(usage, prompt, completion) ? (usage as Usage) : withoutBadDetails(usage as Usage);
  }
  const cutPrompt = Math.min(prompt, bounds.maxPromptTokens);
  const cutCompletion = Math.min(completion, bounds.maxCompletionTokens);
  return { prompt_tokens: cutPrompt, completion_tokens: cutCompletion, total_tokens: cutPrompt + cutCompletion };
}

/** Whether `usage`'s details fit: each null, absent, or counts within its side's total (detailsFitIn). */
function detailsFit(usage: Partial<Usage>, prompt: number, completion: number): boolean {
  return detailsFitIn(usage.prompt_tokens_details, prompt) && detailsFitIn(usage.completion_tokens_details, completion);
}

/**
 * Null or absent, or a flat object whose every value is null (but `reasoning_tokens`) or a token count of at most `total`
 * (`cached_tokens` within the prompt, `reasoning_tokens`, `audio_tokens` and the prediction counts
 * within the completion), as OpenAI writes them and SDKs validate them.
 */
function detailsFitIn(details: unknown, total: number): boolean {
  if (details === undefined || details === null) return true;
  if (typeof details !== 'object' || Array.isArray(details)) return false;
  for (const key in details) {
    const value = (details as Record<string, unknown>)[key];
    // The contract names one field, `reasoning_tokens`: an integer, never null.
    if (value === null ? key === 'reasoning_tokens' : !(isTokenCount(value) && value <= total)) return false;
  }
  return true;
}

function withoutBadDetails(usage: Usage): Usage {
  const copy: Usage = { ...usage };
  if (!detailsFitIn(copy.prompt_tokens_details, copy.prompt_tokens)) delete copy.prompt_tokens_details;
  if (!detailsFitIn(copy.completion_tokens_details, copy.completion_tokens)) delete copy.completion_tokens_details;
  return copy;
}
