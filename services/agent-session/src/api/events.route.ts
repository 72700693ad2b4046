import { Router, type Request, type Response } from 'express';
import { SessionEventsQuery } from '@tollway/contracts';
import { normalizeSessionId } from '../domain/session-rules';
import { parseEventId } from '../streaming/event-ids';
import type { EventReaderHub } from '../streaming/event-reader-hub';
import { openEventStream } from '../streaming/sse-format';
import { orgOf } from './auth';
import type { SessionRouteDeps } from './route-deps';
import { sessionErrors } from './session-errors';

/**
 * The id a stream resumes after: the `Last-Event-ID` header (what an EventSource sends when it
 * reconnects), else the `last_event_id` query parameter; null for a new reader. An empty value is
 * no id, as EventSource treats it; anything else that is not an event id is 400.
 */
export function resumeIdOf(req: Request, query: SessionEventsQuery): string | null {
  const header = req.headers['last-event-id'];
  const [raw, param] =
    typeof header === 'string' && header !== ''
      ? [header, 'Last-Event-ID' as const]
      : [query.last_event_id ?? '', 'last_event_id' as const];
  if (raw === '') return null;
  const id = parseEventId(raw);
  if (id === null) throw sessionErrors.invalidEventId(param);
  return id;
}

/**
 * Opens the event stream of `sessionId` for the caller and serves it on `res`: 404 when the
 * session is not the caller's, 429 past the organization's streams. `headers` go with the 200.
 */
export async function serveEventStream(
  events: EventReaderHub,
  res: Response,
  sessionId: string,
  options: { resumeId: string | null; follow: boolean; headOnly?: boolean; headers?: Record<string, string> },
): Promise<void> {
  const opened = await events.open(sessionId, orgOf(res), options.resumeId);
  if (opened.kind === 'missing') throw sessionErrors.notFound(sessionId);
  if (opened.kind === 'too_many') throw sessionErrors.tooManyStreams(events.maxStreamsPerOrg);
  openEventStream(res, options.resumeId === null ? opened.start : null, options.headers);
  if (options.headOnly) {
    opened.release();
    res.end();
    return;
  }
  opened.attach(res, options.follow);
}

/** `GET /sessions/{id}/events`: the session's events as Server-Sent Events (see streaming/). */
export function eventsRouter(deps: SessionRouteDeps & { events: EventReaderHub }): Router {
  const router = Router();

  router.get('/sessions/:sessionId/events', async (req, res) => {
    const query = SessionEventsQuery.safeParse(req.query);
    if (!query.success) throw sessionErrors.invalidRequest(query.error, 'query');
    const sessionId = normalizeSessionId(req.params.sessionId);
    if (!sessionId) throw sessionErrors.notFound(req.params.sessionId);
    await serveEventStream(deps.events, res, sessionId, {
      resumeId: resumeIdOf(req, query.data),
      follow: query.data.follow,
      headOnly: req.method === 'HEAD',
    });
  });

  return router;
}
