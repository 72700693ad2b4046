const CHUNK_OBJECT = '"object":"chat.completion.chunk"';
const CHOICES = '"choices":[{';
const FINISH = '"finish_reason":';
const FINISH_SET = '"finish_reason":"';
const USAGE = '"usage":{"prompt_tokens":';
const REASONING = '"reasoning":';

/**
 * Which engine chunks the relay may forward as the exact text the engine sent: regular token
 * chunks that already satisfy the Events rules (a chunk object with choices, its own usage, no
 * `finish_reason`, no trace named `reasoning`). The opening chunk is always parsed by the normaliser, whatever this says.
 * The tests are substring searches on compact JSON (vLLM, SGLang and the simulated engine write
 * compact JSON): inside a JSON string every `"` is escaped, so `"finish_reason":` cannot match
 * text inside content, only the key itself. They look where each key sits in an OpenAI chunk
 * (object and choices first, usage last) so each byte is scanned about once. Anything else,
 * including JSON with spaces after colons, takes the slow path (parse, normalise, serialise),
 * so a wrong "no" only costs time.
 */
export function isPassthroughChunk(payload: string): boolean {
  if (payload.charCodeAt(0) !== 123 || payload.charCodeAt(1) !== 34) return false; // {"
  const object = payload.indexOf(CHUNK_OBJECT);
  if (object === -1) return false;
  const choices = payload.indexOf(CHOICES, object);
  if (choices === -1) return false;
  const finish = payload.indexOf(FINISH, choices);
  if (finish === -1 || !payload.startsWith('null', finish + FINISH.length)) return false;
  if (payload.indexOf(FINISH_SET, finish) !== -1) return false;
  const usage = payload.lastIndexOf(USAGE);
  if (usage < finish) return false;
  // A trace named `reasoning` (vLLM, Ollama) is renamed by the normaliser (reasoning-field.ts),
  // wherever it sits in its choice: looked for only before `finish_reason`, a choice written
  // `{"index":0,"finish_reason":null,"delta":{"reasoning":…}}` reached clients unrenamed.
  const reasoning = payload.indexOf(REASONING, choices);
  if (reasoning !== -1 && reasoning < usage) return false;
  USAGE_COUNTS.lastIndex = usage;
  return USAGE_COUNTS.test(payload);
}

/**
 * The usage object as counts only: every value up to 15 digits (no sign, fraction or exponent) or
 * null, as vLLM writes `prompt_tokens_details`, and the object closing the chunk. Anything else
 * (a negative, 1e308, a string, a nested object) is parsed, where the normaliser replaces a usage
 * that is not counts by its own.
 */
const USAGE_COUNTS = /"usage":\{"prompt_tokens":\d{1,15}(?:,"[a-z_]{1,40}":(?:\d{1,15}|null))*\}\}$/y;
