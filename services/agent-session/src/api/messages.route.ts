import { randomUUID } from 'node:crypto';
import { Router } from 'express';
import { MessageRequest, type AgentTurnJob, type MessageResponse } from '@tollway/contracts';
import { normalizeSessionId, sessionLocation, toStoredMessage } from '../domain/session-rules';
import { orgOf } from './auth';
import type { SessionRouteDeps } from './route-deps';
import { sessionErrors } from './session-errors';
import { requestTraceparent } from '../observability/request-telemetry.middleware';

/**
 * What a 429 for a full turn queue advises to wait, ms: the organization's queue drains as its
 * turns start, typically several a second.
 */
const QUEUE_FULL_RETRY_AFTER_MS = 1000;

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
    // The message is appended and the turn queued in one step: an accepted turn is never lost.
    const { result } = await deps.store.startTurn(
      sessionId,
      org,
      { turnId, message: toStoredMessage(body.data), job: JSON.stringify(job) },
      { maxHistoryBytes: deps.maxHistoryBytes, ...limits },
    );
    if (result === 'missing') throw sessionErrors.notFound(sessionId);
    if (result === 'busy') throw sessionErrors.busy(sessionId);
    if (result === 'full') throw sessionErrors.historyTooLarge(deps.maxHistoryBytes);
    if (result === 'queue_full') throw sessionErrors.turnQueueFull(limits.maxWaitingTurns, QUEUE_FULL_RETRY_AFTER_MS);
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
