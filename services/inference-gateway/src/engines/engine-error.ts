import type { ServiceError } from '@tollway/service-kit';
import { providerOverloaded } from '../admission/admission-errors';
import { engineRefused, engineRequestTooLarge } from '../errors';

/**
 * An engine refusal the client gets as the engine wrote it (see `engineRefusal`: a parameter the
 * engine refused, or an engine failure): the flat `{object:"error",…}` JSON and `text/plain` bodies
 * unchanged, and the nested `{"error":{…}}` shape of newer vLLM versions normalised into the flat
 * shape.
 */
export class EngineHttpError extends Error {
  constructor(
    readonly status: number,
    readonly contentType: string,
    readonly body: Buffer,
  ) {
    super(`The engine answered ${status}.`);
    this.name = 'EngineHttpError';
  }
}

/** How long a client is told to wait after an engine's 429 that said nothing of it, ms. */
export const ENGINE_RETRY_AFTER_DEFAULT_MS = 1000;
/** The longest wait an engine's 429 may ask of a client, ms (an engine asking for more is capped). */
export const ENGINE_RETRY_AFTER_MAX_MS = 60_000;

/**
 * What an engine's answer of `status` (not 200) becomes for the client. POST /chat/completions may
 * answer 200, 400, 401, 402, 404, 429 or a server error, and its 401, 402 and 404 speak of the
 * client's key, credit and model id, so an engine's status passes through only where it means the
 * same for the client:
 * - 400 and 422 (a parameter the engine refused; 422 is how FastAPI-based servers such as TGI say
 *   it): 400, the engine's body (422's JSON flattened with code 400);
 * - 413: 400 `request_too_large`;
 * - 429 (the engine is overloaded): 429 `provider_overloaded`, with the engine's `retry-after` (else
 *   ENGINE_RETRY_AFTER_DEFAULT_MS, at most ENGINE_RETRY_AFTER_MAX_MS);
 * - 5xx (the engine failed, after the one retry): its status and body;
 * - any other status (401, 402, 403, 404, …: the gateway's engine credentials, model name or URL):
 *   502 `engine_refused`, without the engine's message.
 */
export function engineRefusal(
  modelId: string,
  status: number,
  contentType: string,
  body: Buffer,
  retryAfterMs: number | null,
): EngineHttpError | ServiceError {
  if (status === 400 || (status >= 500 && status <= 599)) return new EngineHttpError(status, contentType, body);
  if (status === 422) return new EngineHttpError(400, contentType, asValidationBody(contentType, body));
  if (status === 413) return engineRequestTooLarge(modelId);
  if (status === 429) {
    const wait = Math.min(retryAfterMs ?? ENGINE_RETRY_AFTER_DEFAULT_MS, ENGINE_RETRY_AFTER_MAX_MS);
    return providerOverloaded(modelId, wait);
  }
  return engineRefused(modelId, status);
}

/** A 422 body as a 400's: JSON in the flat shape with code 400; anything else unchanged. */
function asValidationBody(contentType: string, body: Buffer): Buffer {
  if (!contentType.includes('json')) return body;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return body;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return body;
  const error = isNested(parsed) ? parsed.error : (parsed as NestedEngineError['error']);
  return Buffer.from(JSON.stringify({ ...flattenEngineError(error, 400), code: 400 }));
}

/**
 * The wait an engine's `retry-after-ms` or `retry-after` (seconds, or an HTTP date) asks for, ms;
 * null when it asks for none that can be read.
 */
export function parseRetryAfter(
  retryAfterMs: string | null,
  retryAfter: string | null,
  now = Date.now(),
): number | null {
  if (retryAfterMs !== null && /^\s*\d+(\.\d+)?\s*$/.test(retryAfterMs)) return Math.ceil(Number(retryAfterMs));
  if (retryAfter === null) return null;
  if (/^\s*\d+\s*$/.test(retryAfter)) return Number(retryAfter) * 1000;
  // An HTTP date starts with the day's name ("Wed, 25 Nov 2026 …"); Date.parse takes much else.
  if (!/^\s*[A-Za-z]{3},/.test(retryAfter)) return null;
  const date = Date.parse(retryAfter);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}

/** What is sent to the client for an engine error. */
export interface ClientEngineError {
  status: number;
  contentType: string;
  body: Buffer | string;
}

interface NestedEngineError {
  error: { message?: unknown; type?: unknown; param?: unknown; code?: unknown };
}

/** Maps an engine error to the response the client gets (see EngineHttpError). */
export function toClientEngineError(err: EngineHttpError): ClientEngineError {
  const status = err.status >= 400 && err.status <= 599 ? err.status : 502;
  if (!err.contentType.includes('json'))
    return { status, contentType: err.contentType || 'text/plain; charset=utf-8', body: err.body };
  let parsed: unknown;
  try {
    parsed = JSON.parse(err.body.toString('utf8'));
  } catch {
    return { status, contentType: err.contentType, body: err.body };
  }
  if (!isNested(parsed)) return { status, contentType: err.contentType, body: err.body };
  return { status, contentType: 'application/json', body: JSON.stringify(flattenEngineError(parsed.error, status)) };
}

/** The flat engine shape from the fields of a nested `{error:{…}}` (or an in-stream error event). */
export function flattenEngineError(
  error: NestedEngineError['error'],
  status: number,
): { object: 'error'; message: string; type: string; param: string | null; code: number } {
  const code = typeof error.code === 'number' && Number.isInteger(error.code) ? error.code : status;
  return {
    object: 'error',
    message: typeof error.message === 'string' ? error.message : 'The engine refused the request.',
    type: typeof error.type === 'string' ? error.type : errorTypeFor(status),
    param: typeof error.param === 'string' ? error.param : null,
    code,
  };
}

/**
 * The `type` of an engine error that named none, by status, as vLLM and the `openai` SDK name
 * them: an engine's 500 is an InternalServerError, not the client's bad request.
 */
function errorTypeFor(status: number): string {
  if (status >= 500) return 'InternalServerError';
  return ERROR_TYPES[status] ?? 'BadRequestError';
}

const ERROR_TYPES: Record<number, string> = {
  400: 'BadRequestError',
  401: 'AuthenticationError',
  403: 'PermissionDeniedError',
  404: 'NotFoundError',
  409: 'ConflictError',
  422: 'UnprocessableEntityError',
  429: 'RateLimitError',
};

function isNested(value: unknown): value is NestedEngineError {
  if (typeof value !== 'object' || value === null || !('error' in value)) return false;
  const inner = (value as { error: unknown }).error;
  return typeof inner === 'object' && inner !== null && !Array.isArray(inner);
}
