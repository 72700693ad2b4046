import type { CreateChatCompletionRequest } from '@tollway/contracts';

/** How a request is sent to one replica. */
export interface EngineRequestOptions {
  /** The model name the engine knows. */
  upstreamModel: string;
  /** Also ask for usage on every chunk (vLLM's `continuous_usage_stats`). */
  continuousUsage: boolean;
}

/**
 * The JSON body sent upstream: the validated request (spec fields only, as given) with the
 * engine's model name. Streams always ask for usage, so no stream goes unmetered; non-streamed
 * requests drop `stream_options`, which vLLM refuses without `stream`.
 */
export function toEngineBody(request: CreateChatCompletionRequest, options: EngineRequestOptions): string {
  const body: Record<string, unknown> = { ...request, model: options.upstreamModel };
  if (request.stream) {
    body.stream_options = options.continuousUsage
      ? { ...request.stream_options, include_usage: true, continuous_usage_stats: true }
      : { ...request.stream_options, include_usage: true };
  } else {
    delete body.stream_options;
  }
  return JSON.stringify(body);
}
