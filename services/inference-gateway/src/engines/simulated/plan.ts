import type { CreateChatCompletionRequest, FinishReason } from '@tollway/contracts';
import { encode, decode } from '../../tokenizer/cl100k';
import { countPromptTokens } from '../../tokenizer/count-tokens';

/**
 * Pure planning of a simulated completion: what every choice says, token by token, and why it
 * stops. Deterministic: the same prompt and seed give the same text. Every word of the
 * vocabulary is exactly one cl100k token, so counting pieces is counting tokens.
 */

const WORDS = (
  'the model gateway token engine stream request answer simple quiet river mountain light signal value system ' +
  'network data cloud bridge garden window morning evening ocean forest planet memory story number table paper ' +
  'music winter summer spring autumn green blue red silver golden small large quick gentle bright calm clear warm ' +
  'cold soft strong open careful steady sharp happy early late always often never again together inside outside ' +
  'under above across between around through before after while because and or but so then also very just still ' +
  'more less each every some many few first last next new old good great long short high low fast slow is are was ' +
  'were has have can will may should would could runs moves grows shines waits builds finds keeps makes takes gives ' +
  'reads writes sends holds turns brings'
)
  .split(' ')
  .map((word) => ` ${word}`);

/** Openers of a sentence, each one token without a leading space. */
const OPENERS = ['The', 'A', 'This', 'Every', 'Some', 'Each', 'Our', 'One'];

/** One generated token with its log-probability alternatives. */
export interface TokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

/** A tool call the simulated model decided to make. */
export interface PlannedToolCall {
  id: string;
  name: string;
  /** Arguments JSON, cut into one-token pieces for streaming. */
  argumentPieces: string[];
}

/** Everything one choice will produce. */
export interface ChoicePlan {
  index: number;
  reasoningPieces: string[];
  contentPieces: string[];
  toolCall: PlannedToolCall | null;
  finishReason: FinishReason;
  /** Per content piece, when the request asked for logprobs. */
  logprobs: TokenLogprob[] | null;
  /** Tokens this choice generated (reasoning + content or tool call). */
  completionTokens: number;
}

/** A whole simulated completion before rendering. */
export interface CompletionPlan {
  model: string;
  promptTokens: number;
  choices: ChoicePlan[];
  completionTokens: number;
  reasoningTokens: number;
}

/** Knobs of the simulation that shape the plan. */
export interface PlanOptions {
  defaultMaxTokens: number;
  reasoning: boolean;
  /** Generate up to max_tokens instead of stopping at the end of a sentence. */
  ignoreEos?: boolean;
}

/** Plans a completion for a validated request (`promptTokens` when already counted). */
export function planCompletion(
  request: CreateChatCompletionRequest,
  options: PlanOptions,
  promptTokens = countPromptTokens(request.messages, request.tools),
): CompletionPlan {
  const promptText = promptTextOf(request);
  const maxTokens = request.max_completion_tokens ?? request.max_tokens ?? options.defaultMaxTokens;
  const stops = request.stop == null ? [] : typeof request.stop === 'string' ? [request.stop] : request.stop;
  const baseSeed = hash32(`${request.seed ?? 0}\u0000${promptText}`);
  const choices: ChoicePlan[] = [];
  const count = request.n ?? 1;
  for (let index = 0; index < count; index++) {
    const rng = mulberry32(baseSeed + index * 0x9e3779b9);
    choices.push(planChoice(index, request, options, rng, maxTokens, stops));
  }
  let completionTokens = 0;
  let reasoningTokens = 0;
  for (const choice of choices) {
    completionTokens += choice.completionTokens;
    reasoningTokens += choice.reasoningPieces.length;
  }
  return { model: request.model, promptTokens, choices, completionTokens, reasoningTokens };
}

function planChoice(
  index: number,
  request: CreateChatCompletionRequest,
  options: PlanOptions,
  rng: () => number,
  maxTokens: number,
  stops: readonly string[],
): ChoicePlan {
  let budget = maxTokens;
  const reasoningPieces: string[] = [];
  if (options.reasoning) {
    const wanted = 8 + Math.floor(rng() * 16);
    for (let i = 0; i < wanted && budget > 0; i++, budget--) reasoningPieces.push(i === 0 ? opener(rng) : pick(rng));
    if (budget === 0) return finished(index, reasoningPieces, [], null, 'length', null);
  }
  const tool = chooseTool(request);
  if (tool) {
    const args = JSON.stringify(sampleSchema(tool.parameters, rng, 0, { nodes: sampleNodes(budget) }) ?? {});
    // One piece past the budget tells a cut answer from a whole one.
    const pieces = tokenPieces(args, budget + 1);
    const cut = pieces.length > budget;
    const toolCall: PlannedToolCall = {
      id: `call_${hex(rng)}${hex(rng)}`,
      name: tool.name,
      argumentPieces: pieces.slice(0, budget),
    };
    return finished(index, reasoningPieces, [], toolCall, cut ? 'length' : 'tool_calls', null);
  }
  const format = request.response_format?.type;
  const wantsJson = format === 'json_object' || format === 'json_schema';
  const natural = wantsJson
    ? tokenPieces(JSON.stringify(jsonAnswer(request, rng, sampleNodes(budget))), budget + 1)
    : sentence(rng);
  // Like vLLM's ignore_eos: keep writing sentences until max_tokens (for load tests).
  while (options.ignoreEos && !wantsJson && natural.length < budget)
    natural.push(...sentence(rng).map((p, i) => (i === 0 ? ` ${p}` : p)));
  const contentPieces: string[] = [];
  let finishReason: FinishReason = 'stop';
  let text = '';
  for (const piece of natural) {
    if (contentPieces.length >= budget) {
      finishReason = 'length';
      break;
    }
    const stopAt = findStop(text + piece, stops, text.length);
    if (stopAt !== -1) {
      const kept = (text + piece).slice(0, stopAt).slice(text.length);
      if (kept.length > 0) contentPieces.push(kept);
      break;
    }
    contentPieces.push(piece);
    text += piece;
  }
  const logprobs = request.logprobs
    ? contentPieces.map((piece) => tokenLogprob(piece, request.top_logprobs ?? 0, rng))
    : null;
  return finished(index, reasoningPieces, contentPieces, null, finishReason, logprobs);
}

function finished(
  index: number,
  reasoningPieces: string[],
  contentPieces: string[],
  toolCall: PlannedToolCall | null,
  finishReason: FinishReason,
  logprobs: TokenLogprob[] | null,
): ChoicePlan {
  const outputTokens = toolCall ? toolCall.argumentPieces.length : contentPieces.length;
  return {
    index,
    reasoningPieces,
    contentPieces,
    toolCall,
    finishReason,
    logprobs,
    completionTokens: reasoningPieces.length + outputTokens,
  };
}

/** The text the seed is derived from: every message's text content in order. */
function promptTextOf(request: CreateChatCompletionRequest): string {
  let text = '';
  for (const message of request.messages) {
    if (typeof message.content === 'string') text += `${message.role}:${message.content}\n`;
    else if (Array.isArray(message.content)) {
      for (const part of message.content) {
        const partText = (part as { text?: unknown } | null)?.text;
        if (typeof partText === 'string') text += `${message.role}:${partText}\n`;
      }
    }
  }
  return text;
}

/** A sentence of 12–39 one-token words ending with a period. */
function sentence(rng: () => number): string[] {
  const length = 12 + Math.floor(rng() * 28);
  const pieces = [opener(rng)];
  for (let i = 1; i < length; i++) pieces.push(pick(rng));
  pieces.push('.');
  return pieces;
}

function findStop(text: string, stops: readonly string[], from: number): number {
  let best = -1;
  for (const stop of stops) {
    if (stop.length === 0) continue;
    const at = text.indexOf(stop, Math.max(0, from - stop.length + 1));
    if (at !== -1 && (best === -1 || at < best)) best = at;
  }
  return best;
}

interface ToolDefinition {
  name: string;
  parameters: unknown;
}

/**
 * A tool call is made when one is required, forced by name, or named in the last user message and
 * not yet answered: once a tool's result follows that message, the model answers in text, as a
 * real one does (an agent loop such as the SDK's `runTools()` would otherwise never end).
 */
function chooseTool(request: CreateChatCompletionRequest): ToolDefinition | null {
  const tools = (request.tools ?? []).map(toolDefinition).filter((tool): tool is ToolDefinition => tool !== null);
  if (tools.length === 0) return null;
  const choice = request.tool_choice;
  if (choice === 'none') return null;
  if (choice && typeof choice === 'object') {
    const name = (choice as { function?: { name?: unknown } }).function?.name;
    return tools.find((tool) => tool.name === name) ?? null;
  }
  const messages = request.messages;
  let lastUser = messages.length - 1;
  while (lastUser >= 0 && messages[lastUser]?.role !== 'user') lastUser--;
  const answered = messages
    .slice(lastUser + 1)
    .some((message) => message.role === 'tool' || message.role === 'function');
  if (answered && choice !== 'required') return null;
  const content = messages[lastUser]?.content;
  const text = typeof content === 'string' ? content.toLowerCase() : '';
  const named = tools.find((tool) => text.includes(tool.name.toLowerCase()));
  if (named) return named;
  return choice === 'required' ? (tools[0] as ToolDefinition) : null;
}

function toolDefinition(tool: Record<string, unknown>): ToolDefinition | null {
  const fn = tool.function as { name?: unknown; parameters?: unknown } | undefined;
  return fn && typeof fn.name === 'string' ? { name: fn.name, parameters: fn.parameters } : null;
}

function jsonAnswer(request: CreateChatCompletionRequest, rng: () => number, nodes: number): unknown {
  const format = request.response_format as { json_schema?: { schema?: unknown } } | undefined;
  const schema = format?.json_schema?.schema;
  if (schema) return sampleSchema(schema, rng, 0, { nodes });
  return { answer: sentence(rng).join('').trim() };
}

/**
 * Values a sample may hold for an answer of `budget` tokens: each is at least a token of JSON, so
 * more would only be cut. A schema of arrays nested six deep around many properties doubles at
 * every level: unbounded, a 129 KB request held the gateway's event loop for 8 s.
 */
function sampleNodes(budget: number): number {
  return Math.min(budget, 4096) + 8;
}

/**
 * A value that fits a JSON schema's types (object, array, string, number, integer, boolean,
 * enum), of at most `left.nodes` values: once they are used up, objects and arrays stop growing.
 */
function sampleSchema(schema: unknown, rng: () => number, depth: number, left: { nodes: number }): unknown {
  left.nodes--;
  if (!schema || typeof schema !== 'object' || depth > 6 || left.nodes <= 0) return pick(rng).trim();
  const s = schema as { type?: unknown; properties?: unknown; items?: unknown; enum?: unknown[] };
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[Math.floor(rng() * s.enum.length)];
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (type) {
    case 'object':
      return sampleProperties(s.properties, rng, depth, left);
    case 'array':
      return left.nodes > 1
        ? [sampleSchema(s.items, rng, depth + 1, left), sampleSchema(s.items, rng, depth + 1, left)]
        : [sampleSchema(s.items, rng, depth + 1, left)];
    case 'integer':
      return Math.floor(rng() * 100);
    case 'number':
      return Math.round(rng() * 10_000) / 100;
    case 'boolean':
      return rng() < 0.5;
    case 'null':
      return null;
    default:
      return isObject(s.properties) ? sampleProperties(s.properties, rng, depth, left) : pick(rng).trim();
  }
}

/**
 * An object of values for `properties`, key by key until the values run out. Only an object's
 * own keys are walked, and lazily: Object.entries built an entry for every key first, so a
 * `properties` of a 3 MB string (an entry per character) held the event loop 12 s and took the
 * gateway to 750 MB, and 200,000 keys held it 0.6 s, for an answer of a few dozen values.
 */
function sampleProperties(
  properties: unknown,
  rng: () => number,
  depth: number,
  left: { nodes: number },
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!isObject(properties)) return out;
  for (const key in properties) {
    if (left.nodes <= 0) break;
    if (Object.hasOwn(properties, key)) out[key] = sampleSchema(properties[key], rng, depth + 1, left);
  }
  return out;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function tokenLogprob(piece: string, top: number, rng: () => number): TokenLogprob {
  const logprob = -Math.round(rng() * 2000) / 1000;
  const alternatives = [{ token: piece, logprob, bytes: [...Buffer.from(piece)] }];
  for (let i = 1; i < top; i++) {
    const token = pick(rng);
    alternatives.push({
      token,
      logprob: logprob - i - Math.round(rng() * 1000) / 1000,
      bytes: [...Buffer.from(token)],
    });
  }
  return { token: piece, logprob, bytes: [...Buffer.from(piece)], top_logprobs: alternatives.slice(0, top) };
}

/** BPE's slice of a text: its cost grows with the square of a run's length (see tokenizer/count-tokens.ts). */
const PIECE_SLICE_CHARS = 128;

/**
 * Cuts text into pieces of one token each, at most `limit`. BPE sees slices of at most 128
 * characters (cut between code points): a schema's property name of 100 K letters would hold the
 * event loop for seconds in one go, and a simulation's answer loses nothing that matters.
 */
function tokenPieces(text: string, limit: number): string[] {
  const pieces: string[] = [];
  for (let from = 0; from < text.length && pieces.length < limit;) {
    let to = Math.min(from + PIECE_SLICE_CHARS, text.length);
    const last = text.charCodeAt(to - 1);
    if (to < text.length && last >= 0xd800 && last <= 0xdbff) to--;
    for (const token of encode(text.slice(from, to))) {
      pieces.push(decode([token]));
      if (pieces.length >= limit) break;
    }
    from = to;
  }
  return pieces;
}

function pick(rng: () => number): string {
  return WORDS[Math.floor(rng() * WORDS.length)] as string;
}

function opener(rng: () => number): string {
  return OPENERS[Math.floor(rng() * OPENERS.length)] as string;
}

function hex(rng: () => number): string {
  return Math.floor(rng() * 0xffffffff)
    .toString(16)
    .padStart(8, '0');
}

/** FNV-1a, 32 bits. */
function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** A small, fast, seedable PRNG. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
