import { z } from 'zod';

/** Session status values. */
export const SESSION_STATUSES = ['idle', 'running', 'error'] as const;
export const SessionStatus = z.enum(SESSION_STATUSES);
export type SessionStatus = z.infer<typeof SessionStatus>;

/** Roles a session's chat message may carry. */
export const CHAT_MESSAGE_ROLES = ['user', 'assistant', 'system', 'tool'] as const;
export const ChatMessageRole = z.enum(CHAT_MESSAGE_ROLES);
export type ChatMessageRole = z.infer<typeof ChatMessageRole>;

export const ChatMessage = z.object({
  role: ChatMessageRole,
  content: z.string().nullable(),
});
export type ChatMessage = z.infer<typeof ChatMessage>;

/** One preloaded history item of a create-session body: `user` or `assistant` with string content. */
export const SessionStateMessage = z.object({
  role: z.enum(['user', 'assistant']),
  content: z.string(),
});
export type SessionStateMessage = z.infer<typeof SessionStateMessage>;

/** Most messages a create body's `state` may preload. */
export const SESSION_STATE_MAX_MESSAGES = 1000;

/** Body of `POST /sessions` and `PUT /sessions/{session_id}`; `{}` or no body gives an empty session. */
export const CreateSessionRequest = z.object({
  state: z.array(SessionStateMessage).max(SESSION_STATE_MAX_MESSAGES).optional(),
});
export type CreateSessionRequest = z.infer<typeof CreateSessionRequest>;

export const SessionResponse = z.object({
  session_id: z.uuid(),
  status: SessionStatus,
  response: ChatMessage.nullish(),
  error: z.string().nullish(),
});
export type SessionResponse = z.infer<typeof SessionResponse>;

export const SessionSummary = z.object({
  session_id: z.string(),
  total_messages: z.number().int().min(0),
  status: SessionStatus,
});
export type SessionSummary = z.infer<typeof SessionSummary>;

export const SessionSummaryList = z.array(SessionSummary);
export type SessionSummaryList = z.infer<typeof SessionSummaryList>;

export const HealthResponse = z.object({
  status: z.literal('ok'),
  max_workers: z.number().min(0),
  running_workers: z.number().min(0),
  total_sessions: z.number().min(0),
});
export type HealthResponse = z.infer<typeof HealthResponse>;

/**
 * Seconds as decimal digits with an optional fraction. Number() would also take an empty value or
 * blanks (as 0: a long-poll that never waits), hex and exponents.
 */
const DECIMAL_SECONDS = /^(?:\d+(?:\.\d*)?|\.\d+)$/;

/** Query of `GET /sessions/{session_id}`: `wait` (default false) and `timeout` in seconds. */
export const GetSessionQuery = z.object({
  wait: z
    .enum(['true', 'false', '1', '0'])
    .optional()
    .transform((value) => value === 'true' || value === '1'),
  timeout: z
    .string()
    .regex(DECIMAL_SECONDS, 'timeout must be a number of seconds, 0 or more')
    .transform(Number)
    .optional(),
});
export type GetSessionQuery = z.infer<typeof GetSessionQuery>;

/** Error codes of the session service's error envelope. */
export const SESSION_ERROR_CODES = {
  invalidJson: 'invalid_json',
  requestTooLarge: 'request_too_large',
  invalidRequest: 'invalid_request',
  invalidSessionId: 'invalid_session_id',
  unauthorized: 'unauthorized',
  sessionNotFound: 'session_not_found',
  sessionExists: 'session_exists',
  sessionBusy: 'session_busy',
  methodNotAllowed: 'method_not_allowed',
  customIdsDisabled: 'custom_ids_disabled',
  sessionLimitReached: 'session_limit_reached',
  organizationSessionLimit: 'organization_session_limit',
  turnQueueFull: 'turn_queue_full',
  turnNotQueued: 'turn_not_queued',
  historyTooLarge: 'history_too_large',
  tooManyStreams: 'too_many_streams',
  serviceUnavailable: 'service_unavailable',
  notFound: 'not_found',
} as const;
export type SessionErrorCode = (typeof SESSION_ERROR_CODES)[keyof typeof SESSION_ERROR_CODES];

/**
 * The session service's error body (the spec leaves it open): the same envelope as the
 * inference API, `{ error: { message, type, param, code } }`, with `code` from SESSION_ERROR_CODES.
 */
export const SessionErrorResponse = z.object({
  error: z.object({
    message: z.string(),
    type: z.string(),
    param: z.string().nullable(),
    code: z.string(),
  }),
});
export type SessionErrorResponse = z.infer<typeof SessionErrorResponse>;
