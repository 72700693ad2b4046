import OpenAI from 'openai';
import { ORGANIZATION_HEADER } from '@tollway/contracts';

/** Options of createGatewayClient. */
export interface GatewayClientOptions {
  /** Base URL of the inference gateway, ending in `/v1`. */
  baseURL: string;
  apiKey: string;
  /** Timeout of one HTTP request to the gateway, in ms. */
  timeoutMs: number;
  /**
   * The W3C `traceparent` to send with each call (the turn's invoke_agent span), so the gateway's
   * spans join the turn's trace; returns undefined when tracing is off.
   */
  traceparent?: () => string | undefined;
  /**
   * The organization to bill each call to, sent as `x-tollway-organization`: the session's, read
   * per call since a child runs the turns of many organizations; undefined leaves the header out.
   * The gateway honours it only from a service key (`SERVICE_API_KEYS`) or a key of that organization.
   */
  organization?: () => string | undefined;
  /** Told of every chat completion call (its span and metrics live in the worker). */
  chatCalls?: ChatCallObserver;
}

/** How a chat call ended: the response's model, usage and finish reasons, or an `errorType`. */
export interface ChatCallEnd {
  responseModel?: string;
  inputTokens?: number;
  outputTokens?: number;
  finishReasons?: string[];
  /** Low-cardinality class of a failure: the HTTP status (`429`), `aborted` or `connection_error`. */
  errorType?: string;
}

/** Observer of chat calls, as the turn child implements it. */
export interface ChatCallObserver {
  /**
   * A chat call to `model` begins: resolves the `traceparent` to send (its own span's, undefined
   * for the turn's) and the function to call once, when the call has ended.
   */
  start(model: string): Promise<{ traceparent: string | undefined; end(outcome: ChatCallEnd): void }>;
}

/**
 * Bodies of failed gateway responses, keyed by the response's Headers object, which the SDK hands
 * to its APIError unchanged. The SDK keeps only an enveloped `error` object; the gateway may also
 * answer with the engine's flat error (`{ object: "error", message, … }`) whose message it would lose.
 */
const errorBodies = new WeakMap<object, string>();

/** An `openai` client for the gateway with SDK retries off: agents retry through `callModel`. */
export function createGatewayClient(options: GatewayClientOptions): OpenAI {
  const capturingFetch: typeof fetch = async (input, init) => {
    const call = options.chatCalls && isChatCall(input, init) ? await options.chatCalls.start(modelOf(init)) : null;
    const traceparent = call?.traceparent ?? options.traceparent?.();
    const organization = options.organization?.();
    if (traceparent || organization) {
      const headers = new Headers(init?.headers);
      if (traceparent) headers.set('traceparent', traceparent);
      if (organization) headers.set(ORGANIZATION_HEADER, organization);
      init = { ...init, headers };
    }
    let response: Response;
    try {
      response = await fetch(input, init);
    } catch (err) {
      call?.end({ errorType: init?.signal?.aborted ? 'aborted' : 'connection_error' });
      throw err;
    }
    if (!response.ok) {
      const text = await response
        .clone()
        .text()
        .catch(() => '');
      errorBodies.set(response.headers, text);
      call?.end({ errorType: String(response.status) });
      return response;
    }
    return call ? observedResponse(response, call.end) : response;
  };
  return new OpenAI({
    baseURL: options.baseURL,
    apiKey: options.apiKey,
    maxRetries: 0,
    timeout: options.timeoutMs,
    fetch: capturingFetch,
  });
}

/** A POST to `…/chat/completions`. */
function isChatCall(input: Parameters<typeof fetch>[0], init: RequestInit | undefined): boolean {
  const url = typeof input === 'string' ? input : input instanceof URL ? input.pathname : input.url;
  return init?.method === 'POST' && typeof init.body === 'string' && url.endsWith('/chat/completions');
}

/** `model` of a chat request body (the SDK's JSON string). */
function modelOf(init: RequestInit | undefined): string {
  try {
    const model = (JSON.parse(init?.body as string) as { model?: unknown }).model;
    return typeof model === 'string' ? model : '';
  } catch {
    return '';
  }
}

/**
 * The response handed to the SDK, the call ended once its body is read and before the SDK sees
 * it, so the call's end reaches the worker ahead of the turn's result: a JSON completion is read
 * here for its usage and handed on as text; a stream ends when its last chunk has passed through,
 * with the model, usage and finish reasons its chunks reported.
 */
async function observedResponse(response: Response, end: (outcome: ChatCallEnd) => void): Promise<Response> {
  const init = { status: response.status, statusText: response.statusText, headers: response.headers };
  if (response.headers.get('content-type')?.includes('text/event-stream') && response.body) {
    const scanner = new StreamUsageScanner();
    const decoder = new TextDecoder();
    // Ended at `[DONE]` (a reader may stop there and cancel the rest) or at the body's end.
    const observed = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        if (scanner.feed(decoder.decode(chunk, { stream: true }))) end(scanner.outcome());
        controller.enqueue(chunk);
      },
      flush: () => end(scanner.outcome()),
    });
    return new Response(response.body.pipeThrough(observed), init);
  }
  let text: string;
  try {
    text = await response.text();
  } catch (err) {
    end({ errorType: 'connection_error' });
    throw err;
  }
  try {
    end(usageOf(JSON.parse(text) as ChatCompletionLike));
  } catch {
    end({ errorType: 'invalid_response' });
  }
  return new Response(text, init);
}

/**
 * Reads the `data:` lines of a chat stream as they pass for what the metrics want: the model,
 * the last usage reported and the finish reasons. Lines that are not chunks are skipped.
 */
class StreamUsageScanner {
  private rest = '';
  private model: unknown;
  private usage: ChatCompletionLike['usage'];
  private readonly finishReasons: unknown[] = [];

  /** Reads `text`; true once the stream's `data: [DONE]` has come. */
  feed(text: string): boolean {
    const lines = (this.rest + text).split('\n');
    this.rest = lines.pop() ?? '';
    let done = false;
    for (const line of lines) {
      if (line.trim() === 'data: [DONE]') done = true;
      if (!line.startsWith('data:') || !line.includes('{')) continue;
      try {
        const chunk = JSON.parse(line.slice(5)) as ChatCompletionLike;
        this.model ??= chunk.model;
        if (chunk.usage) this.usage = chunk.usage;
        for (const choice of chunk.choices ?? [])
          if (choice.finish_reason) this.finishReasons.push(choice.finish_reason);
      } catch {
        // not a chunk: the metrics do without it
      }
    }
    return done;
  }

  outcome(): ChatCallEnd {
    return usageOf({
      model: this.model,
      usage: this.usage,
      choices: this.finishReasons.map((reason) => ({ finish_reason: reason })),
    });
  }
}

interface ChatCompletionLike {
  model?: unknown;
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } | null;
  choices?: Array<{ finish_reason?: unknown }>;
}

function usageOf(completion: ChatCompletionLike): ChatCallEnd {
  const count = (value: unknown) => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);
  return {
    responseModel: typeof completion.model === 'string' ? completion.model : undefined,
    inputTokens: count(completion.usage?.prompt_tokens),
    outputTokens: count(completion.usage?.completion_tokens),
    finishReasons: (completion.choices ?? [])
      .map((choice) => choice.finish_reason)
      .filter((reason): reason is string => typeof reason === 'string'),
  };
}

/** The gateway's own error message of a failed model call (envelope, flat engine error or text body). */
export function gatewayErrorMessage(err: unknown): string {
  if (err instanceof OpenAI.APIError) {
    const inner = err.error as { message?: unknown } | undefined;
    if (inner && typeof inner.message === 'string') return inner.message;
    const body = err.headers ? errorBodies.get(err.headers) : undefined;
    if (body) {
      try {
        const parsed = JSON.parse(body) as { message?: unknown; error?: { message?: unknown } };
        if (typeof parsed.message === 'string') return parsed.message;
        if (typeof parsed.error?.message === 'string') return parsed.error.message;
      } catch {
        return body.trim();
      }
    }
    return err.message;
  }
  return err instanceof Error ? err.message : String(err);
}
