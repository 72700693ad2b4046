/**
 * An engine answered with an error status. The gateway passes it to the client with the engine's
 * status: the flat `{object:"error",…}` JSON and `text/plain` bodies unchanged, and the nested
 * `{"error":{…}}` shape of newer vLLM versions normalised into the flat shape.
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
    type: typeof error.type === 'string' ? error.type : 'BadRequestError',
    param: typeof error.param === 'string' ? error.param : null,
    code,
  };
}

function isNested(value: unknown): value is NestedEngineError {
  if (typeof value !== 'object' || value === null || !('error' in value)) return false;
  const inner = (value as { error: unknown }).error;
  return typeof inner === 'object' && inner !== null && !Array.isArray(inner);
}
