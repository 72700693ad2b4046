import { countTokens } from 'gpt-tokenizer/cjs/encoding/cl100k_base';

/**
 * cl100k_base rather than o200k_base: counts within a few percent of each other on English text,
 * and cl100k's tables take about half the memory (the gateway's RSS budget is 150 MB).
 * Counts are an estimate for engines with other vocabularies; engines' own usage wins where given.
 */

/** Tokens added per message for its role and separators, as OpenAI documents for chat formats. */
const TOKENS_PER_MESSAGE = 3;
/** Tokens priming the assistant's reply. */
const TOKENS_PER_REPLY = 3;

/** A message as far as counting cares: its content and optional name / tool calls. */
export interface CountableMessage {
  role: string;
  content?: string | readonly unknown[] | null;
  name?: string;
  tool_calls?: readonly unknown[];
}

/** Counts tokens of a plain text with the cl100k_base vocabulary. */
export function countTextTokens(text: string): number {
  return text.length === 0 ? 0 : countTokens(text);
}

/** Counts the prompt tokens of chat messages: content text (strings and text parts), names, tool calls, framing. */
export function countPromptTokens(messages: readonly CountableMessage[]): number {
  let total = TOKENS_PER_REPLY;
  for (const message of messages) {
    total += TOKENS_PER_MESSAGE + 1; // the role is one token in every chat format we know
    const content = message.content;
    if (typeof content === 'string') total += countTextTokens(content);
    else if (Array.isArray(content)) total += countContentParts(content);
    if (message.name) total += countTextTokens(message.name) + 1;
    if (message.tool_calls && message.tool_calls.length > 0)
      total += countTextTokens(JSON.stringify(message.tool_calls));
  }
  return total;
}

function countContentParts(parts: readonly unknown[]): number {
  let total = 0;
  for (const part of parts) {
    if (typeof part === 'string') total += countTextTokens(part);
    else if (part && typeof part === 'object') {
      const text = (part as { text?: unknown }).text;
      if (typeof text === 'string') total += countTextTokens(text);
    }
  }
  return total;
}
