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

/** Middleware: assigns `req.id` and sets `x-request-id` on the response. */
export function requestId() {
  return (req: Request, res: Response, next: NextFunction): void => {
    const incoming = req.headers[REQUEST_ID_HEADER];
    req.id = typeof incoming === 'string' && ACCEPTABLE_ID.test(incoming) ? incoming : randomUUID();
    res.setHeader(REQUEST_ID_HEADER, req.id);
    next();
  };
}
