import { randomUUID } from 'node:crypto';
import { Router } from 'express';
import { MessageRequest, type MessageResponse } from '@tollway/contracts';
import { normalizeSessionId, sessionLocation, toStoredMessage } from '../domain/session-rules';
import { orgOf } from './auth';
import type { SessionRouteDeps } from './route-deps';
import { sessionErrors } from './session-errors';
import { requestTraceparent } from '../observability/request-telemetry.middleware';
import { JOB_LOST_ERROR } from '../worker/turn-reaper';

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
 * Ends a turn that was started but will not be queued, in error (compare-and-set), and logs why.
 * Redis may be failing over: then the ending may fail too, and the 503 says to read the session.
 */
async function endUnqueued(deps: SessionRouteDeps, sessionId: string, turnId: string, err: unknown): Promise<void> {
  await deps.store
    .finishTurn(sessionId, turnId, { kind: 'error', error: UNCONFIRMED_ERROR }, 'api')
    .catch(() => 'unknown' as const);
  deps.logger.error('turn not queued: its start was not confirmed by the replicas', {
    session_id: sessionId,
    turn_id: turnId,
    err: (err as Error).message,
  });
}

/** Error of a turn whose start the store's replicas did not acknowledge in time. */
export const UNCONFIRMED_ERROR = 'turn failed: the session store could not confirm the message on its replicas in time';

/** `/sessions/{id}/messages`: send a message (starts a background turn) and read the history. */
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
    const startedAt = performance.now();
    const started = await deps.store.startTurn(sessionId, org, turnId, message, deps.maxHistoryBytes);
    if (started === 'missing') throw sessionErrors.notFound(sessionId);
    if (started === 'busy') throw sessionErrors.busy(sessionId);
    if (started === 'full') throw sessionErrors.historyTooLarge(deps.maxHistoryBytes);
    try {
      // A turn the replicas do not hold could vanish in a failover after its 202 (REDIS_WAIT_REPLICAS).
      await deps.store.confirmTurnStarted();
    } catch (err) {
      await endUnqueued(deps, sessionId, turnId, err);
      throw sessionErrors.turnNotQueued(err);
    }
    try {
      await deps.turnQueue.enqueue({
        session_id: sessionId,
        turn_id: turnId,
        org_id: org,
        message: body.data,
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
