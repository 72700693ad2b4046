import { Router } from 'express';
import type { Redis } from 'ioredis';
import { buildSessionsOpenApi, type HealthResponse } from '@tollway/contracts';
import { serializeError, type Logger } from '@tollway/service-kit';
import type { SessionStore } from '../store/session-store';
import { sessionErrors } from './session-errors';

/** Cluster-wide worker totals (the worker registry's `readWorkerStats`). */
export type WorkerStatsReader = () => Promise<{ maxWorkers: number; runningWorkers: number }>;

/** Set on a `/health` answer whose counts are the last read, Redis being unreachable. */
export const STALE_HEADER = 'x-health-stale';

/** `/health` (spec), `/healthz` (liveness), `/readyz` (Redis reachable) and `/openapi.json`. */
export function healthRouter(deps: {
  store: SessionStore;
  redis: Redis;
  workerStats: WorkerStatsReader;
  logger?: Logger;
}): Router {
  const router = Router();
  const openApi = buildSessionsOpenApi();

  // The spec's status is "always ok when the server is reachable": when Redis cannot be read, the
  // counts are the last ones read (zeros before the first) and readiness is /readyz's to report.
  let lastRead: HealthResponse = { status: 'ok', max_workers: 0, running_workers: 0, total_sessions: 0 };
  router.get('/health', async (_req, res) => {
    try {
      const [workers, totalSessions] = await Promise.all([deps.workerStats(), deps.store.count()]);
      lastRead = {
        status: 'ok',
        max_workers: workers.maxWorkers,
        running_workers: workers.runningWorkers,
        total_sessions: totalSessions,
      };
    } catch (err) {
      res.setHeader(STALE_HEADER, 'true');
      deps.logger?.warn('health: the session store could not be read; answering the last counts read', {
        err: serializeError(err),
      });
    }
    res.json(lastRead);
  });

  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });

  router.get('/readyz', async (_req, res) => {
    try {
      await deps.redis.ping();
    } catch (err) {
      throw sessionErrors.unavailable(err);
    }
    res.json({ status: 'ready' });
  });

  router.get('/openapi.json', (_req, res) => {
    res.json(openApi);
  });

  return router;
}
