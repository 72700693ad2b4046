import { randomUUID } from 'node:crypto';
import { Router, type Request } from 'express';
import { MessageRequest, type AgentTurnJob, type MessageResponse } from '@tollway/contracts';
import { normalizeSessionId, sessionLocation, toStoredMessage } from '../domain/session-rules';
import { orgOf } from './auth';
import type { SessionRouteDeps } from './route-deps';
import { sessionErrors } from './session-errors';
import { requestTraceparent } from '../observability/request-telemetry.middleware';
import { openEventStream } from '../streaming/sse-format';

/**
 * What a 429 for a full turn queue advises to wait, ms: the organization's queue drains as its
 * turns start, typically several a second.
 */
const QUEUE_FULL_RETRY_AFTER_MS = 1000;

/**
 * Whether a send asks for its turn's stream: `Accept` names `text/event-stream` and prefers it to
 * JSON (a wildcard or no `Accept` keeps today's 202).
 */
export function wantsEventStream(req: Request): boolean {
  return req.accepts(['application/json', 'text/event-stream']) === 'text/event-stream';
}

/** Error of a turn whose start the store's replicas did not acknowledge in time. */
export const UNCONFIRMED_ERROR = 'turn failed: the session store could not confirm the message on its replicas in time';

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
    // A stream is opened (its start found, the session marked watched) before the turn starts, so
    // the worker streams the turn from its first event and the stream holds nothing before it.
    const stream = deps.events && wantsEventStream(req) ? await deps.events.open(sessionId, org, null) : null;
    if (stream?.kind === 'missing') throw sessionErrors.notFound(sessionId);
    if (stream?.kind === 'too_many') throw sessionErrors.tooManyStreams(deps.events?.maxStreamsPerOrg ?? 0);
    try {
      // The message itself goes to the history; the job carries what only the turn needs of it (a
      // 10 MiB image is stored once, not again in the queue).
      const { role, user_params: userParams, webhook } = body.data;
      const job: AgentTurnJob = {
        session_id: sessionId,
        turn_id: turnId,
        org_id: org,
        message: { role, content: null, user_params: userParams, webhook },
        accepted_at: deps.clock(),
        traceparent: requestTraceparent(res),
      };
      const limits = await deps.limits.limitsOf(org);
      // What this replica knew of the session's turns is void once the send may have run (its
      // reply may be lost): nothing stale is answered from it (see SessionEventHub.recentEnd).
      deps.hub.forgetSession(sessionId);
      // The message is appended and the turn queued in one step: an accepted turn is never lost.
      const { result } = await deps.store.startTurn(
        sessionId,
        org,
        { turnId, message: toStoredMessage(body.data), job: JSON.stringify(job) },
        { maxHistoryBytes: deps.maxHistoryBytes, ...limits },
        deps.hub.replicaId,
      );
      if (result === 'missing') throw sessionErrors.notFound(sessionId);
      if (result === 'busy') throw sessionErrors.busy(sessionId);
      if (result === 'full') throw sessionErrors.historyTooLarge(deps.maxHistoryBytes);
      if (result === 'queue_full') throw sessionErrors.turnQueueFull(limits.maxWaitingTurns, QUEUE_FULL_RETRY_AFTER_MS);
      // A turn the replicas do not hold could vanish in a failover after its 202
      // (REDIS_WAIT_REPLICAS): it is ended (taken out of the queue) and the answer is a 503.
      await deps.store.confirmTurnStarted().catch(async (err: unknown) => {
        await endUnconfirmed(deps, sessionId, org, turnId, err);
        throw sessionErrors.turnNotQueued(err);
      });
      // A long-poll on this replica can wait for the turn's end without reading the session first.
      deps.hub.noteStarted(sessionId, turnId, org);
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
 * Ends a turn whose start the replicas did not confirm, in error (compare-and-set; out of its
 * queue, so no worker runs it), and logs why. Redis may be failing over: then the ending may fail
 * too, and the 503 says to read the session.
 */
async function endUnconfirmed(
  deps: SessionRouteDeps,
  sessionId: string,
  org: string | null,
  turnId: string,
  err: unknown,
): Promise<void> {
  await deps.store
    .finishTurn(sessionId, turnId, { kind: 'error', error: UNCONFIRMED_ERROR }, { endedBy: 'api', org })
    .catch(() => 'unknown' as const);
  deps.logger.error('turn not queued: its start was not confirmed by the replicas', {
    session_id: sessionId,
    turn_id: turnId,
    err: (err as Error).message,
  });
}
