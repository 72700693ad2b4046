import type { ServerResponse } from 'node:http';
import type { ChatCompletionResponse } from '@tollway/contracts';
import { REQUEST_ID_HEADER, type Logger } from '@tollway/service-kit';
import type { AdmissionTicket, SettledUsage } from '../admission/admission.types';
import { EngineAbortedError, type Engine, type EngineCall } from '../engines/engine.types';
import type { ChatObservation } from '../observability/chat-observation';
import { ChunkNormaliser } from '../streaming/chunk-normaliser';
import type { LiveRelays } from '../streaming/live-relays';
import { relayStream, SSE_HEADERS } from '../streaming/sse-relay';
import { countTextTokens } from '../tokenizer/count-tokens';

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
  settle(admitted, completionUsage(result.completion, admitted.inputTokens));
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
  const normaliser = new ChunkNormaliser(admitted.modelId, admitted.inputTokens);
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
 * The engine call failed before any output: a client abort is still charged (what the engine made,
 * or the reservation when it cannot tell); a refusal, timeout or unreachable engine releases.
 */
async function beforeOutput(admitted: AdmittedCompletion, err: unknown): Promise<void> {
  if (err instanceof EngineAbortedError) {
    settle(
      admitted,
      err.usage ?? { prompt_tokens: admitted.inputTokens, completion_tokens: admitted.reservedOutputTokens },
    );
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

function settle(admitted: AdmittedCompletion, usage: SettledUsage): void {
  admitted.observation?.settled(usage);
  // The handler may wait for a batched write (tens of ms): it keeps three fields, not the whole
  // request, alive meanwhile.
  const { requestId, modelId, logger } = admitted;
  admitted.ticket.settle(usage).catch((err: unknown) => {
    logger.error('settling usage failed', { request_id: requestId, model: modelId, err: describe(err) });
  });
}

/** Usage of a whole completion: the engine's, or a count of its text when the engine sent none. */
function completionUsage(completion: ChatCompletionResponse, inputTokens: number): SettledUsage {
  const usage = completion.usage;
  if (usage && typeof usage.prompt_tokens === 'number' && typeof usage.completion_tokens === 'number') {
    return { prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens };
  }
  let text = '';
  for (const choice of completion.choices) {
    text += choice.message?.content ?? '';
    text += choice.message?.reasoning_content ?? '';
    if (choice.message?.tool_calls) text += JSON.stringify(choice.message.tool_calls);
  }
  return { prompt_tokens: inputTokens, completion_tokens: countTextTokens(text) };
}

function describe(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}
