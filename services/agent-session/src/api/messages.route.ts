import { randomUUID } from 'node:crypto';
import { Router, type Request, type Response } from 'express';
import { MessageRequest, type MessageResponse } from '@tollway/contracts';
import type { StoredMessage } from '../store/session-store';
import { normalizeSessionId, sessionLocation, toStoredMessage } from '../domain/session-rules';
import { orgOf } from './auth';
import type { SessionRouteDeps } from './route-deps';
import { sessionErrors } from './session-errors';
import { requestTraceparent } from '../observability/request-telemetry.middleware';
import { JOB_LOST_ERROR } from '../worker/turn-reaper';
import { openEventStream } from '../streaming/sse-format';

/**
 * A send that took longer than this between its start script and its job is checked once more: a
 * reaper ends a running turn without a job only after WORKER_LEASE_TTL_MS (5 s by default), so a
 * send quicker than this cannot have been reaped.
 */
const STALL_CHECK_MS = 1000;

/** True when the session is in error because a reaper found its turn without a job. */
async function reapedAsLost(deps: SessionRouteDeps, sessionId: string, org: string | null): Promise<boolean> {
  const session = await deps.store.get(sessionId, org).catch(() => null);
  return session?.status === 'error' && session.error === JOB_LOST_ERROR;
}

/**
 * Whether a send asks for its turn's stream: `Accept` names `text/event-stream` and prefers it to
 * JSON (a wildcard or no `Accept` keeps today's 202).
 */
export function wantsEventStream(req: Request): boolean {
  return req.accepts(['application/json', 'text/event-stream']) === 'text/event-stream';
}

/**
 * `/sessions/{id}/messages`: send a message (starts a background turn; with `Accept:
 * text/event-stream` the answer is the turn's event stream instead of the 202) and read the history.
 */
export function messagesRouter(deps: SessionRouteDeps): Router {
  const router = Router();

  router.post('/sessions/:sessionId/messages', async (req, res) => {
    const sessionId = normalizeSessionId(req.params.sessionId);
    if (!sessionId) throw sessionErrors.notFound(req.params.sessionId);
    const body = MessageRequest.safeParse(req.body === undefined ? {} : req.body);
    if (!body.success) throw sessionErrors.invalidRequest(body.error, 'body');
    const org = orgOf(res);
    const turnId = randomUUID();
    const message = toStoredMessage(body.data);
    // A stream is opened (its start found, the session marked watched) before the turn starts, so
    // the worker streams the turn from its first event and the stream holds nothing before it.
    const stream = deps.events && wantsEventStream(req) ? await deps.events.open(sessionId, org, null) : null;
    if (stream?.kind === 'missing') throw sessionErrors.notFound(sessionId);
    if (stream?.kind === 'too_many') throw sessionErrors.tooManyStreams(deps.events?.maxStreamsPerOrg ?? 0);
    try {
      await startAndQueue(deps, res, sessionId, org, turnId, message, body.data);
    } catch (err) {
      stream?.release();
      throw err;
    }
    if (stream) {
      openEventStream(res, stream.start, { location: sessionLocation(sessionId) });
      stream.attach(res, false);
      return;
    }
    const response: MessageResponse = { session_id: sessionId, status: 'running' };
    res.status(202).location(sessionLocation(sessionId)).json(response);
  });

  router.get('/sessions/:sessionId/messages', async (req, res) => {
    const sessionId = normalizeSessionId(req.params.sessionId);
    const messages = sessionId ? await deps.store.messages(sessionId, orgOf(res)) : null;
    if (!messages) throw sessionErrors.notFound(req.params.sessionId);
    res.json(messages);
  });

  return router;
}

/**
 * Starts the turn (one script: `running` with a new turn id, the message appended) and queues its
 * job; throws the send's refusals (404, 409, 413, 503), having ended a turn it could not queue.
 */
async function startAndQueue(
  deps: SessionRouteDeps,
  res: Response,
  sessionId: string,
  org: string | null,
  turnId: string,
  message: StoredMessage,
  body: MessageRequest,
): Promise<void> {
  const startedAt = performance.now();
  const started = await deps.store.startTurn(sessionId, org, turnId, message, deps.maxHistoryBytes);
  if (started === 'missing') throw sessionErrors.notFound(sessionId);
  if (started === 'busy') throw sessionErrors.busy(sessionId);
  if (started === 'full') throw sessionErrors.historyTooLarge(deps.maxHistoryBytes);
  try {
    await deps.turnQueue.enqueue({
      session_id: sessionId,
      turn_id: turnId,
      org_id: org,
      message: body,
      accepted_at: deps.clock(),
      traceparent: requestTraceparent(res),
    });
  } catch (err) {
    // Nothing accepted is silently lost: the turn ends in error (compare-and-set) before the 503.
    // An enqueue whose answer was lost (a reply timeout while the process stalled) may have
    // reached Redis: if a worker has taken the turn meanwhile, the compare-and-set finds it no
    // longer running this turn, and the message was accepted after all.
    const ended = await deps.store
      .finishTurn(sessionId, turnId, { kind: 'error', error: 'The message could not be queued for a worker.' }, 'api')
      .catch(() => 'unknown' as const);
    if (ended !== 'stale') {
      deps.logger.error('turn not queued', { session_id: sessionId, turn_id: turnId, err: (err as Error).message });
      throw sessionErrors.turnNotQueued(err);
    }
    deps.logger.warn('turn queued though the queue reported an error; a worker took it', {
      session_id: sessionId,
      turn_id: turnId,
      err: (err as Error).message,
    });
  }
  if (performance.now() - startedAt > STALL_CHECK_MS && (await reapedAsLost(deps, sessionId, org))) {
    // The process stalled between the two steps long enough for a reaper to end the turn as one
    // whose job was lost; the job added since is stale and no worker will run it.
    throw sessionErrors.turnNotQueued(new Error('the turn was reaped before its job was added'));
  }
}
