import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createRedis } from '@tollway/service-kit';
import { startGatewayProcess, writeCatalog, type GatewayProcess } from './admission/gateway-process';

const model = (id: string) => ({
  id,
  owned_by: 'test',
  created: 1,
  price_per_million: { input: 1, output: 1 },
  engine: { kind: 'simulated', time_to_first_token_ms: 0, time_per_output_token_ms: 0 },
});

// The real main: SIGHUP reloads the catalog without a restart; a bad file keeps the old one.
describe('catalog reload in a running gateway', () => {
  const prefix = `test-${randomUUID()}:`;
  const catalog = writeCatalog([model('reload/one')]);
  let gateway: GatewayProcess;
  const ids = async () => {
    const res = await fetch(`${gateway.baseUrl}/v1/models`, { headers: { authorization: 'Bearer reload-key' } });
    return ((await res.json()) as { data: Array<{ id: string }> }).data.map((m) => m.id);
  };
  const until = async (check: () => Promise<boolean>) => {
    const deadline = Date.now() + 5000;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error('condition not met in time');
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  };

  beforeAll(async () => {
    gateway = await startGatewayProcess({ CATALOG_PATH: catalog.file, API_KEYS: 'reload-key', REDIS_PREFIX: prefix });
  });

  afterAll(async () => {
    await gateway.stop();
    catalog.remove();
    const redis = createRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { name: 'test-cleanup' });
    for await (const keys of redis.scanStream({ match: `${prefix}*`, count: 500 })) {
      if ((keys as string[]).length > 0) await redis.del(...(keys as string[]));
    }
    await redis.quit();
  });

  it('serves the new models after SIGHUP, and keeps them when the next file is invalid', async () => {
    expect(await ids()).toEqual(['reload/one']);
    writeFileSync(catalog.file, JSON.stringify({ models: [model('reload/one'), model('reload/two')] }));
    gateway.child.kill('SIGHUP');
    await until(async () => (await ids()).length === 2);
    const res = await fetch(`${gateway.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer reload-key', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'reload/two', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
    });
    expect(res.status).toBe(200);
    await res.json();

    writeFileSync(catalog.file, '{"models": [{"id": "broken"}]}');
    gateway.child.kill('SIGHUP');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await ids()).toEqual(['reload/one', 'reload/two']);
    expect(gateway.child.exitCode).toBeNull();
  });
});
