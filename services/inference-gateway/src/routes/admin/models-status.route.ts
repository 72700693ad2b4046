import { Router } from 'express';
import type { Redis } from 'ioredis';
import type { ModelStatus, ModelStatusList } from '@tollway/contracts';
import { modelLeaseKey } from '../../admission/redis-admission';
import type { CatalogStore } from '../../catalog/catalog-store';
import type { EngineRegistry } from '../../engines';

/** What `GET /admin/v1/models` reads: the live catalog, its engines, and the capacity leases in Redis. */
export interface ModelStatusSource {
  catalog: CatalogStore;
  engines: EngineRegistry;
  redis: Redis;
  /** Redis key prefix of the admission keys. */
  prefix: string;
}

/**
 * `GET /models`: every catalog model with its engine kind, each replica's health (probed now, never
 * its address), capacity and the leases held against it, and prices. Open to organization admins.
 */
export function modelStatusRoutes(source: ModelStatusSource): Router {
  const router = Router();
  router.get('/models', async (_req, res) => {
    const models = source.catalog.all();
    const now = Date.now();
    const data = await Promise.all(
      models.map(async (model): Promise<ModelStatus> => {
        const engine = source.engines.get(model.id);
        const [health, inUse] = await Promise.all([
          !engine ? [] : engine.probeReplicas ? engine.probeReplicas() : engine.probe().then((ok) => [ok]),
          source.redis.zcount(modelLeaseKey(source.prefix, model.id), now, '+inf'),
        ]);
        return {
          object: 'model.status',
          id: model.id,
          owned_by: model.owned_by,
          engine_kind: model.engine.kind,
          replicas: health.map((healthy, i) => ({ index: i + 1, healthy })),
          capacity: model.capacity,
          capacity_in_use: inUse,
          price_per_million: model.price_per_million,
        };
      }),
    );
    const list: ModelStatusList = { object: 'list', data };
    res.json(list);
  });
  return router;
}
