import type { ErrorRequestHandler } from 'express';
import { EngineHttpError, toClientEngineError } from '../engines/engine-error';
import { ParameterError } from '../errors';

/**
 * Writes the two error kinds that are not the envelope: parameter failures in the engine's flat
 * shape, and engine refusals passed through. Everything else goes on to the envelope middleware.
 */
export function engineShapedErrors(): ErrorRequestHandler {
  return (err, _req, res, next) => {
    if (res.headersSent) return next(err);
    if (err instanceof ParameterError) {
      const body = JSON.stringify(err.toBody());
      res.writeHead(400, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
      return;
    }
    if (err instanceof EngineHttpError) {
      const answer = toClientEngineError(err);
      const body = typeof answer.body === 'string' ? Buffer.from(answer.body) : answer.body;
      res.writeHead(answer.status, { 'content-type': answer.contentType, 'content-length': body.length });
      res.end(body);
      return;
    }
    next(err);
  };
}
