import { z } from 'zod';
import { SessionResponse } from './session.schema.js';
import { TraceMetrics } from './webhook.schema.js';

/**
 * The events of `GET /sessions/{session_id}/events` (and of `POST /sessions/{session_id}/messages`
 * answered as a stream): one Server-Sent Event each, `event:` its `type`, `data:` the JSON below,
 * `id:` its position in the session's event log (resume after it with `Last-Event-ID`).
 */

/** Bounds of what an agent may put in an event: a custom event's name and its data as JSON. */
export const SESSION_EVENT_BOUNDS = { nameMaxLength: 128, dataMaxJsonBytes: 64 * 1024 } as const;

const turnFields = {
  session_id: z.uuid(),
  /** The turn the event belongs to. */
  turn_id: z.string().min(1),
};

/** Index of the assistant message of the turn the event belongs to: 0 for the first model call's answer. */
const messageIndex = z.number().int().min(0);

/** A turn began running on a worker: everything after it, up to its ending event, is this turn's. */
export const TurnStartedEvent = z.object({ type: z.literal('turn.started'), ...turnFields });
export type TurnStartedEvent = z.infer<typeof TurnStartedEvent>;

/**
 * Text of an assistant message as it is written. The `content` of the deltas of one `message_index`,
 * concatenated, is that message's content; those of the turn's last assistant message concatenate
 * to the `response.content` of its `turn.completed`. `reasoning_content` likewise, for models that
 * emit a reasoning trace (it is not kept in the history).
 */
export const MessageDeltaEvent = z.object({
  type: z.literal('message.delta'),
  ...turnFields,
  message_index: messageIndex,
  content: z.string().optional(),
  reasoning_content: z.string().optional(),
});
export type MessageDeltaEvent = z.infer<typeof MessageDeltaEvent>;

/**
 * A tool call as the model forms it: `index` is its place in the message's `tool_calls`; `id` and
 * `name` come once, `arguments` in pieces that concatenate to the call's JSON arguments.
 */
export const ToolCallDeltaEvent = z.object({
  type: z.literal('tool_call.delta'),
  ...turnFields,
  message_index: messageIndex,
  index: z.number().int().min(0),
  id: z.string().optional(),
  name: z.string().optional(),
  arguments: z.string().optional(),
});
export type ToolCallDeltaEvent = z.infer<typeof ToolCallDeltaEvent>;

/** The result of a tool call the agent ran itself (the `tool` message it appends). */
export const ToolResultEvent = z.object({
  type: z.literal('tool.result'),
  ...turnFields,
  tool_call_id: z.string(),
  content: z.string().nullable(),
});
export type ToolResultEvent = z.infer<typeof ToolResultEvent>;

/** An event of the agent's own (`ctx.events.emit(name, data)` in an agent module). */
export const AgentCustomEvent = z.object({
  type: z.literal('agent.event'),
  ...turnFields,
  name: z.string().min(1).max(SESSION_EVENT_BOUNDS.nameMaxLength),
  data: z.unknown(),
});
export type AgentCustomEvent = z.infer<typeof AgentCustomEvent>;

/**
 * The turn ended well: `response` is the session as `GET /sessions/{session_id}` shows it now
 * (`idle`, with the agent's reply); `trace_metrics` as the turn's webhook would carry it, except
 * that it is always present here (`trace_id` null without tracing).
 */
export const TurnCompletedEvent = z.object({
  type: z.literal('turn.completed'),
  ...turnFields,
  response: SessionResponse,
  trace_metrics: TraceMetrics,
});
export type TurnCompletedEvent = z.infer<typeof TurnCompletedEvent>;

/**
 * The turn ended in `error` (the agent threw, a model call failed, a timeout, a lost worker):
 * `response` is the session as it reads now, its `error` the turn's message. `trace_metrics` is
 * null when the turn was ended by another than its worker (a reaper).
 */
export const TurnFailedEvent = z.object({
  type: z.literal('turn.failed'),
  ...turnFields,
  response: SessionResponse,
  trace_metrics: TraceMetrics.nullable(),
});
export type TurnFailedEvent = z.infer<typeof TurnFailedEvent>;

/**
 * The session was deleted (`DELETE`, its organization's deletion, or the TTL sweep): its running
 * turn, if any, is cancelled (`turn_id` null when none ran), and the stream ends. `error` is the
 * message the turn's webhook carries (`turn cancelled: session deleted`).
 */
export const TurnCancelledEvent = z.object({
  type: z.literal('turn.cancelled'),
  session_id: z.uuid(),
  turn_id: z.string().min(1).nullable(),
  error: z.string(),
});
export type TurnCancelledEvent = z.infer<typeof TurnCancelledEvent>;

/**
 * Events after `last_event_id` were dropped from the log before this stream could send them (its
 * retention passed, or the id is not one the log gave): what follows resumes at the oldest event
 * kept. Read the session to learn its state. Carries no `id`.
 */
export const StreamTruncatedEvent = z.object({
  type: z.literal('stream.truncated'),
  session_id: z.uuid(),
  last_event_id: z.string(),
});
export type StreamTruncatedEvent = z.infer<typeof StreamTruncatedEvent>;

/** Any event of a session's stream, told apart by `type`. */
export const SessionEvent = z.discriminatedUnion('type', [
  TurnStartedEvent,
  MessageDeltaEvent,
  ToolCallDeltaEvent,
  ToolResultEvent,
  AgentCustomEvent,
  TurnCompletedEvent,
  TurnFailedEvent,
  TurnCancelledEvent,
  StreamTruncatedEvent,
]);
export type SessionEvent = z.infer<typeof SessionEvent>;

/** Every event type, as the SSE `event:` field names it. */
export const SESSION_EVENT_TYPES = [
  'turn.started',
  'message.delta',
  'tool_call.delta',
  'tool.result',
  'agent.event',
  'turn.completed',
  'turn.failed',
  'turn.cancelled',
  'stream.truncated',
] as const satisfies readonly SessionEvent['type'][];
export type SessionEventType = (typeof SESSION_EVENT_TYPES)[number];

/** The events that end a turn; a stream that does not follow the session ends after the first. */
export const TURN_END_EVENT_TYPES = ['turn.completed', 'turn.failed', 'turn.cancelled'] as const;

/** True for `turn.completed`, `turn.failed` and `turn.cancelled`. */
export function isTurnEndEvent(event: Pick<SessionEvent, 'type'>): boolean {
  return (TURN_END_EVENT_TYPES as readonly string[]).includes(event.type);
}

/**
 * Query of `GET /sessions/{session_id}/events`: `follow` (default false: the stream ends with the
 * current or next turn; true: it follows the session across turns until it is deleted), and
 * `last_event_id` (resume after it; the `Last-Event-ID` header wins when both are sent).
 */
export const SessionEventsQuery = z.object({
  follow: z
    .enum(['true', 'false', '1', '0'])
    .optional()
    .transform((value) => value === 'true' || value === '1'),
  last_event_id: z.string().optional(),
});
export type SessionEventsQuery = z.infer<typeof SessionEventsQuery>;

/**
 * An event id: a position in the session's event log, `<milliseconds>-<sequence>` (a Redis stream
 * id), each part a 64-bit unsigned number. Ids compare as the pair of numbers.
 */
export const SESSION_EVENT_ID = /^\d{1,20}-\d{1,20}$/;
