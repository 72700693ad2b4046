import express from 'express';
import request from 'supertest';
import type { ModelStatusList } from '@tollway/contracts';
import { createRedis } from '@tollway/service-kit';
import type { SimServer } from '../src/engines/simulated/sim-server';
import { modelStatusRoutes } from '../src/routes/admin/models-status.route';
import {
  catalogModels,
  FAST_PREFIX_CACHING,
  httpModel,
  startGateway,
  startSim,
  TEST_KEY,
  type GatewayHarness,
} from './helpers/gateway-harness';

/** Replicas behind the gateway: three vLLM-like sims (prefix caching, /metrics) and two fixed-delay ones (no metrics). */
const KV = FAST_PREFIX_CACHING;
const FAST_SCRAPE = { scrape_interval_ms: 50, max_staleness_ms: 1000 };

describe('gateway routing across replicas', () => {
  const kvSims: SimServer[] = [];
  const plainSims: SimServer[] = [];
  let gateway: GatewayHarness;

  beforeAll(async () => {
    const kv = await Promise.all([0, 1, 2].map(() => startSim({ prefix_caching: KV, max_model_len: 32_768 })));
    const plain = await Promise.all([0, 1].map(() => startSim()));
    kvSims.push(...kv.map((started) => started.sim));
    plainSims.push(...plain.map((started) => started.sim));
    const kvUrls = kv.map((started) => started.baseUrl);
    const routed = (id: string, urls: string[], routing: Record<string, unknown>) => {
      const model = httpModel(id, urls);
      return { ...model, engine: { ...(model.engine as object), routing } };
    };
    gateway = await startGateway(
      catalogModels([
        routed('sim/prefix', kvUrls, { policy: 'prefix_cache', ...FAST_SCRAPE }),
        routed('sim/sticky', kvUrls, { policy: 'sticky', ...FAST_SCRAPE }),
        httpModel('sim/least', kvUrls),
        routed(
          'sim/plain',
          plain.map((started) => started.baseUrl),
          { policy: 'prefix_cache', ...FAST_SCRAPE },
        ),
      ]),
    );
  });

  afterAll(async () => {
    await gateway.close();
    await Promise.all([...kvSims, ...plainSims].map((sim) => sim.close()));
  });

  /** Sends one chat completion and says which of `sims` answered it (requests are sent one at a time). */
  async function servedBy(sims: SimServer[], model: string, messages: unknown[], user?: string): Promise<number> {
    const before = sims.map((sim) => sim.stats.requests);
    const res = await fetch(`${gateway.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages, max_tokens: 4, ...(user !== undefined && { user }) }),
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    const served = sims.findIndex((sim, i) => sim.stats.requests > (before[i] as number));
    expect(served).not.toBe(-1);
    return served;
  }

  const system = { role: 'system', content: 'You are the support agent of a small hardware shop. '.repeat(40) };
  const conversation = (session: string, turns: number) => [
    system,
    ...Array.from({ length: turns }, (_, turn) => ({ role: 'user', content: `${session}: question ${turn} ` })),
  ];

  // One request at a time, nothing is ever near the load bound: every conversation goes where the
  // shared system prompt went. Spreading under load is the unit tests' and the benchmark's.
  it('prefix_cache keeps each conversation on one replica, turn after turn', async () => {
    const homes = new Map<string, number>();
    for (let turn = 1; turn <= 3; turn++) {
      for (const session of ['s1', 's2', 's3', 's4', 's5', 's6']) {
        const replica = await servedBy(kvSims, 'sim/prefix', conversation(session, turn));
        if (turn === 1) homes.set(session, replica);
        else expect(replica).toBe(homes.get(session));
      }
    }
    const stats = gateway.engines.get('sim/prefix')?.routingStats?.();
    expect(stats?.policy).toBe('prefix_cache');
    expect(stats?.decisions.prefix_hit).toBeGreaterThanOrEqual(12);
  });

  it('sticky keeps a user on one replica; least_outstanding (the default) does not look at the user', async () => {
    const homes = new Map<string, number>();
    for (let round = 0; round < 3; round++) {
      for (const user of ['u1', 'u2', 'u3', 'u4', 'u5']) {
        const replica = await servedBy(kvSims, 'sim/sticky', conversation(`${round}`, 1), user);
        if (round === 0) homes.set(user, replica);
        else expect(replica).toBe(homes.get(user));
      }
    }
    const least = new Set<number>();
    for (let i = 0; i < 6; i++) least.add(await servedBy(kvSims, 'sim/least', conversation('x', 1), 'u1'));
    expect(least.size).toBeGreaterThan(1);
    expect(gateway.engines.get('sim/least')?.routingStats?.().decisions.least_loaded).toBe(6);
  });

  it("reads load from the engines' vLLM metrics when they have them, from in-flight counts otherwise", async () => {
    const deadline = Date.now() + 3000;
    const sources = () => ({
      kv: gateway.engines
        .get('sim/prefix')
        ?.replicaStats?.()
        .map((replica) => replica.loadSource),
      plain: gateway.engines
        .get('sim/plain')
        ?.replicaStats?.()
        .map((replica) => replica.loadSource),
    });
    while (sources().kv?.some((source) => source !== 'engine_metrics') && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(sources()).toEqual({
      kv: ['engine_metrics', 'engine_metrics', 'engine_metrics'],
      plain: ['in_flight', 'in_flight'],
    });
    // The default policy scrapes nothing: it routes by in-flight counts as it always did.
    expect(
      gateway.engines
        .get('sim/least')
        ?.replicaStats?.()
        .map((replica) => replica.loadSource),
    ).toEqual(['in_flight', 'in_flight', 'in_flight']);
  });

  it('shows routing in /metrics with model, policy and outcome labels only', async () => {
    await servedBy(kvSims, 'sim/prefix', conversation('metrics', 1));
    const text = await (await fetch(`${gateway.baseUrl}/metrics`)).text();
    expect(text).toMatch(
      /tollway_routing_decisions_total\{model="sim\/prefix",policy="prefix_cache",outcome="prefix_hit"[^}]*\} \d+/,
    );
    expect(text).toMatch(
      /tollway_routing_decisions_total\{model="sim\/least",policy="least_outstanding",outcome="least_loaded"[^}]*\} 6/,
    );
    const queried = Number(
      /tollway_routing_prefix_blocks_queried_total\{model="sim\/prefix"[^}]*\} (\d+)/.exec(text)?.[1],
    );
    const matched = Number(
      /tollway_routing_prefix_blocks_matched_total\{model="sim\/prefix"[^}]*\} (\d+)/.exec(text)?.[1],
    );
    expect(matched).toBeGreaterThan(0);
    expect(matched).toBeLessThan(queried);
    expect(text).toMatch(/tollway_routing_prefix_index_entries\{model="sim\/prefix"[^}]*\} [1-9]/);
    expect(text).toMatch(
      /tollway_engine_replica_load\{model="sim\/prefix",replica="http:\/\/127\.0\.0\.1:\d+"[^}]*\} 0/,
    );
  });

  it("GET /admin/v1/models shows each model's policy, its counters and each replica's load", async () => {
    const redis = createRedis(gateway.config.redisUrl, { name: 'routing-test' });
    try {
      const app = express().use(
        modelStatusRoutes({ catalog: gateway.catalog, engines: gateway.engines, redis, prefix: 'routing-test:' }),
      );
      // The last scrape may be from while the previous test's request ran: wait for a newer one.
      await new Promise((resolve) => setTimeout(resolve, 150));
      const res = await request(app).get('/models');
      expect(res.status).toBe(200);
      const byId = new Map((res.body as ModelStatusList).data.map((model) => [model.id, model]));
      const prefix = byId.get('sim/prefix');
      expect(prefix?.routing?.policy).toBe('prefix_cache');
      expect(prefix?.routing?.prefix_index_hit_rate).toBeGreaterThan(0.5);
      expect(prefix?.routing?.prefix_index_hit_rate).toBeLessThan(1);
      expect(prefix?.replicas).toEqual(
        [1, 2, 3].map((index) => ({
          index,
          healthy: true,
          in_flight: 0,
          load: 0,
          load_source: 'engine_metrics',
          kv_cache_usage: 0,
        })),
      );
      expect(byId.get('sim/sticky')?.routing?.decisions.sticky).toBe(15);
      expect(byId.get('sim/least')?.routing?.prefix_index_hit_rate).toBeNull();
      expect(byId.get('sim/plain')?.replicas.map((replica) => replica.load_source)).toEqual(['in_flight', 'in_flight']);
    } finally {
      await redis.quit();
    }
  });
});
