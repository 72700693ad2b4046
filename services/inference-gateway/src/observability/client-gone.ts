import type { ServerResponse } from 'node:http';

/** `error_type` of a request whose client left before its answer was complete. */
export const CLIENT_GONE = 'client_gone';

/** nginx's status for a request whose client closed the connection before any answer. */
const CLIENT_CLOSED_REQUEST = 499;

/** The status to log and trace: what was sent, or 499 for a client that left before anything was. */
export function statusLogged(res: ServerResponse): number {
  return res.headersSent || res.writableFinished ? res.statusCode : CLIENT_CLOSED_REQUEST;
}
