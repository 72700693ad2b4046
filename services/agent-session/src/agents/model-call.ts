import OpenAI from 'openai';
import { readSseFrames } from '@tollway/contracts';
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionCreateParamsBase,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionCreateParamsStreaming,
} from 'openai/resources/chat/completions';
import type { AgentContext } from './agent.types';
import { CompletionAssembler } from './chat-stream';
import { gatewayErrorMessage } from './gateway-client';

/** A server-advised delay longer than this is ignored in favour of our own back-off (as openai-node does). */
const MAX_ADVISED_DELAY_MS = 60_000;

/** The failure of a model call after its last try; the message is the gateway's own. */
export class ModelCallError extends Error {
  constructor(
    message: string,
    /** HTTP status of the last try; undefined for network errors. */
    readonly status: number | undefined,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'ModelCallError';
  }
}

/** How a failed try is handled: give up, or try again after `delayMs` (undefined = own back-off). */
export type RetryDecision = { retry: false } | { retry: true; advisedDelayMs: number | undefined };

/**
 * The inference spec's retry guidance: retry 429, 5xx and network faults; never 400/401/402/404 or
 * any other 4xx; never a response with `x-should-retry: false`; honour `retry-after-ms`, then `retry-after`.
 */
export function retryDecision(err: unknown): RetryDecision {
  if (err instanceof OpenAI.APIUserAbortError) return { retry: false };
  if (err instanceof OpenAI.APIConnectionError) return { retry: true, advisedDelayMs: undefined };
  if (!(err instanceof OpenAI.APIError) || err.status === undefined) return { retry: false };
  const headers = err.headers;
  if (headers?.get('x-should-retry') === 'false') return { retry: false };
  if (err.status !== 429 && err.status < 500) return { retry: false };
  return { retry: true, advisedDelayMs: advisedDelayMs(headers) };
}

/** `retry-after-ms` (ms) first, then `retry-after` (seconds or an HTTP date); undefined if absent or unusable. */
export function advisedDelayMs(headers: Headers | undefined, now = Date.now()): number | undefined {
  const ms = Number.parseFloat(headers?.get('retry-after-ms') ?? '');
  let delay = Number.isFinite(ms) ? ms : undefined;
  const after = headers?.get('retry-after');
  if (delay === undefined && after) {
    const seconds = Number.parseFloat(after);
    delay = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(after) - now;
    if (!Number.isFinite(delay)) delay = undefined;
  }
  if (delay === undefined || delay < 0 || delay > MAX_ADVISED_DELAY_MS) return undefined;
  return delay;
}

/** Exponential back-off with jitter for try `attempt` (1 = the first retry): base·2^(attempt−1), capped, times 0.5–1. */
export function backoffDelayMs(attempt: number, baseMs: number, maxMs: number, random = Math.random): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** (attempt - 1));
  return Math.round(ceiling * (0.5 + random() * 0.5));
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Runs `call` with the retry guidance within `settings.maxModelTries` tries. A try that `call`
 * marks as committed (its output already forwarded) is never retried: what readers saw cannot be
 * taken back. A call that still fails throws a ModelCallError carrying the gateway's message.
 */
async function withModelRetries<T>(
  ctx: AgentContext,
  call: (attempt: { committed: boolean }) => Promise<T>,
): Promise<T> {
  const { maxModelTries, retryBaseDelayMs, retryMaxDelayMs } = ctx.settings;
  for (let attempt = 1; ; attempt++) {
    const state = { committed: false };
    try {
      return await call(state);
    } catch (err) {
      if (ctx.signal.aborted) throw err;
      const decision = retryDecision(err);
      const status = err instanceof OpenAI.APIError ? err.status : undefined;
      if (!decision.retry || state.committed || attempt >= maxModelTries) {
        throw new ModelCallError(gatewayErrorMessage(err), status, { cause: err });
      }
      const delay = decision.advisedDelayMs ?? backoffDelayMs(attempt, retryBaseDelayMs, retryMaxDelayMs);
      ctx.logger.warn('model call failed; retrying', { status, attempt, delay_ms: delay });
      await sleep(delay, ctx.signal);
    }
  }
}

/**
 * One non-streaming chat completion through the gateway, retried per the retry guidance within
 * `settings.maxModelTries` tries. A call that still fails throws a ModelCallError carrying the
 * gateway's message.
 */
export function callModel(ctx: AgentContext, body: ChatCompletionCreateParamsNonStreaming): Promise<ChatCompletion> {
  return withModelRetries(ctx, () => ctx.openai.chat.completions.create(body, { signal: ctx.signal }));
}

/**
 * One chat completion through the gateway as a stream (`stream: true`, with usage), its content,
 * reasoning and tool-call deltas forwarded to `ctx.events` as they come, under a new assistant
 * message index; resolves the completion the chunks make (as `callModel` would have answered).
 * Retried like `callModel` until its first delta is forwarded; a stream that breaks after it
 * fails the call, since what readers saw cannot be taken back. A server that answers the request
 * with a whole JSON completion (an OpenAI-compatible server that does not stream) is taken as it
 * is, its text forwarded as one delta.
 */
export function streamModel(ctx: AgentContext, body: ChatCompletionCreateParamsBase): Promise<ChatCompletion> {
  if (!ctx.events.live) return wholeModelCall(ctx, body);
  const request: ChatCompletionCreateParamsStreaming = {
    ...body,
    stream: true,
    stream_options: { ...body.stream_options, include_usage: true },
  };
  return withModelRetries(ctx, async (attempt) => {
    const response = await ctx.openai.chat.completions.create(request, { signal: ctx.signal }).asResponse();
    const assembler = new CompletionAssembler();
    const forward = (chunk: ChatCompletionChunk) => {
      const deltas = assembler.add(chunk);
      if (deltas.content === undefined && deltas.reasoning_content === undefined && deltas.toolCalls.length === 0) {
        return;
      }
      if (!attempt.committed) {
        attempt.committed = true;
        ctx.events.startMessage();
      }
      if (deltas.content !== undefined || deltas.reasoning_content !== undefined) ctx.events.delta(deltas);
      for (const call of deltas.toolCalls) ctx.events.toolCallDelta(call);
    };
    if (!response.headers.get('content-type')?.includes('text/event-stream') || !response.body) {
      const completion = (await response.json()) as ChatCompletion;
      forward(completionAsChunk(completion));
      return completion;
    }
    const frames = readSseFrames(response.body, { lastEventId: '', retryMs: undefined });
    try {
      return await assembleStream(frames, forward, assembler);
    } finally {
      // Ends the body read too when the stream stopped early ([DONE], an error event).
      await frames.return(undefined);
    }
  });
}

/**
 * A call made whole while no one reads the session (`ctx.events.live` false): its answer is
 * forwarded as one delta, which a reader who comes after reads as the text so far.
 */
async function wholeModelCall(ctx: AgentContext, body: ChatCompletionCreateParamsBase): Promise<ChatCompletion> {
  const { stream_options: _streamOptions, ...whole } = body;
  const completion = await callModel(ctx, { ...whole, stream: false });
  const assembler = new CompletionAssembler();
  const deltas = assembler.add(completionAsChunk(completion));
  if (deltas.content !== undefined || deltas.reasoning_content !== undefined || deltas.toolCalls.length > 0) {
    ctx.events.startMessage();
    if (deltas.content !== undefined || deltas.reasoning_content !== undefined) ctx.events.delta(deltas);
    for (const call of deltas.toolCalls) ctx.events.toolCallDelta(call);
  }
  return completion;
}

/** Feeds a chat stream's chunks to `forward` until `[DONE]` or its end; resolves the completion they make. */
async function assembleStream(
  frames: AsyncGenerator<{ type: string | null; data: string | null }>,
  forward: (chunk: ChatCompletionChunk) => void,
  assembler: CompletionAssembler,
): Promise<ChatCompletion> {
  for (;;) {
    let next: IteratorResult<{ type: string | null; data: string | null }>;
    try {
      next = await frames.next();
    } catch (err) {
      // The connection broke mid-body: a network fault, retried as one (if nothing was forwarded).
      throw new OpenAI.APIConnectionError({ cause: err instanceof Error ? err : undefined });
    }
    if (next.done || next.value.data === '[DONE]') break;
    if (next.value.data === null) continue;
    const chunk = JSON.parse(next.value.data) as ChatCompletionChunk & { error?: { message?: unknown } };
    if (next.value.type === 'error' || chunk.error) {
      const message = chunk.error?.message;
      throw new Error(typeof message === 'string' ? message : 'the model stream ended with an error');
    }
    forward(chunk);
  }
  return assembler.completion();
}

/** A whole completion as the one chunk that carries all of its first choice. */
function completionAsChunk(completion: ChatCompletion): ChatCompletionChunk {
  const choice = completion.choices?.[0];
  const message = choice?.message as (ChatCompletion.Choice['message'] & { reasoning_content?: string }) | undefined;
  return {
    id: completion.id,
    object: 'chat.completion.chunk',
    created: completion.created,
    model: completion.model,
    usage: completion.usage,
    choices: choice
      ? [
          {
            index: 0,
            finish_reason: choice.finish_reason,
            delta: {
              content: message?.content ?? null,
              ...(message?.reasoning_content ? { reasoning_content: message.reasoning_content } : {}),
              tool_calls: (message?.tool_calls ?? []).map((call, index) => ({
                index,
                id: call.id,
                type: 'function' as const,
                function: call.type === 'function' ? call.function : undefined,
              })),
            },
          },
        ]
      : [],
  };
}
