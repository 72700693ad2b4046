import { isUtf8 } from 'node:buffer';
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
  if (status === 400 || status === 422) return parameterRefusal(status, contentType, body);
  if (status >= 500 && status <= 599) return new EngineHttpError(status, contentType, body);
  if (status === 413) return engineRequestTooLarge(modelId);
  if (status === 429) {
    const wait = Math.min(retryAfterMs ?? ENGINE_RETRY_AFTER_DEFAULT_MS, ENGINE_RETRY_AFTER_MAX_MS);
    return providerOverloaded(modelId, wait);
  }
  return engineRefused(modelId, status);
}

/**
 * A parameter refusal (an engine's 400 or 422) in one of the spec's two 400 shapes: the flat JSON
 * and `text/plain` bodies of a 400 byte for byte (a nested `{"error":{…}}` is flattened when sent,
 * see toClientEngineError); anything else in the flat shape with code 400, its message read from
 * what the engine said: TGI's `{"error":"…","error_type":…}`, FastAPI's `{"detail":"…"}` and the
 * `{"detail":[{loc,msg}]}` of its 422s (whose `loc` names the parameter), a `{"message":…}`. A
 * body that says nothing readable (an HTML page of a proxy in front of the engine, JSON that
 * does not parse) gets a message naming the status.
 */
function parameterRefusal(status: number, contentType: string, body: Buffer): EngineHttpError {
  const type = contentType.toLowerCase();
  if (!type.includes('json')) {
    if (type.startsWith('text/plain')) return new EngineHttpError(400, contentType, body);
    return flatRefusal({ message: refusedWithout(status) });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return flatRefusal({ message: refusedWithout(status) });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return flatRefusal({ message: refusedWithout(status) });
  }
  // Byte for byte only what is the spec's shape in UTF-8: a flat body without its `type`, or with
  // bytes that are not UTF-8, reached the client as the engine wrote it.
  if (status === 400 && isUtf8(body) && (isNested(parsed) || isFlat(parsed))) {
    return new EngineHttpError(400, contentType, body);
  }
  if (isNested(parsed) || isFlatShaped(parsed)) {
    const error = isNested(parsed) ? parsed.error : parsed;
    const { message, type, param } = flattenEngineError(error, 400);
    return flatRefusal({ message, type, param });
  }
  return flatRefusal(foreignRefusal(parsed as Record<string, unknown>, status));
}

/** The longest engine message relayed from a foreign shape, characters. */
const MAX_FOREIGN_MESSAGE = 2000;

function flatRefusal(fields: { message: string; type?: string; param?: string | null }): EngineHttpError {
  const flat = {
    object: 'error',
    message: fields.message,
    type: fields.type ?? 'BadRequestError',
    param: fields.param ?? null,
    code: 400,
  };
  return new EngineHttpError(400, 'application/json', Buffer.from(JSON.stringify(flat)));
}

function refusedWithout(status: number): string {
  return `The engine refused the request (${status}) without a readable reason.`;
}

/** Message and parameter of the error shapes of TGI, FastAPI and other servers. */
function foreignRefusal(body: Record<string, unknown>, status: number): { message: string; param: string | null } {
  const { error, message, detail } = body;
  if (typeof error === 'string' && error) return { message: clip(error), param: null };
  if (typeof message === 'string' && message) return { message: clip(message), param: null };
  if (typeof detail === 'string' && detail) return { message: clip(detail), param: null };
  if (Array.isArray(detail)) {
    const items = detail.filter((item): item is { loc?: unknown; msg?: unknown } => !!item && typeof item === 'object');
    const described = items
      .filter((item) => typeof item.msg === 'string')
      .slice(0, 5)
      .map((item) => {
        const where = locationOf(item.loc);
        return where ? `${where}: ${item.msg as string}` : (item.msg as string);
      });
    if (described.length > 0) return { message: clip(described.join('; ')), param: parameterOf(items[0]?.loc) };
  }
  return { message: refusedWithout(status), param: null };
}

/** FastAPI's `loc` without its leading `body`: ["body","messages",0,"content"] → messages.0.content. */
function locationOf(loc: unknown): string | null {
  if (!Array.isArray(loc)) return null;
  const parts = loc.filter((part) => typeof part === 'string' || typeof part === 'number').map(String);
  if (parts[0] === 'body') parts.shift();
  return parts.length > 0 ? parts.join('.') : null;
}

/** The request field a `loc` names (its first part after `body`), as the spec's `param`. */
function parameterOf(loc: unknown): string | null {
  const where = locationOf(loc);
  return where ? (where.split('.')[0] ?? null) : null;
}

function clip(text: string): string {
  return text.length > MAX_FOREIGN_MESSAGE ? `${text.slice(0, MAX_FOREIGN_MESSAGE)}…` : text;
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

/** The spec's flat EngineErrorResponse: `object` "error", a message, a type and an integer code. */
function isFlat(value: object): value is NestedEngineError['error'] {
  const flat = value as { type?: unknown; code?: unknown };
  return isFlatShaped(value) && typeof flat.type === 'string' && Number.isInteger(flat.code);
}

/** An error meant as the flat shape (`object` "error" and a message), whatever else it lacks. */
function isFlatShaped(value: object): value is NestedEngineError['error'] {
  const flat = value as { object?: unknown; message?: unknown };
  return flat.object === 'error' && typeof flat.message === 'string';
}

function isNested(value: unknown): value is NestedEngineError {
  if (typeof value !== 'object' || value === null || !('error' in value)) return false;
  const inner = (value as { error: unknown }).error;
  return typeof inner === 'object' && inner !== null && !Array.isArray(inner);
}
