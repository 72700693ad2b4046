import type { ServerResponse } from 'node:http';
import { REQUEST_ID_HEADER, ServiceError, serializeError, type Logger } from '@tollway/service-kit';
import { EngineHttpError, toClientEngineError } from '../engines/engine-error';
import { ParameterError } from '../errors';

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

/**
 * Writes the two error kinds that are not the envelope: parameter failures in the engine's flat
 * shape and engine refusals passed through. Returns false for any other error. `idHeader` holds the
 * request id when it has not been set on the response already (the fast path's).
 */
export function writeEngineShapedError(
  res: ServerResponse,
  err: unknown,
  idHeader: Readonly<Record<string, string>> = NO_HEADERS,
): boolean {
  if (err instanceof ParameterError) {
    const body = JSON.stringify(err.toBody());
    res.writeHead(400, {
      ...idHeader,
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
    return true;
  }
  if (err instanceof EngineHttpError) {
    const answer = toClientEngineError(err);
    const body = typeof answer.body === 'string' ? Buffer.from(answer.body) : answer.body;
    res.writeHead(answer.status, { ...idHeader, 'content-type': answer.contentType, 'content-length': body.length });
    res.end(body);
    return true;
  }
  return false;
}

/**
 * The fast path's error writer, equal to the express error middlewares: engine-shaped errors,
 * ServiceErrors in the envelope with their headers, anything else a logged 500 that leaks nothing.
 */
export function writeError(res: ServerResponse, err: unknown, logger: Logger, requestId: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const idHeader = { [REQUEST_ID_HEADER]: requestId };
  if (writeEngineShapedError(res, err, idHeader)) return;
  const known = err instanceof ServiceError;
  const error = known
    ? err
    : new ServiceError({
        status: 500,
        type: 'server_error',
        code: 'internal_error',
        message: 'The server failed to handle the request.',
      });
  if (!known) logger.error('unhandled error', { request_id: requestId, err: serializeError(err) });
  else if (error.status >= 500)
    logger.error('request failed', {
      request_id: requestId,
      status: error.status,
      code: error.code,
      message: error.message,
    });
  const body = JSON.stringify(error.toBody());
  res.writeHead(error.status, {
    ...idHeader,
    ...error.headers,
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}
