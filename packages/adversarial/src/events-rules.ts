import { ChatCompletionChunk, ErrorResponse } from '@tollway/contracts';

/** The whole body of a relayed stream, and whether its engine may break it off. */
export interface RelayedStream {
  /** The de-chunked body, read to its end. */
  body: string;
  /**
   * The engine misbehaves (a hostile engine but the faithful one): the stream may end with the
   * gateway's error event instead of `[DONE]`, as the gateway README says a broken engine stream ends.
   */
  mayBreak: boolean;
}

interface Chunk {
  object?: unknown;
  choices?: unknown;
  usage?: unknown;
}

/**
 * The first of the inference spec's six Events rules that a relayed stream breaks, in words, or
 * null. A stream its engine broke off keeps rules 1-4 for what it sent, then ends with one error
 * event in the gateway envelope and no `[DONE]`.
 */
export function eventsRuleBreak({ body, mayBreak }: RelayedStream): string | null {
  if (!body.endsWith('\n\n')) return 'the body does not end with a blank line (a frame cut off)';
  const frames = body.slice(0, -2).split('\n\n');
  for (const frame of frames) {
    if (!frame.startsWith('data: ') || frame.includes('\n'))
      return `rule 1: a frame that is not one data: line: ${quote(frame)}`;
  }
  const payloads = frames.map((frame) => frame.slice(6));
  const done = payloads.at(-1) === '[DONE]';
  if (done) payloads.pop();
  else if (!mayBreak) return 'rule 6: the stream does not end with data: [DONE]';
  else {
    const error = payloads.pop() ?? '';
    if (!isErrorEnvelope(error)) return `a broken stream ends with ${quote(error)}, not an error event`;
  }
  const chunks: Chunk[] = [];
  for (const payload of payloads) {
    let chunk: unknown;
    try {
      chunk = JSON.parse(payload);
    } catch {
      return `rule 1: a frame that is not JSON: ${quote(payload)}`;
    }
    const parsed = ChatCompletionChunk.safeParse(chunk);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return `rule 1: not a ChatCompletionChunk (${issue?.path.join('.') || '(root)'}: ${issue?.message}): ${quote(payload)}`;
    }
    chunks.push(chunk as Chunk);
  }
  const first = chunks[0];
  if (first === undefined) return done ? 'rule 2: no chunk before [DONE]' : null;
  if (!opensWithRole(first.choices as unknown[]) || 'usage' in first)
    return `rule 2: the first chunk is not the role delta without usage: ${quote(payloads[0] ?? '')}`;
  const totals = done ? chunks.pop() : undefined;
  /** Choices whose finish_reason was sent: a choice ends with the chunk that carries it. */
  const finished = new Set<unknown>();
  for (const [i, chunk] of chunks.entries()) {
    const choices = chunk.choices as unknown[];
    for (const choice of choices) {
      if (!isRecord(choice)) continue;
      if (finished.has(choice.index))
        return `a choice goes on after the chunk that carries its finish_reason: ${quote(payloads[i] ?? '')}`;
      if (typeof choice.finish_reason === 'string') finished.add(choice.index);
    }
    if (i === 0) continue;
    if (choices.length === 0) return `rule 5: a chunk with empty choices before the last: ${quote(payloads[i] ?? '')}`;
    if (choices.some((choice) => isRecord(choice) && typeof choice.finish_reason === 'string')) {
      if ('usage' in chunk) return `rule 3: the finish chunk carries usage: ${quote(payloads[i] ?? '')}`;
    } else if (!isUsage(chunk.usage)) {
      return `rule 4: a chunk without usage: ${quote(payloads[i] ?? '')}`;
    }
  }
  if (totals === undefined) return null;
  if ((totals.choices as unknown[]).length !== 0 || !isUsage(totals.usage))
    return `rule 5: the last chunk is not the totals with empty choices: ${quote(payloads.at(-1) ?? '')}`;
  const { prompt_tokens, completion_tokens, total_tokens } = totals.usage;
  if (total_tokens !== prompt_tokens + completion_tokens)
    return `rule 5: total_tokens is not prompt_tokens + completion_tokens: ${quote(payloads.at(-1) ?? '')}`;
  return null;
}

function opensWithRole(choices: unknown[]): boolean {
  return (
    choices.length > 0 &&
    choices.every((choice) => isRecord(choice) && isRecord(choice.delta) && choice.delta.role === 'assistant')
  );
}

function isUsage(value: unknown): value is { prompt_tokens: number; completion_tokens: number; total_tokens: number } {
  return (
    isRecord(value) && isCount(value.prompt_tokens) && isCount(value.completion_tokens) && isCount(value.total_tokens)
  );
}

/** A token count: a non-negative safe integer. */
export function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

function isErrorEnvelope(payload: string): boolean {
  try {
    return ErrorResponse.safeParse(JSON.parse(payload)).success;
  } catch {
    return false;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function quote(text: string): string {
  return JSON.stringify(text.length > 200 ? `${text.slice(0, 200)}…` : text);
}
