import { Router } from 'express';
import type { Redis } from 'ioredis';
import type { ModelReplicaStatus, ModelStatus, ModelStatusList } from '@tollway/contracts';
import { modelLeaseKey } from '../../admission/redis-admission';
import type { CatalogStore } from '../../catalog/catalog-store';
import type { EngineRegistry } from '../../engines';
import type { ReplicaStats, RoutingStats } from '../../engines/engine.types';

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
 * its address) and load, the routing policy and its counters, capacity and the leases held against
 * it, and prices. Open to organization admins.
 */
export function modelStatusRoutes(source: ModelStatusSource): Router {
  const router = Router();
  router.get('/models', async (_req, res) => {
    const models = source.catalog.all();
    const now = Date.now();
    const data = await Promise.all(
      models.map(async (model): Promise<ModelStatus> => {
        const engine = source.engines.get(model.id);
        const replicas = engine?.replicaStats?.();
        const routing = engine?.routingStats?.();
        const [health, inUse] = await Promise.all([
          !engine ? [] : engine.probeReplicas ? engine.probeReplicas() : engine.probe().then((ok) => [ok]),
          source.redis.zcount(modelLeaseKey(source.prefix, model.id), now, '+inf'),
        ]);
        return {
          object: 'model.status',
          id: model.id,
          owned_by: model.owned_by,
          engine_kind: model.engine.kind,
          replicas: health.map((healthy, i) => replicaStatus(i, healthy, replicas?.[i])),
          ...(routing && { routing: routingStatus(routing) }),
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

/** One replica as the admin API shows it: position, health, and (remote replicas) load. */
function replicaStatus(index: number, healthy: boolean, stats: ReplicaStats | undefined): ModelReplicaStatus {
  if (!stats) return { index: index + 1, healthy };
  return {
    index: index + 1,
    healthy,
    in_flight: stats.outstanding,
    load: stats.load,
    load_source: stats.loadSource,
    kv_cache_usage: stats.kvCacheUsage,
  };
}

function routingStatus(stats: RoutingStats): NonNullable<ModelStatus['routing']> {
  return {
    policy: stats.policy,
    decisions: stats.decisions,
    prefix_index_hit_rate: stats.blocksQueried > 0 ? stats.blocksMatched / stats.blocksQueried : null,
    prefix_index_entries: stats.indexEntries,
    prefix_index_shared: { sent: stats.blocksShared, received: stats.blocksReceived },
  };
}
