import type { ServerResponse } from 'node:http';
import type { ChatCompletionResponse } from '@tollway/contracts';
import { REQUEST_ID_HEADER, type Logger } from '@tollway/service-kit';
import type { AdmissionTicket, SettledUsage } from '../admission/admission.types';
import { EngineAbortedError, type Engine, type EngineCall } from '../engines/engine.types';
import type { ChatObservation } from '../observability/chat-observation';
import { ChunkNormaliser } from '../streaming/chunk-normaliser';
import type { LiveRelays } from '../streaming/live-relays';
import { relayStream, SSE_HEADERS } from '../streaming/sse-relay';
import { countTextTokensUpTo } from '../tokenizer/count-tokens';
import { usableUsage, type UsageBounds } from './usage-bounds';

/** One admitted chat completion on its way to an engine. */
export interface AdmittedCompletion {
  engine: Engine;
  call: EngineCall;
  ticket: AdmissionTicket;
  modelId: string;
  /** Prompt tokens counted by the gateway (used when the engine reports none). */
  inputTokens: number;
  /** Output tokens reserved; charged for a non-streamed request whose client left, since no engine reports those. */
  reservedOutputTokens: number;
  /** The most its usage may claim; an engine's usage above it is cut to it (usage-bounds.ts). */
  usageBounds: UsageBounds;
  requestId: string;
  logger: Logger;
  /** The catalog's engine kind (`gen_ai.provider.name` of the engine call). */
  engineKind: string;
  observation: ChatObservation | null;
  /** The streams being relayed, for a shutdown to end; absent = not tracked. */
  relays?: LiveRelays;
}

/**
 * Serves an admitted completion and settles its ticket exactly once: with the engine's usage, with
 * what was produced before a client abort, or releases it when the engine refused before producing
 * anything. Errors before the response started are rethrown for the error middleware.
 */
export async function serveCompletion(admitted: AdmittedCompletion, res: ServerResponse): Promise<void> {
  if (admitted.call.signal.aborted) {
    // The client left while it was being admitted: nothing reached an engine.
    await release(admitted);
    return;
  }
  admitted.observation?.engineCallStarts(admitted.call, admitted.engineKind);
  // Returned, not awaited (as are handleChat's and the fast path's calls down to here): a frame
  // waiting on the next would stay alive, and be copied by every scavenge, for as long as a stream
  // lasts; returning lets the caller's frame end at once (bench/stream-live-set.mjs).
  return admitted.call.request.stream ? serveStreamed(admitted, res) : serveJson(admitted, res);
}

async function serveJson(admitted: AdmittedCompletion, res: ServerResponse): Promise<void> {
  let result;
  try {
    result = await admitted.engine.complete(admitted.call);
  } catch (err) {
    await beforeOutput(admitted, err);
    if (err instanceof EngineAbortedError) return;
    throw err;
  }
  const usage = completionUsage(result.completion, admitted);
  if (usage.replaced) {
    // The client gets the usage that is billed, not the engine's unusable one.
    const { prompt_tokens, completion_tokens } = usage.settled;
    result.completion.usage = { prompt_tokens, completion_tokens, total_tokens: prompt_tokens + completion_tokens };
    result.raw = undefined;
  }
  const body = result.raw ?? Buffer.from(JSON.stringify(result.completion));
  if (!res.destroyed) {
    res.writeHead(200, {
      [REQUEST_ID_HEADER]: admitted.requestId,
      ...admitted.ticket.headers,
      'content-type': 'application/json',
      'content-length': body.length,
    });
    res.end(body);
  }
  admitted.observation?.finished(result.completion);
  settle(admitted, usage.settled);
}

async function serveStreamed(admitted: AdmittedCompletion, res: ServerResponse): Promise<void> {
  let stream;
  try {
    stream = await admitted.engine.stream(admitted.call);
  } catch (err) {
    await beforeOutput(admitted, err);
    if (err instanceof EngineAbortedError) return;
    throw err;
  }
  admitted.observation?.firstChunk();
  res.writeHead(200, { [REQUEST_ID_HEADER]: admitted.requestId, ...admitted.ticket.headers, ...SSE_HEADERS });
  const normaliser = new ChunkNormaliser(admitted.modelId, admitted.inputTokens, admitted.usageBounds);
  const result = await relayStream(res, stream, normaliser, admitted.call.signal, admitted.relays);
  if (result.outcome === 'failed') {
    admitted.logger.warn('engine stream broke', {
      request_id: admitted.requestId,
      model: admitted.modelId,
      err: describe(result.error),
    });
  }
  settle(admitted, result.usage);
}

/**
 * The engine call failed before any output: a client abort is still charged (what the engine made;
 * when it cannot tell, nothing more than the prompt for a stream, whose first chunk had not come,
 * and the reservation for a JSON answer, which comes only when whole, cut like any usage to the
 * request's bound: a default reservation of 1024 × `n` can exceed what the context leaves); a
 * refusal, timeout or unreachable engine releases.
 */
async function beforeOutput(admitted: AdmittedCompletion, err: unknown): Promise<void> {
  if (err instanceof EngineAbortedError) {
    const made = admitted.call.request.stream
      ? 0
      : Math.min(admitted.reservedOutputTokens, admitted.usageBounds.maxCompletionTokens);
    settle(admitted, err.usage ?? { prompt_tokens: admitted.inputTokens, completion_tokens: made });
    return;
  }
  await release(admitted);
}

async function release(admitted: AdmittedCompletion): Promise<void> {
  try {
    await admitted.ticket.release();
  } catch (err) {
    admitted.logger.error('releasing an admission failed', { request_id: admitted.requestId, err: describe(err) });
  }
}

/**
 * Charges `usage`, which every path has already cut to the request's bounds (usage-bounds.ts);
 * admission itself writes only whole counts, whatever it is given (redis-admission.ts).
 */
function settle(admitted: AdmittedCompletion, usage: SettledUsage): void {
  admitted.observation?.settled(usage);
  // The handler may wait for a batched write (tens of ms): it keeps three fields, not the whole
  // request, alive meanwhile.
  const { requestId, modelId, logger } = admitted;
  admitted.ticket.settle(usage).catch((err: unknown) => {
    logger.error('settling usage failed', { request_id: requestId, model: modelId, err: describe(err) });
  });
}

/**
 * Usage of a whole completion: the engine's (cut to the request's bounds), or a count of its text
 * when the engine sent none or sent something that is not token counts; `replaced` when the
 * answer's own usage must change to match.
 */
function completionUsage(
  completion: ChatCompletionResponse,
  admitted: AdmittedCompletion,
): { settled: SettledUsage; replaced: boolean } {
  const usable = usableUsage(completion.usage, admitted.usageBounds);
  if (usable) {
    return {
      settled: { prompt_tokens: usable.prompt_tokens, completion_tokens: usable.completion_tokens },
      replaced: usable !== completion.usage,
    };
  }
  if (completion.usage !== undefined && completion.usage !== null) {
    admitted.logger.warn('engine usage is not token counts; the gateway counts the answer', {
      request_id: admitted.requestId,
      model: admitted.modelId,
    });
  }
  let text = '';
  for (const choice of completion.choices) {
    text += choice.message?.content ?? '';
    text += choice.message?.reasoning_content ?? '';
    if (choice.message?.tool_calls) text += JSON.stringify(choice.message.tool_calls);
  }
  const counted = countTextTokensUpTo(text, admitted.usageBounds.maxCompletionTokens);
  return { settled: { prompt_tokens: admitted.inputTokens, completion_tokens: counted }, replaced: true };
}

function describe(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}
