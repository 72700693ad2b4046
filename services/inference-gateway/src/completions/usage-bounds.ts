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
 * same object when within `bounds` and its details fit the contract; a copy without the details
 * when they do not (a `reasoning_tokens` that is not a count within the completion, details that
 * are not objects: clients that validate usage, as the Vercel AI SDK does, would fail on the whole
 * answer); else a copy with the counts cut to the bounds (an engine that overshot `max_tokens` by a
 * token is billed the bound, not refused).
 */
export function usableUsage(value: unknown, bounds: UsageBounds): Usage | null {
  if (typeof value !== 'object' || value === null) return null;
  const usage = value as Partial<Usage>;
  const { prompt_tokens: prompt, completion_tokens: completion } = usage;
  if (!isTokenCount(prompt) || !isTokenCount(completion) || !isTokenCount(usage.total_tokens)) return null;
  if (prompt <= bounds.maxPromptTokens && completion <= bounds.maxCompletionTokens) {
    return detailsFit(usage, completion) ? (usage as Usage) : withoutBadDetails(usage as Usage);
  }
  const cutPrompt = Math.min(prompt, bounds.maxPromptTokens);
  const cutCompletion = Math.min(completion, bounds.maxCompletionTokens);
  return { prompt_tokens: cutPrompt, completion_tokens: cutCompletion, total_tokens: cutPrompt + cutCompletion };
}

/** Whether `usage`'s details are null/absent or objects, with `reasoning_tokens` a count ≤ `completion`. */
function detailsFit(usage: Partial<Usage>, completion: number): boolean {
  return (
    promptDetailsFit(usage.prompt_tokens_details) && completionDetailsFit(usage.completion_tokens_details, completion)
  );
}

function promptDetailsFit(details: unknown): boolean {
  return details === undefined || details === null || (typeof details === 'object' && !Array.isArray(details));
}

function completionDetailsFit(details: unknown, completion: number): boolean {
  if (details === undefined || details === null) return true;
  if (typeof details !== 'object' || Array.isArray(details)) return false;
  const reasoning = (details as { reasoning_tokens?: unknown }).reasoning_tokens;
  return reasoning === undefined || (isTokenCount(reasoning) && reasoning <= completion);
}

function withoutBadDetails(usage: Usage): Usage {
  const copy: Usage = { ...usage };
  if (!promptDetailsFit(copy.prompt_tokens_details)) delete copy.prompt_tokens_details;
  if (!completionDetailsFit(copy.completion_tokens_details, copy.completion_tokens))
    delete copy.completion_tokens_details;
  return copy;
}
