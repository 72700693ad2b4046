import { hash } from 'node:crypto';
import { setImmediate } from 'node:timers/promises';
import { countTokens } from './cl100k';
import { LRUCache } from 'lru-cache';

/**
 * cl100k_base rather than o200k_base: counts within a few percent of each other on English text,
 * and cl100k's tables take about half the memory (the gateway's RSS budget is 150 MB).
 * Counts are an estimate for engines with other vocabularies; engines' own usage wins where given.
 */

/** Tokens added per message for its role and separators, as OpenAI documents for chat formats. */
const TOKENS_PER_MESSAGE = 3;
/** Tokens priming the assistant's reply. */
const TOKENS_PER_REPLY = 3;
/**
 * An image part's tokens: what OpenAI charges for a 1024×1024 image at high detail (85 + 4 tiles
 * of 170), and 85 at `detail: "low"`. The gateway does not fetch or decode images to size them,
 * and engines differ (LLaVA-1.5 takes 576 a picture); the engine's usage settles the real count.
 */
const IMAGE_TOKENS = 765;
const LOW_DETAIL_IMAGE_TOKENS = 85;
/**
 * Above this many characters a prompt is counted in slices with a turn of the event loop between
 * them: BPE on adversarial text runs at up to about 0.6 µs a character (see cl100k.ts), so a 4 MiB
 * body counted in one go would stall every other request for seconds.
 */
const SLICE_CHARS = 32 * 1024;

/** A message as far as counting cares: its content and optional name / tool calls. */
export interface CountableMessage {
  role: string;
  content?: string | readonly unknown[] | null;
  name?: string;
  tool_calls?: readonly unknown[];
  tool_call_id?: string;
}

/**
 * The tool definitions of a request. Engines render them into the prompt (vLLM's and llama.cpp's
 * chat templates, OpenAI's own format), so they are prompt tokens: counted as their JSON, the
 * whole list one text (agents send the same list every turn, so it is counted once and then
 * remembered).
 */
export type CountableTools = readonly unknown[] | null | undefined;

/**
 * Runs the pre-tokenizer keeps whole (letters, punctuation, whitespace) longer than this are not
 * given to BPE whole: BPE is quadratic in a run's length (32 Ki CJK characters take 12 s, 32 Ki
 * spaces 2.5 s), so one hostile prompt or engine answer could hold a core for minutes.
 */
const LONG_RUN_CHARS = 128;
const LONG_RUN = /\p{L}{128,}|[^\s\p{L}\p{N}]{128,}|\s{128,}/gu;

/**
 * A long run is estimated from windows of LONG_RUN_CHARS spread over it, one per this many
 * characters (at least one, at most MAX_RUN_WINDOWS): BPE reads at most an eighth of a run of
 * 1024 characters or more, and a whole 128-character window in a shorter one, as before.
 */
const RUN_CHARS_PER_WINDOW = 8 * LONG_RUN_CHARS;
const MAX_RUN_WINDOWS = 8;

/**
 * Counts tokens of a plain text with the cl100k_base vocabulary. A run longer than 128 characters
 * is estimated from windows of 128 characters spread over it (their count scaled to its length),
 * exact for repeated text. The windows start at a random offset: a run estimated from its first
 * 128 characters counted 128 ASCII letters followed by 20,000 'ꙮ' (about 60,000 tokens) as 2,516,
 * so a prompt built so passed the input budget and the context length, and was billed that count
 * when its client left before the engine reported usage. Where the windows fall cannot be known
 * ahead, so a run's cheap and dear stretches weigh in as they are, on average.
 */
export function countTextTokens(text: string): number {
  if (text.length === 0) return 0;
  if (text.length < LONG_RUN_CHARS) return countTokens(text);
  LONG_RUN.lastIndex = 0;
  let total = 0;
  let from = 0;
  for (let run = LONG_RUN.exec(text); run !== null; run = LONG_RUN.exec(text)) {
    if (run.index > from) total += countTokens(text.slice(from, run.index));
    total += estimateRun(run[0]);
    from = run.index + run[0].length;
  }
  return from === 0 ? countTokens(text) : total + (from < text.length ? countTokens(text.slice(from)) : 0);
}

/** A long run's tokens from windows spread evenly over it from a random offset (see countTextTokens). */
function estimateRun(run: string): number {
  const windows = Math.min(MAX_RUN_WINDOWS, Math.max(1, Math.floor(run.length / RUN_CHARS_PER_WINDOW)));
  const stride = run.length / windows;
  const offset = Math.random() * (stride - LONG_RUN_CHARS);
  let sampled = 0;
  let length = 0;
  for (let i = 0; i < windows; i++) {
    let start = Math.floor(offset + i * stride);
    // Whole characters only: half a surrogate pair would be read as U+FFFD.
    if (isLowSurrogate(run.charCodeAt(start))) start++;
    let end = Math.min(start + LONG_RUN_CHARS, run.length);
    if (isLowSurrogate(run.charCodeAt(end))) end++;
    sampled += countTokens(run.slice(start, end));
    length += end - start;
  }
  return Math.ceil((sampled * run.length) / length);
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

/**
 * Counts the prompt tokens of chat messages: content text (strings and text parts), image parts,
 * names, tool calls and their ids, framing, and the tool definitions.
 */
export function countPromptTokens(messages: readonly CountableMessage[], tools?: CountableTools): number {
  const { texts, framing } = promptTexts(messages, tools);
  let total = framing;
  for (const text of texts) total += countTextTokens(text);
  return total;
}

/**
 * Same count as countPromptTokens, but a long prompt is counted in slices of about 32 KiB, cut
 * before a space that follows a word (where cl100k's pre-tokenizer splits anyway), yielding to
 * other requests between slices. Short prompts are counted at once.
 */
export async function countPromptTokensFairly(
  messages: readonly CountableMessage[],
  tools?: CountableTools,
): Promise<number> {
  const { texts, framing } = promptTexts(messages, tools);
  let length = 0;
  for (const text of texts) length += text.length;
  if (length <= SLICE_CHARS) return countPromptTokens(messages, tools);
  let total = framing;
  for (const text of texts) total += await countTextFairly(text);
  return total;
}

/** Texts longer than this are counted every time: hashing 1 Mi characters already takes about 0.7 ms in one go. */
const MAX_CACHED_CHARS = 1024 * 1024;

/** What a PromptTokenCounter did so far (read by the metrics at scrape time). */
export interface PromptTokenStats {
  /** Texts looked up (texts over MAX_CACHED_CHARS and empty ones are not). */
  lookups: number;
  /** Lookups that found the count. */
  hits: number;
  /** Counts held now. */
  entries: number;
}

/**
 * Counts prompts like countPromptTokensFairly, remembering the count of each text (a message's
 * content, a name, tool calls) for the next prompts that hold it. Chat clients and agents send
 * the whole conversation with every turn, so the system prompt and the history are counted again
 * on each: BPE costs 40-150 ns a character here (a 16 KB prompt about 0.6 ms, more than the rest
 * of the gateway's work on a request), a SHA-256 of the text under 1 ns a character and a lookup
 * well under a µs. Texts are keyed by their SHA-256, never by themselves: the cache holds
 * `maxEntries` keys of 44 characters whatever the texts' size, and no text (a tenant's or
 * anyone's) can be made to share another's entry. The hash reads UTF-8, where a lone surrogate is
 * U+FFFD, and so does the tokenizer: such texts count alike. Least recently used entries go first;
 * `maxEntries` 0 counts every time.
 */
export class PromptTokenCounter {
  private readonly counts: LRUCache<string, number> | null;
  private lookups = 0;
  private hits = 0;

  constructor(maxEntries: number) {
    this.counts = maxEntries > 0 ? new LRUCache<string, number>({ max: maxEntries }) : null;
  }

  /** The prompt's tokens (countPromptTokens' total); a long text not seen lately is counted in slices. */
  async count(messages: readonly CountableMessage[], tools?: CountableTools): Promise<number> {
    const counts = this.counts;
    if (counts === null) return countPromptTokensFairly(messages, tools);
    const { texts, framing } = promptTexts(messages, tools);
    let total = framing;
    /** Characters counted since the last turn given to other requests. */
    let counted = 0;
    for (const text of texts) {
      if (text.length === 0) continue;
      if (text.length > MAX_CACHED_CHARS) {
        total += await countTextFairly(text);
        continue;
      }
      const key = hash('sha256', text, 'base64');
      this.lookups++;
      let count = counts.get(key);
      if (count !== undefined) {
        this.hits++;
        total += count;
        continue;
      }
      if (text.length > SLICE_CHARS) {
        count = await countTextFairly(text);
      } else {
        // Many texts under a slice each still add up: a turn is given after every slice's worth.
        if (counted + text.length > SLICE_CHARS) {
          await setImmediate();
          counted = 0;
        }
        count = countTextTokens(text);
        counted += text.length;
      }
      counts.set(key, count);
      total += count;
    }
    return total;
  }

  /** Lookups and hits so far, and the entries held. */
  stats(): PromptTokenStats {
    return { lookups: this.lookups, hits: this.hits, entries: this.counts?.size ?? 0 };
  }
}

/**
 * A text's tokens up to `limit`: counted slice by slice (as countTextFairly cuts them) and no
 * further once `limit` is reached. For an answer an engine sent without usage, whose count is cut
 * to the request's bounds anyway: a broken engine's 12 MB answer would otherwise hold the event
 * loop for seconds, where this stops after about as many characters as tokens were allowed.
 */
export function countTextTokensUpTo(text: string, limit: number): number {
  let total = 0;
  for (let from = 0; from < text.length && total < limit;) {
    const to = sliceEnd(text, from);
    total += countTextTokens(text.slice(from, to));
    from = to;
  }
  return Math.min(total, limit);
}

/** A text's tokens counted in slices of about 32 KiB, with a turn of the event loop after each. */
async function countTextFairly(text: string): Promise<number> {
  let total = 0;
  for (let from = 0; from < text.length;) {
    const to = sliceEnd(text, from);
    total += countTextTokens(text.slice(from, to));
    from = to;
    await setImmediate();
  }
  return total;
}

/** The end of the slice starting at `from`: before a space that follows a non-space, else a hard cut. */
function sliceEnd(text: string, from: number): number {
  const limit = from + SLICE_CHARS;
  if (limit >= text.length) return text.length;
  for (let at = limit; at > from + SLICE_CHARS / 2; at--) {
    if (text.charCodeAt(at) === 32 && text.charCodeAt(at - 1) > 32) return at;
  }
  return limit;
}

/** The texts of a prompt that carry tokens, and the framing tokens around them. */
function promptTexts(
  messages: readonly CountableMessage[],
  tools: CountableTools,
): { texts: string[]; framing: number } {
  const texts: string[] = [];
  let framing = TOKENS_PER_REPLY;
  if (tools && tools.length > 0) texts.push(JSON.stringify(tools));
  for (const message of messages) {
    framing += TOKENS_PER_MESSAGE + 1; // the role is one token in every chat format we know
    const content = message.content;
    if (typeof content === 'string') texts.push(content);
    else if (Array.isArray(content)) {
      for (const part of content) {
        if (typeof part === 'string') texts.push(part);
        else if (part && typeof part === 'object') {
          const { text, type, image_url } = part as { text?: unknown; type?: unknown; image_url?: unknown };
          if (typeof text === 'string') texts.push(text);
          else if (type === 'image_url') framing += imageTokens(image_url);
        }
      }
    }
    if (message.name) {
      texts.push(message.name);
      framing += 1;
    }
    if (message.tool_calls && message.tool_calls.length > 0) texts.push(JSON.stringify(message.tool_calls));
    if (message.tool_call_id) texts.push(message.tool_call_id);
  }
  return { texts, framing };
}

function imageTokens(imageUrl: unknown): number {
  const detail = imageUrl && typeof imageUrl === 'object' ? (imageUrl as { detail?: unknown }).detail : undefined;
  return detail === 'low' ? LOW_DETAIL_IMAGE_TOKENS : IMAGE_TOKENS;
}
