import type { z } from 'zod';
import type { MessageRequest } from './message.schema.js';
import { isTurnEndEvent, SESSION_EVENT_TYPES, SessionEvent } from './session-event.schema.js';
import { readSseFrames, type SseReaderState } from './sse-frames.js';

/** Where and as whom a client reads a session's events. */
export interface SessionEventsClientOptions {
  /** Root of the session service, e.g. `http://localhost:8081`. */
  baseUrl: string;
  sessionId: string;
  /** An organization key (sent as `Authorization: Bearer`); omit when the service runs without auth. */
  apiKey?: string;
  /** Stops the stream (the generator throws the signal's reason). */
  signal?: AbortSignal;
  /** The fetch to use; default the global one. */
  fetch?: typeof fetch;
  /** Reconnections in a row, without an event between them, before giving up; default 8. */
  maxReconnects?: number;
  /** First wait before a reconnection, ms (doubled each time, at most 8 s, with jitter); default the server's `retry:`, else 500. */
  reconnectDelayMs?: number;
}

/** Options of streamSessionEvents. */
export interface StreamSessionEventsOptions extends SessionEventsClientOptions {
  /** Follow the session across turns (until it is deleted); default false: end with the current or next turn. */
  follow?: boolean;
  /** Resume after this event id (one this stream or another gave). */
  lastEventId?: string;
}

/** Options of sendMessageStreaming. */
export interface SendMessageStreamingOptions extends SessionEventsClientOptions {
  /** The message, as `POST /sessions/{session_id}/messages` takes it. */
  message: z.input<typeof MessageRequest>;
}

/** One event as received, with its id (null for an event that carries none, `stream.truncated`). */
export interface ReceivedSessionEvent {
  id: string | null;
  event: SessionEvent;
}

/** A refusal of the service (4xx, or a 5xx after the last reconnection): its status and error body. */
export class SessionEventsError extends Error {
  constructor(
    message: string,
    readonly status: number,
    /** The service's error envelope, when the body was one. */
    readonly body: unknown,
  ) {
    super(message);
    this.name = 'SessionEventsError';
  }
}

const DEFAULT_MAX_RECONNECTS = 8;
const DEFAULT_RECONNECT_DELAY_MS = 500;
const MAX_RECONNECT_DELAY_MS = 8000;
/** Statuses worth another try: the service or a proxy was briefly unable, or asked to slow down. */
const RETRIABLE_STATUSES = new Set([408, 429, 500, 502, 503, 504]);
const KNOWN_TYPES = new Set<string>(SESSION_EVENT_TYPES);

/**
 * Reads `GET /sessions/{session_id}/events` and resumes by itself: after a cut connection (or
 * a retriable answer) it reconnects with `Last-Event-ID`, on whatever replica answers, so the
 * events come once each and in order. Without `follow` it ends after the turn's ending event
 * (`turn.completed`, `turn.failed`, `turn.cancelled`); with it, when the session is deleted.
 * Throws SessionEventsError on a refusal (404: no such session, or deleted).
 */
export function streamSessionEvents(options: StreamSessionEventsOptions): AsyncGenerator<ReceivedSessionEvent> {
  const follow = options.follow ?? false;
  return consume(options, follow, options.lastEventId ?? '', (lastEventId) =>
    request(options, 'GET', eventsUrl(options, follow), lastEventId),
  );
}

/**
 * Sends a message and reads its turn as a stream (`POST … /messages` with
 * `Accept: text/event-stream`); a cut stream is resumed through `GET … /events`. The message is
 * sent once: a send that fails before the service answers throws, as resending could run the
 * turn twice (read the session to learn whether it was taken). Ends with the turn.
 */
export function sendMessageStreaming(options: SendMessageStreamingOptions): AsyncGenerator<ReceivedSessionEvent> {
  let sent = false;
  return consume(
    options,
    false,
    '',
    (lastEventId) => {
      if (sent) return request(options, 'GET', eventsUrl(options, false), lastEventId);
      sent = true;
      return request(options, 'POST', `${sessionUrl(options)}/messages`, '', JSON.stringify(options.message));
    },
    true,
  );
}

function sessionUrl(options: SessionEventsClientOptions): string {
  return `${options.baseUrl.replace(/\/+$/, '')}/sessions/${encodeURIComponent(options.sessionId)}`;
}

function eventsUrl(options: SessionEventsClientOptions, follow: boolean): string {
  return `${sessionUrl(options)}/events${follow ? '?follow=true' : ''}`;
}

function request(
  options: SessionEventsClientOptions,
  method: 'GET' | 'POST',
  url: string,
  lastEventId: string,
  body?: string,
): Promise<Response> {
  const headers: Record<string, string> = { accept: 'text/event-stream' };
  if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
  if (lastEventId) headers['last-event-id'] = lastEventId;
  if (body !== undefined) headers['content-type'] = 'application/json';
  return (options.fetch ?? fetch)(url, { method, headers, body, signal: options.signal });
}

async function* consume(
  options: SessionEventsClientOptions,
  follow: boolean,
  resumeFrom: string,
  open: (lastEventId: string) => Promise<Response>,
  /** The first request sends a message: it is never repeated, so its failure is thrown. */
  sends = false,
): AsyncGenerator<ReceivedSessionEvent> {
  const state: SseReaderState = { lastEventId: resumeFrom, retryMs: undefined };
  const maxReconnects = options.maxReconnects ?? DEFAULT_MAX_RECONNECTS;
  let failures = 0;
  for (let first = true; ; first = false) {
    let response: Response | null = null;
    let failure: unknown = null;
    try {
      response = await open(state.lastEventId);
    } catch (err) {
      if (options.signal?.aborted || (sends && first)) throw err;
      failure = err;
    }
    if (response && !response.ok) {
      const error = await refusal(response);
      if (!RETRIABLE_STATUSES.has(response.status) || (sends && first)) throw error;
      failure = error;
    } else if (response) {
      if (!response.headers.get('content-type')?.startsWith('text/event-stream') || !response.body) {
        await response.body?.cancel();
        throw new SessionEventsError('the service did not answer with an event stream', response.status, null);
      }
      try {
        for await (const frame of readSseFrames(response.body, state)) {
          if (frame.data === null) continue;
          const received = toEvent(frame.type, frame.data, frame.lastEventId);
          if (!received) continue;
          failures = 0;
          yield received;
          if (received.event.type === 'turn.cancelled' || (!follow && isTurnEndEvent(received.event))) return;
        }
      } catch (err) {
        if (options.signal?.aborted || err instanceof SessionEventsError) throw err;
        failure = err;
      }
    }
    // The stream was cut (or ended before the turn did): resume where it stopped.
    if (failures++ >= maxReconnects) {
      if (failure instanceof SessionEventsError) throw failure;
      throw new SessionEventsError(
        `the event stream broke ${failures} times in a row${failure instanceof Error ? `: ${failure.message}` : ''}`,
        0,
        null,
      );
    }
    await wait(reconnectDelay(options.reconnectDelayMs ?? state.retryMs, failures), options.signal);
  }
}

function toEvent(type: string | null, data: string, lastEventId: string): ReceivedSessionEvent | null {
  // A newer service may send types this client does not know: they are skipped, not fatal.
  if (type === null || !KNOWN_TYPES.has(type)) return null;
  let json: unknown;
  try {
    json = JSON.parse(data);
  } catch {
    throw new SessionEventsError(`a ${type} event carried data that is not JSON`, 200, null);
  }
  const parsed = SessionEvent.safeParse(json);
  if (!parsed.success) {
    throw new SessionEventsError(`a ${type} event does not match its schema: ${parsed.error.message}`, 200, null);
  }
  return { id: parsed.data.type === 'stream.truncated' ? null : lastEventId || null, event: parsed.data };
}

async function refusal(response: Response): Promise<SessionEventsError> {
  const text = await response.text().catch(() => '');
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // kept as text
  }
  const message = (body as { error?: { message?: unknown } } | null)?.error?.message;
  return new SessionEventsError(
    typeof message === 'string' ? message : `the service answered ${response.status}`,
    response.status,
    body,
  );
}

function reconnectDelay(baseMs: number | undefined, failures: number): number {
  const ceiling = Math.min(MAX_RECONNECT_DELAY_MS, (baseMs ?? DEFAULT_RECONNECT_DELAY_MS) * 2 ** (failures - 1));
  return Math.round(ceiling * (0.5 + Math.random() * 0.5));
}

function wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
