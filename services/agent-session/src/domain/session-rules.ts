import {
  AgentTurnJob,
  type MessageRequest,
  type SessionResponse,
  type SessionStateMessage,
  type SessionSummary,
} from '@tollway/contracts';
import type { SessionListItem, SessionRecord, StoredMessage } from '../store/session-store';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Session ids are UUIDs of any version, compared in lower case. Null when `raw` is not one. */
export function normalizeSessionId(raw: string): string | null {
  return UUID.test(raw) ? raw.toLowerCase() : null;
}

/** The path a session is found at (the `Location` header). */
export function sessionLocation(sessionId: string): string {
  return `/sessions/${sessionId}`;
}

/**
 * SessionResponse of a record: `response` is the agent's latest, from the last successful turn
 * (null before one, and while running: rule 2), so a failed turn leaves the one before it; `error`
 * only in `error`.
 */
export function toSessionResponse(record: SessionRecord): SessionResponse {
  return {
    session_id: record.sessionId,
    status: record.status,
    response: record.status === 'running' ? null : record.response,
    error: record.status === 'error' ? record.error : null,
  };
}

/** SessionResponse of a session just created: idle, nothing yet. */
export function newSessionResponse(sessionId: string): SessionResponse {
  return { session_id: sessionId, status: 'idle', response: null, error: null };
}

/** One line of `GET /sessions`. */
export function toSessionSummary(item: SessionListItem): SessionSummary {
  return { session_id: item.sessionId, total_messages: item.totalMessages, status: item.status };
}

/** The history preloaded from a create body's `state`. */
export function historyFromState(state: SessionStateMessage[] | undefined): StoredMessage[] {
  return (state ?? []).map((item) => ({ role: item.role, content: item.content }));
}

/** The history item a send appends: the ChatMessage fields plus the tool and image fields that were given. */
export function toStoredMessage(request: MessageRequest): StoredMessage {
  const message: StoredMessage = { role: request.role, content: request.content };
  if (request.tool_calls !== undefined) message.tool_calls = request.tool_calls;
  if (request.tool_call_id !== undefined) message.tool_call_id = request.tool_call_id;
  if (request.name !== undefined) message.name = request.name;
  if (request.base64_image !== undefined) message.base64_image = request.base64_image;
  return message;
}

/**
 * When a long-poll gives up (Unix ms): `timeout` seconds after `now`; null (wait without limit)
 * when `wait` is set without a timeout. `timeout` without `wait` does not block (rule 1).
 */
export function longPollDeadline(
  wait: boolean,
  timeoutSeconds: number | undefined,
  now: number,
): number | null | 'no-wait' {
  if (!wait) return 'no-wait';
  if (timeoutSeconds === undefined) return null;
  return now + Math.round(timeoutSeconds * 1000);
}

/** A turn's job as the API queued it (JSON), or null when it does not parse (a hand-edited key). */
export function parseTurnJob(json: string | null): AgentTurnJob | null {
  if (json === null) return null;
  try {
    const parsed = AgentTurnJob.safeParse(JSON.parse(json));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}
