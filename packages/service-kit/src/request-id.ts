import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';

/** The request-id header read from clients and echoed on every response. */
export const REQUEST_ID_HEADER = 'x-request-id';
const ACCEPTABLE_ID = /^[\w.:-]{1,128}$/;

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** The request id: the client's `x-request-id` when it is sane, else a new UUID. */
      id: string;
    }
  }
}

/**
 * A request's id from its `x-request-id` header value: the client's own when it is 1-128 letters,
 * digits, `_`, `.`, `:` or `-` (safe in a header and a log line), else a new UUID.
 */
export function requestIdOf(incoming: string | string[] | undefined): string {
  return typeof incoming === 'string' && ACCEPTABLE_ID.test(incoming) ? incoming : randomUUID();
}

/** Middleware: assigns `req.id` and sets `x-request-id` on the response. */
export function requestId() {
  return (req: Request, res: Response, next: NextFunction): void => {
    req.id = requestIdOf(req.headers[REQUEST_ID_HEADER]);
    res.setHeader(REQUEST_ID_HEADER, req.id);
    next();
  };
}
