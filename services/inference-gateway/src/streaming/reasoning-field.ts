/**
 * The reasoning trace under the spec's name. vLLM (since late 2025, `reasoning_content` removed in
 * 2026) and Ollama's OpenAI-compatible endpoint name it `reasoning`; the spec, llama.cpp, SGLang
 * and DeepSeek name it `reasoning_content`. A client of the gateway reads `reasoning_content`
 * whatever the engine, and a trace is counted (and billed when a client leaves) under one name.
 */

/** A message or delta as far as its reasoning trace goes. */
interface WithReasoning {
  reasoning?: unknown;
  reasoning_content?: unknown;
}

/**
 * Moves a string `reasoning` to `reasoning_content`, in place, unless `reasoning_content` already
 * holds text (an engine sending both, as vLLM did while renaming, sends the same text twice);
 * true when the object changed (the engine's own text of it can then no longer be sent).
 */
export function renameReasoning(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const part = value as WithReasoning;
  if (typeof part.reasoning !== 'string') return false;
  if (typeof part.reasoning_content !== 'string' || part.reasoning_content === '') {
    part.reasoning_content = part.reasoning;
  }
  delete part.reasoning;
  return true;
}

/** renameReasoning on the message or delta of every choice; true when one changed. */
export function renameChoicesReasoning(choices: readonly unknown[]): boolean {
  let changed = false;
  for (const choice of choices) {
    if (typeof choice !== 'object' || choice === null) continue;
    const { message, delta } = choice as { message?: unknown; delta?: unknown };
    if (renameReasoning(message) || renameReasoning(delta)) changed = true;
  }
  return changed;
}
