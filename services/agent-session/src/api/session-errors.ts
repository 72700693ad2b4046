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
  /** 400: a `Last-Event-ID` header or `last_event_id` query that is not an event id. */
  invalidEventId(param: 'Last-Event-ID' | 'last_event_id'): ServiceError {
    return new ServiceError({
      status: 400,
      code: SESSION_ERROR_CODES.invalidRequest,
      param,
      message: `Invalid ${param}: an event id is <milliseconds>-<sequence>, two 64-bit unsigned numbers, as the stream's id fields give it.`,
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
  tooManyStreams(max: number): ServiceError {
    return new ServiceError({
      status: 429,
      type: 'rate_limit_error',
      code: SESSION_ERROR_CODES.tooManyStreams,
      message: `Your organization holds ${max} event streams on this server, its maximum; close one first.`,
      headers: { 'Retry-After': '1' },
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
  /** 429: the organization holds as many sessions as it may (its own limit, below the service's cap). */
  organizationSessionLimit(limit: number): ServiceError {
    return new ServiceError({
      status: 429,
      type: 'rate_limit_error',
      code: SESSION_ERROR_CODES.organizationSessionLimit,
      message: `Your organization holds its maximum of ${limit} sessions; delete one before creating another.`,
    });
  },
  /**
   * 429 with `retry-after`: the organization has as many turns waiting as it may. Its queue drains
   * as its turns start, so a retry a moment later usually gets in.
   */
  turnQueueFull(limit: number, retryAfterMs: number): ServiceError {
    return new ServiceError({
      status: 429,
      type: 'rate_limit_error',
      code: SESSION_ERROR_CODES.turnQueueFull,
      message: `Your organization has its maximum of ${limit} turns waiting for a worker; send again once some have started.`,
      headers: {
        'retry-after': String(Math.max(1, Math.ceil(retryAfterMs / 1000))),
        'retry-after-ms': String(retryAfterMs),
      },
    });
  },
  /** 503: the replicas did not confirm the turn's start in time (REDIS_WAIT_REPLICAS); it was ended. */
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
