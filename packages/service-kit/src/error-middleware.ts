import type { ErrorRequestHandler, RequestHandler } from 'express';
import { BodyError } from './json-body';
import type { Logger } from './logger';
import { ServiceError } from './service-error';

/** Codes used for body-parser failures; each service's spec names them. */
export interface BodyErrorCodes {
  invalidJson: string;
  tooLarge: string;
  /** Status for a body over the limit; the inference spec says 400. */
  tooLargeStatus?: number;
  /** Code for a path that is not valid percent-encoding; default `invalid_path`. */
  invalidPath?: string;
}

const DEFAULT_BODY_CODES: BodyErrorCodes = { invalidJson: 'invalid_json', tooLarge: 'request_too_large' };

interface BodyParserError {
  type?: string;
  status?: number;
  limit?: number;
}

/**
 * Maps errors of reading a request to ServiceErrors: BodyError (json-body.ts), body-parser's
 * errors (broken JSON, too large, bad charset) and the router's URIError for a path parameter
 * that is not valid percent-encoding. Null for anything else.
 */
export function fromBodyParserError(err: unknown, codes: BodyErrorCodes = DEFAULT_BODY_CODES): ServiceError | null {
  if (err instanceof BodyError) {
    const tooLarge = err.kind === 'too_large';
    return new ServiceError({
      status: tooLarge ? (codes.tooLargeStatus ?? 400) : 400,
      code: tooLarge ? codes.tooLarge : codes.invalidJson,
      message: err.message,
      cause: err,
    });
  }
  if (err instanceof URIError) {
    return new ServiceError({
      status: 400,
      code: codes.invalidPath ?? 'invalid_path',
      message: 'The request path is not valid percent-encoding.',
      cause: err,
    });
  }
  const e = err as BodyParserError;
  switch (e?.type) {
    case 'entity.parse.failed':
      return new ServiceError({
        status: 400,
        code: codes.invalidJson,
        message: 'The request body is not valid JSON.',
        cause: err,
      });
    case 'entity.too.large':
      return new ServiceError({
        status: codes.tooLargeStatus ?? 400,
        code: codes.tooLarge,
        message: `The request body is larger than the limit of ${e.limit ?? 'the configured'} bytes.`,
        cause: err,
      });
    case 'encoding.unsupported':
    case 'charset.unsupported':
    case 'request.size.invalid':
    case 'entity.verify.failed':
      return new ServiceError({
        status: 400,
        code: codes.invalidJson,
        message: 'The request body could not be read.',
        cause: err,
      });
    case 'request.aborted':
      return new ServiceError({
        status: 400,
        code: codes.invalidJson,
        message: 'The client aborted the request body.',
        cause: err,
      });
    default:
      return null;
  }
}

/**
 * The one error middleware: writes ServiceErrors in the envelope, maps body-parser errors,
 * and turns anything else into a logged 500 without leaking its message.
 */
export function errorMiddleware(logger: Logger, codes: BodyErrorCodes = DEFAULT_BODY_CODES): ErrorRequestHandler {
  return (err, req, res, _next) => {
    if (res.headersSent) {
      // The status line is gone; all that is left is to end the response.
      res.destroy();
      return;
    }
    const known = err instanceof ServiceError ? err : fromBodyParserError(err, codes);
    const error =
      known ??
      new ServiceError({
        status: 500,
        type: 'server_error',
        code: 'internal_error',
        message: 'The server failed to handle the request.',
      });
    if (!known) logger.error('unhandled error', { request_id: req.id, path: req.path, err: serializeError(err) });
    else if (error.status >= 500)
      logger.error('request failed', {
        request_id: req.id,
        status: error.status,
        code: error.code,
        message: error.message,
      });
    for (const [name, value] of Object.entries(error.headers)) res.setHeader(name, value);
    res.status(error.status).json(error.toBody());
  };
}

/** Final handler for paths no route matched: 404 in the envelope. */
export function notFoundHandler(makeError: (path: string) => ServiceError): RequestHandler {
  return (req, _res, next) => next(makeError(req.path));
}

/** Error fields safe to log: name, message, stack, and nothing from the request. */
export function serializeError(err: unknown): Record<string, unknown> {
  if (err instanceof Error) return { name: err.name, message: err.message, stack: err.stack };
  return { value: String(err) };
}
