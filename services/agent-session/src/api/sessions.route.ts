import { randomUUID } from 'node:crypto';
import { Router, type Request, type Response } from 'express';
import { CreateSessionRequest, GetSessionQuery } from '@tollway/contracts';
import {
  historyFromState,
  longPollDeadline,
  newSessionResponse,
  normalizeSessionId,
  parseTurnJob,
  sessionLocation,
  toSessionResponse,
  toSessionSummary,
} from '../domain/session-rules';
import { orgOf } from './auth';
import { readSessionWaiting } from './long-poll';
import type { SessionRouteDeps } from './route-deps';
import { sessionErrors } from './session-errors';

/** `/sessions` and `/sessions/{id}`: create (POST, PUT), list, read with long-poll, delete. */
export function sessionsRouter(deps: SessionRouteDeps): Router {
  const router = Router();

  const create = async (req: Request, res: Response, sessionId: string) => {
    const body = CreateSessionRequest.safeParse(req.body === undefined ? {} : req.body);
    if (!body.success) throw sessionErrors.invalidRequest(body.error, 'body');
    const history = historyFromState(body.data.state);
    const org = orgOf(res);
    const orgMaxSessions = (await deps.limits.limitsOf(org)).maxSessions;
    const limits = { maxSessions: deps.maxSessions, maxHistoryBytes: deps.maxHistoryBytes, orgMaxSessions };
    const result = await deps.store.create(sessionId, org, history, limits);
    if (result === 'too_large') throw sessionErrors.historyTooLarge(deps.maxHistoryBytes);
    if (result === 'exists') throw sessionErrors.exists(sessionId);
    if (result === 'limit') throw sessionErrors.limitReached(deps.maxSessions);
    if (result === 'org_limit') throw sessionErrors.organizationSessionLimit(orgMaxSessions);
    res.status(201).location(sessionLocation(sessionId)).json(newSessionResponse(sessionId));
  };

  router.post('/sessions', (req, res) => create(req, res, randomUUID()));

  router.put('/sessions/:sessionId', async (req, res) => {
    if (!deps.allowCustomIds) throw sessionErrors.customIdsDisabled();
    const sessionId = normalizeSessionId(req.params.sessionId);
    if (!sessionId) throw sessionErrors.invalidSessionId();
    await create(req, res, sessionId);
  });

  router.get('/sessions', async (_req, res) => {
    res.json((await deps.store.list(orgOf(res))).map(toSessionSummary));
  });

  router.get('/sessions/:sessionId', async (req, res) => {
    const query = GetSessionQuery.safeParse(req.query);
    if (!query.success) throw sessionErrors.invalidRequest(query.error, 'query');
    const sessionId = normalizeSessionId(req.params.sessionId);
    if (!sessionId) throw sessionErrors.notFound(req.params.sessionId);
    const deadline = longPollDeadline(query.data.wait, query.data.timeout, deps.clock());
    const record =
      deadline === 'no-wait'
        ? await deps.store.get(sessionId, orgOf(res))
        : await readSessionWaiting(deps, res, sessionId, orgOf(res), deadline);
    if (record === 'aborted') return;
    if (!record) throw sessionErrors.notFound(sessionId);
    res.json(toSessionResponse(record));
  });

  router.delete('/sessions/:sessionId', async (req, res) => {
    const sessionId = normalizeSessionId(req.params.sessionId);
    const result = sessionId ? await deps.store.delete(sessionId, orgOf(res)) : null;
    if (!result?.deleted) throw sessionErrors.notFound(req.params.sessionId);
    // A turn still waiting left the queue with its session and never runs: its callback goes now.
    const job = parseTurnJob(result.waitingJob);
    if (job) deps.notifier?.notifyCancelled(job, { durationMs: Math.max(0, deps.clock() - job.accepted_at) });
    res.status(204).end();
  });

  return router;
}
