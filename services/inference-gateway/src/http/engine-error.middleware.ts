import type { ErrorRequestHandler } from 'express';
import { writeEngineShapedError } from './write-error';

/**
 * Writes the two error kinds that are not the envelope (flat parameter errors, engine refusals);
 * everything else goes on to the envelope middleware.
 */
export function engineShapedErrors(): ErrorRequestHandler {
  return (err, _req, res, next) => {
    if (res.headersSent || !writeEngineShapedError(res, err)) next(err);
  };
}
