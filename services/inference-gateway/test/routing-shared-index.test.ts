import { randomUUID } from 'node:crypto';
import { createRedis } from '@tollway/service-kit';
import type { SimServer } from '../src/engines/simulated/sim-server';
import { startGatewayProcess, writeCatalog, type GatewayProcess } from './admission/gateway-process';
import { FAST_PREFIX_CACHING, httpModel, startSim } from './helpers/gateway-harness';

// The real main, twice, on one Redis prefix: two gateway replicas share prefix_cache's index over
// Redis pub/sub, so a conversation's next turn through the other replica finds where it went.
const KV = FAST_PREFIX_CACHING;
const KEY = 'shared-index-key';
const SYSTEM = 'You are the assistant of a parts catalogue; answer from the tools. '.repeat(40);

describe('two gateway replicas share the prefix index', () => {
  const prefix = `test-${randomUUID()}:`;
  const sims: SimServer[] = [];
  const gateways: GatewayProcess[] = [];
  let remove = () => undefined as void;

  beforeAll(async () => {
    const started = await Promise.all([0, 1, 2, 3].map(() => startSim({ prefix_caching: KV, max_model_len: 32_768 })));
    sims.push(...started.map((s) => s.sim));
    const model = httpModel(
      'sim/shared',
      started.map((s) => s.baseUrl),
    );
    const catalog = writeCatalog([
      { ...model, engine: { ...(model.engine as object), routing: { policy: 'prefix_cache', scrape_metrics: false } } },
    ]);
    remove = catalog.remove;
    const env = { CATALOG_PATH: catalog.file, API_KEYS: KEY, REDIS_PREFIX: prefix };
    gateways.push(...(await Promise.all([startGatewayProcess(env), startGatewayProcess(env)])));
  }, 60_000);

  afterAll(async () => {
    await Promise.all(gateways.map((gateway) => gateway.stop()));
    await Promise.all(sims.map((sim) => sim.close()));
    remove();
    const redis = createRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { name: 'test-cleanup' });
    for await (const keys of redis.scanStream({ match: `${prefix}*`, count: 500 })) {
      if ((keys as string[]).length > 0) await redis.del(...(keys as string[]));
    }
    await redis.quit();
  });

  /** Sends one turn through `gateway`; resolves which sim answered it. */
  async function turn(gateway: GatewayProcess, messages: Array<{ role: string; content: string }>): Promise<number> {
    const before = sims.map((sim) => sim.stats.requests);
    const res = await fetch(`${gateway.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim/shared', messages, max_tokens: 4 }),
    });
    expect(res.status).toBe(200);
    await res.json();
    const answered = sims.findIndex((sim, i) => sim.stats.requests > (before[i] as number));
    expect(answered).toBeGreaterThanOrEqual(0);
    return answered;
  }

  async function metric(gateway: GatewayProcess, pattern: RegExp): Promise<number> {
    const text = await (await fetch(`${gateway.baseUrl}/metrics`)).text();
    return text
      .split('\n')
      .filter((line) => pattern.test(line))
      .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
  }

  it("sends a conversation's second turn, through the replica that never saw it, where its first went, as a hit", async () => {
    const [first, second] = gateways as [GatewayProcess, GatewayProcess];
    const conversations = Array.from({ length: 6 }, (_, i) => [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: `Conversation ${i}: which bearings fit the model ${i * 7919} gearbox? `.repeat(8) },
    ]);
    // Each gateway replica listens only once subscribed (main.ts): both are on the channel.
    const redis = createRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { name: 'test-numsub' });
    const [, subscribers] = (await redis.call('PUBSUB', 'NUMSUB', `${prefix}routing:prefix-index`)) as [string, number];
    await redis.quit();
    expect(subscribers).toBe(2);
    const homes: number[] = [];
    for (const messages of conversations) homes.push(await turn(first, messages));
    const sent = /tollway_routing_prefix_index_shared_blocks_total\{[^}]*direction="sent"/;
    const received = /tollway_routing_prefix_index_shared_blocks_total\{[^}]*direction="received"/;
    const published = await metric(first, sent);
    expect(published).toBeGreaterThan(0);
    const deadline = Date.now() + 5000;
    while ((await metric(second, received)) < published) {
      if (Date.now() > deadline) throw new Error('the second gateway replica never received the first one’s records');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    for (const [i, messages] of conversations.entries()) {
      const next = [
        ...messages,
        { role: 'assistant', content: 'Two of them.' },
        { role: 'user', content: 'And the seals?' },
      ];
      expect(await turn(second, next)).toBe(homes[i]);
    }
    // Its own index never saw these conversations: without the share each would be a miss.
    expect(await metric(second, /tollway_routing_decisions_total\{[^}]*outcome="prefix_hit"/)).toBe(
      conversations.length,
    );
    expect(await metric(second, /tollway_routing_decisions_total\{[^}]*outcome="prefix_miss"/)).toBe(0);
  });
});
