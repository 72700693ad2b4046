import { randomUUID } from 'node:crypto';
import { Router } from 'express';
import { MessageRequest, type MessageResponse } from '@tollway/contracts';
import { normalizeSessionId, sessionLocation, toStoredMessage } from '../domain/session-rules';
import { orgOf } from './auth';
import type { SessionRouteDeps } from './route-deps';
import { sessionErrors } from './session-errors';
import { requestTraceparent } from '../observability/request-telemetry.middleware';

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
    const started = await deps.store.startTurn(sessionId, org, turnId, message, deps.maxHistoryBytes);
    if (started === 'missing') throw sessionErrors.notFound(sessionId);
    if (started === 'busy') throw sessionErrors.busy(sessionId);
    if (started === 'full') throw sessionErrors.historyTooLarge(deps.maxHistoryBytes);
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
        .finishTurn(sessionId, turnId, { kind: 'error', error: 'The message could not be queued for a worker.' })
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
