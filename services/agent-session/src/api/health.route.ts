import { Router } from 'express';
import type { Redis } from 'ioredis';
import { buildSessionsOpenApi, type HealthResponse } from '@tollway/contracts';
import type { SessionStore } from '../store/session-store';
import { sessionErrors } from './session-errors';

/** Cluster-wide worker totals (the worker registry's `readWorkerStats`). */
export type WorkerStatsReader = () => Promise<{ maxWorkers: number; runningWorkers: number }>;

/** `/health` (spec), `/healthz` (liveness), `/readyz` (Redis reachable) and `/openapi.json`. */
export function healthRouter(deps: { store: SessionStore; redis: Redis; workerStats: WorkerStatsReader }): Router {
  const router = Router();
  const openApi = buildSessionsOpenApi();

  router.get('/health', async (_req, res) => {
    let body: HealthResponse;
    try {
      const [workers, totalSessions] = await Promise.all([deps.workerStats(), deps.store.count()]);
      body = {
        status: 'ok',
        max_workers: workers.maxWorkers,
        running_workers: workers.runningWorkers,
        total_sessions: totalSessions,
      };
    } catch (err) {
      throw sessionErrors.unavailable(err);
    }
    res.json(body);
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
