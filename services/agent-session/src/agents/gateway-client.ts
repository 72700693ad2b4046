import OpenAI from 'openai';

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
    const traceparent = options.traceparent?.();
    if (traceparent) {
      const headers = new Headers(init?.headers);
      headers.set('traceparent', traceparent);
      init = { ...init, headers };
    }
    const response = await fetch(input, init);
    if (!response.ok) {
      const text = await response
        .clone()
        .text()
        .catch(() => '');
      errorBodies.set(response.headers, text);
    }
    return response;
  };
  return new OpenAI({
    baseURL: options.baseURL,
    apiKey: options.apiKey,
    maxRetries: 0,
    timeout: options.timeoutMs,
    fetch: capturingFetch,
  });
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
