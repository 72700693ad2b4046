import { FINISH_REASONS, type FinishReason } from '@tollway/contracts';

const SPEC_REASONS: ReadonlySet<unknown> = new Set(FINISH_REASONS);

/**
 * The reasons other engines and APIs give, by the spec's reason they mean (TGI's `eos_token`,
 * Anthropic-style `end_turn`, `stop_sequence`, `max_tokens` and `tool_use`, OpenAI's old
 * `function_call`, vLLM's `abort` of a request it dropped, Gemini-style `safety`).
 */
const OTHER_REASONS: ReadonlyMap<string, FinishReason> = new Map([
  ['eos', 'stop'],
  ['eos_token', 'stop'],
  ['end_turn', 'stop'],
  ['stop_sequence', 'stop'],
  ['abort', 'stop'],
  ['max_tokens', 'length'],
  ['max_length', 'length'],
  ['model_length', 'length'],
  ['tool_use', 'tool_calls'],
  ['function_call', 'tool_calls'],
  ['safety', 'content_filter'],
  ['recitation', 'content_filter'],
  ['content_filtered', 'content_filter'],
]);

/**
 * A `finish_reason` as the spec allows it (`stop`, `length`, `tool_calls`, `content_filter` or
 * null): the spec's own and null unchanged, a known other name translated, an empty one null,
 * anything else that says the choice finished `stop`. Absent (undefined) stays absent.
 */
export function specFinishReason(reason: unknown): FinishReason | null | undefined {
  if (reason === null || reason === undefined || SPEC_REASONS.has(reason))
    return reason as FinishReason | null | undefined;
  if (typeof reason === 'string') return reason === '' ? null : (OTHER_REASONS.get(reason.toLowerCase()) ?? 'stop');
  return reason ? 'stop' : null;
}

/**
 * Puts every choice's `finish_reason` in the spec's terms, in place; true when one changed (the
 * engine's own text of the object can then no longer be sent).
 */
export function normaliseFinishReasons(choices: ReadonlyArray<{ finish_reason?: unknown }>): boolean {
  let changed = false;
  for (const choice of choices) {
    if (typeof choice !== 'object' || choice === null) continue;
    const reason = choice.finish_reason;
    if (reason === null || reason === undefined || SPEC_REASONS.has(reason)) continue;
    choice.finish_reason = specFinishReason(reason);
    changed = true;
  }
  return changed;
}
