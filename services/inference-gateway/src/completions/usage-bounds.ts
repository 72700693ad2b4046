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
 * same object when within `bounds`; else a copy with the counts cut to them (an engine that
 * overshot `max_tokens` by a token is billed the bound, not refused).
 */
export function usableUsage(value: unknown, bounds: UsageBounds): Usage | null {
  if (typeof value !== 'object' || value === null) return null;
  const usage = value as Partial<Usage>;
  const { prompt_tokens: prompt, completion_tokens: completion } = usage;
  if (!isTokenCount(prompt) || !isTokenCount(completion) || !isTokenCount(usage.total_tokens)) return null;
  if (prompt <= bounds.maxPromptTokens && completion <= bounds.maxCompletionTokens) return usage as Usage;
  const cutPrompt = Math.min(prompt, bounds.maxPromptTokens);
  const cutCompletion = Math.min(completion, bounds.maxCompletionTokens);
  return { prompt_tokens: cutPrompt, completion_tokens: cutCompletion, total_tokens: cutPrompt + cutCompletion };
}
