import { Router } from 'express';
import type { Redis } from 'ioredis';
import type { CatalogStore } from '../catalog/catalog-store';
import type { EngineRegistry } from '../engines';

/** Longest a readiness check waits for Redis, ms. */
const REDIS_PING_TIMEOUT_MS = 1000;

/**
 * `GET /healthz`: the process serves HTTP. `GET /readyz`: Redis answers and every catalog model
 * has at least one engine replica answering; 503 with the failing parts otherwise.
 */
export function healthRouter(deps: { redis: Redis; catalog: CatalogStore; engines: EngineRegistry }): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const [redis, models] = await Promise.all([pingRedis(deps.redis), probeModels(deps.catalog, deps.engines)]);
    const ready = redis && Object.values(models).every(Boolean);
    res.status(ready ? 200 : 503).json({ status: ready ? 'ok' : 'unavailable', redis, models });
  });
  return router;
}

async function pingRedis(redis: Redis): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new Error('timeout')), REDIS_PING_TIMEOUT_MS);
    });
    return (await Promise.race([redis.ping(), timeout])) === 'PONG';
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

async function probeModels(catalog: CatalogStore, engines: EngineRegistry): Promise<Record<string, boolean>> {
  const entries = await Promise.all(
    catalog.all().map(async (model) => {
      const engine = engines.get(model.id);
      return [model.id, engine ? await engine.probe() : false] as const;
    }),
  );
  return Object.fromEntries(entries);
}
