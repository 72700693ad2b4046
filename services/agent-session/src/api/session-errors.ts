import { SESSION_ERROR_CODES } from '@tollway/contracts';
import { formatIssuePath, ServiceError } from '@tollway/service-kit';
import type { z } from 'zod';

/** A 503 that clears within seconds (a Redis outage or failover): advise a retry after one. */
const RETRY_SOON = { 'retry-after': '1' };

/**
 * Every error answer of the session API, in one place. Bodies are the SessionErrorResponse
 * envelope `{ error: { message, type, param, code } }` written by the error middleware.
 */
export const sessionErrors = {
  /** 400: a body or query that does not fit its schema; `param` is the first issue's path. */
  invalidRequest(error: z.ZodError, where: 'body' | 'query'): ServiceError {
    const issue = error.issues[0];
    const param = issue ? formatIssuePath(issue.path) : null;
    const detail = issue ? issue.message : 'invalid value';
    return new ServiceError({
      status: 400,
      code: SESSION_ERROR_CODES.invalidRequest,
      param,
      message: `Invalid request ${where}${param ? ` at ${param}` : ''}: ${detail}.`,
      cause: error,
    });
  },
  invalidSessionId(): ServiceError {
    return new ServiceError({
      status: 400,
      code: SESSION_ERROR_CODES.invalidSessionId,
      param: 'session_id',
      message: 'The session id must be a UUID.',
    });
  },
  notFound(sessionId: string): ServiceError {
    return new ServiceError({
      status: 404,
      code: SESSION_ERROR_CODES.sessionNotFound,
      param: 'session_id',
      message: `Session ${sessionId.slice(0, 100)} not found.`,
    });
  },
  routeNotFound(path: string): ServiceError {
    return new ServiceError({
      status: 404,
      code: SESSION_ERROR_CODES.notFound,
      message: `No route matches ${path.slice(0, 200)} with this method.`,
    });
  },
  busy(sessionId: string): ServiceError {
    return new ServiceError({
      status: 409,
      code: SESSION_ERROR_CODES.sessionBusy,
      param: 'session_id',
      message: `Session ${sessionId} is already processing a message.`,
    });
  },
  exists(sessionId: string): ServiceError {
    return new ServiceError({
      status: 409,
      code: SESSION_ERROR_CODES.sessionExists,
      param: 'session_id',
      message: `A session with id ${sessionId} already exists.`,
    });
  },
  methodNotAllowed(method: string, path: string, allow: string): ServiceError {
    return new ServiceError({
      status: 405,
      code: SESSION_ERROR_CODES.methodNotAllowed,
      message: `${method.slice(0, 20)} is not allowed on ${path.slice(0, 200)}; allowed: ${allow}.`,
      headers: { Allow: allow },
    });
  },
  customIdsDisabled(): ServiceError {
    return new ServiceError({
      status: 405,
      code: SESSION_ERROR_CODES.customIdsDisabled,
      message: 'Client-chosen session ids are not enabled on this server (start it with --allow-custom-ids).',
      headers: { Allow: 'GET, HEAD, DELETE' },
    });
  },
  historyTooLarge(maxHistoryBytes: number): ServiceError {
    return new ServiceError({
      status: 413,
      code: SESSION_ERROR_CODES.historyTooLarge,
      message:
        `The session's history would exceed ${maxHistoryBytes} bytes, more than one model request can carry. ` +
        'Start a new session, or carry a summary over in its state.',
    });
  },
  limitReached(maxSessions: number): ServiceError {
    return new ServiceError({
      status: 503,
      type: 'server_error',
      code: SESSION_ERROR_CODES.sessionLimitReached,
      message: `The server holds its maximum of ${maxSessions} sessions.`,
    });
  },
  turnNotQueued(cause: unknown): ServiceError {
    return new ServiceError({
      status: 503,
      type: 'server_error',
      code: SESSION_ERROR_CODES.turnNotQueued,
      message: 'The message could not be queued for a worker; the session is in error and accepts a new message.',
      headers: RETRY_SOON,
      cause,
    });
  },
  unauthorized(): ServiceError {
    return new ServiceError({
      status: 401,
      type: 'authentication_error',
      code: SESSION_ERROR_CODES.unauthorized,
      message: 'Missing or invalid API key. Send Authorization: Bearer <key>.',
      headers: { 'WWW-Authenticate': 'Bearer' },
    });
  },
  unavailable(cause: unknown): ServiceError {
    return new ServiceError({
      status: 503,
      type: 'server_error',
      code: SESSION_ERROR_CODES.serviceUnavailable,
      message: 'The session store is unreachable.',
      headers: RETRY_SOON,
      cause,
    });
  },
};
