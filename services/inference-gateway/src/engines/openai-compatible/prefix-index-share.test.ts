import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import type { CreateChatCompletionRequest } from '@tollway/contracts';
import { RoutingSpec } from '../../catalog/catalog.schema';
import { promptBlockHashes } from '../prefix-blocks';
import { PrefixIndexShare, shareKey } from './prefix-index-share';
import { ReplicaRouter } from './routing';

// Real Redis pub/sub: two "gateway replicas" (two shares, each with its own connections) on one
// channel, as two gateway processes with the same REDIS_PREFIX would be.
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const connections: Redis[] = [];
const shares: PrefixIndexShare[] = [];

function connection(): Redis {
  const redis = new Redis(REDIS_URL, { lazyConnect: false });
  connections.push(redis);
  return redis;
}

async function share(channel: string): Promise<PrefixIndexShare> {
  const created = new PrefixIndexShare(connection(), connection(), channel);
  shares.push(created);
  await created.start();
  return created;
}

afterAll(async () => {
  await Promise.all(shares.map((s) => s.close()));
  await Promise.all(connections.map((redis) => redis.quit().catch(() => undefined)));
});

const URLS = [
  'http://10.0.0.1:8000/v1',
  'http://10.0.0.2:8000/v1',
  'http://10.0.0.3:8000/v1',
  'http://10.0.0.4:8000/v1',
];
const SYSTEM = 'You are a careful assistant with many tools. '.repeat(20);

function request(session: string, turns: number): CreateChatCompletionRequest {
  const messages = [{ role: 'system', content: SYSTEM }];
  for (let turn = 0; turn < turns; turn++)
    messages.push({ role: 'user', content: `${session} asks question ${turn}. `.repeat(4) });
  return { model: 'm', messages } as CreateChatCompletionRequest;
}

/** A prefix_cache router over `loads` linked to `through` as model `model` over `urls`. */
function sharedRouter(through: PrefixIndexShare, loads: number[], model = 'm', urls = URLS) {
  const router = new ReplicaRouter(RoutingSpec.parse({ policy: 'prefix_cache', block_chars: 16 }), {
    count: loads.length,
    load: (replica) => loads[replica] as number,
  });
  const link = through.link(model, urls, (replica, hashes) => router.applyShared(replica, hashes));
  router.shareThrough(link);
  return { router, link };
}

async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('PrefixIndexShare (real Redis pub/sub)', () => {
  it("sends a conversation's next turn, through another gateway replica, where its first turn went", async () => {
    const channel = `test-${randomUUID()}:routing:prefix-index`;
    const [a, b] = [await share(channel), await share(channel)];
    const loads = [5, 5, 5, 5];
    const first = sharedRouter(a, loads).router;
    const second = sharedRouter(b, loads).router;
    // The shared system prompt is on every replica already, from both gateway replicas' view.
    for (let replica = 0; replica < 4; replica++) {
      loads.fill(100);
      loads[replica] = 0;
      first.choose(request('warm', 0));
      second.choose(request('warm', 0));
    }
    await until(() => b.stats().received > 0 && a.stats().received > 0, 'the system prompt records');
    loads.fill(5);
    const homes: number[] = [];
    for (let i = 0; i < 8; i++) {
      // A new conversation goes to the least loaded replica holding the system prompt…
      loads.fill(5);
      loads[i % 4] = 1;
      const home = first.choose(request(`c${i}`, 1));
      expect(home).toBe(i % 4);
      homes.push(home);
    }
    // Published within SHARE_FLUSH_MS, in one message.
    await until(() => b.stats().received === first.stats().blocksShared, "the first gateway replica's records");
    // …and its second turn, through the other gateway replica (which never saw it), follows it there.
    loads.fill(5);
    for (let i = 0; i < 8; i++) expect(second.choose(request(`c${i}`, 2))).toBe(homes[i]);
    expect(second.stats().decisions.prefix_hit).toBeGreaterThanOrEqual(8);
    expect(second.stats().blocksReceived).toBeGreaterThan(0);
    expect(first.stats().blocksShared).toBeGreaterThan(0);
  });

  it('publishes only what is new to the index: a repeated prompt sends nothing more', async () => {
    const channel = `test-${randomUUID()}:routing:prefix-index`;
    const a = await share(channel);
    const { router } = sharedRouter(a, [0, 0, 0, 0]);
    router.choose(request('repeat', 3));
    const once = router.stats().blocksShared;
    expect(once).toBeGreaterThan(0);
    for (let i = 0; i < 5; i++) router.choose(request('repeat', 3));
    expect(router.stats().blocksShared).toBe(once);
    // The next turn shares only its own new blocks, not the whole conversation again.
    router.choose(request('repeat', 4));
    expect(router.stats().blocksShared - once).toBeLessThan(once / 2);
  });

  it('applies nothing to a model whose replicas differ (another catalog) and nothing of its own', async () => {
    const channel = `test-${randomUUID()}:routing:prefix-index`;
    const [a, b] = [await share(channel), await share(channel)];
    const sender = sharedRouter(a, [0, 0, 0, 0]).router;
    const own = sharedRouter(a, [0, 0, 0, 0], 'm').router; // same process, same model: its own messages
    const otherUrls = sharedRouter(b, [0, 0, 0, 0], 'm', [...URLS].reverse()).router;
    const otherModel = sharedRouter(b, [0, 0, 0, 0], 'other').router;
    const listener = sharedRouter(b, [0, 0, 0, 0], 'x').router;
    const probe = sharedRouter(a, [0, 0, 0, 0], 'x').router;
    sender.choose(request('s', 2));
    probe.choose(request('probe', 1)); // published after the first: when it arrives, so has the first
    await until(() => listener.stats().blocksReceived > 0, 'the probe');
    expect(own.stats().blocksReceived).toBe(0);
    expect(otherUrls.stats().blocksReceived).toBe(0);
    expect(otherModel.stats().blocksReceived).toBe(0);
  });

  it('drops malformed messages whole, without throwing, and goes on with the next good one', async () => {
    const channel = `test-${randomUUID()}:routing:prefix-index`;
    const b = await share(channel);
    const { router } = sharedRouter(b, [0, 0, 0, 0]);
    const raw = connection();
    const key = shareKey('m', URLS);
    const bad = [
      'not json',
      '[]',
      '{"from":1,"models":{}}',
      '{"from":"x","models":[]}',
      `{"from":"x","models":{"${key}":"no"}}`,
      `{"from":"x","models":{"${key}":[[0]]}}`,
      `{"from":"x","models":{"${key}":[[0,-1]]}}`,
      `{"from":"x","models":{"${key}":[[0,1.5]]}}`,
      `{"from":"x","models":{"${key}":[[0,"1"]]}}`,
      `{"from":"x","models":{"${key}":[[0,9007199254740993]]}}`,
      `{"from":"x","models":{"${key}":[["0",1]]}}`,
      `{"from":"x","models":{"${key}":[[0,${'1,'.repeat(600_000)}1]]}}`,
      '{"__proto__":{"polluted":true},"from":"x","models":{}}',
    ];
    for (const message of bad) await raw.publish(channel, message);
    // Out of range: a replica the model does not have (applied as nothing).
    const hashes = promptBlockHashes(request('told', 2).messages, 16, 128);
    await raw.publish(channel, JSON.stringify({ from: 'x', models: { [key]: [[7, ...hashes]] } }));
    await raw.publish(channel, JSON.stringify({ from: 'x', models: { [key]: [[2, ...hashes]] } }));
    await until(() => router.stats().blocksReceived === hashes.length, 'the good record');
    expect(b.stats().rejected).toBeGreaterThanOrEqual(bad.length - 1);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    // What it was told decides: the prompt goes to replica 2, as a hit.
    expect(router.choose(request('told', 2))).toBe(2);
    expect(router.stats().decisions.prefix_hit).toBe(1);
  });

  it('while Redis is away drops what it would publish instead of queueing it, and the routing goes on', async () => {
    const publisher = new Redis('redis://127.0.0.1:1', { lazyConnect: true, maxRetriesPerRequest: 0 });
    connections.push(publisher);
    const subscriber = connection();
    const lonely = new PrefixIndexShare(publisher, subscriber, `test-${randomUUID()}:routing:prefix-index`);
    shares.push(lonely);
    const { router } = sharedRouter(lonely, [0, 0, 0, 0]);
    for (let i = 0; i < 50; i++) router.choose(request(`down-${i}`, 2));
    await new Promise((resolve) => setTimeout(resolve, 60));
    const stats = lonely.stats();
    expect(stats.sent).toBe(0);
    expect(stats.dropped).toBe(router.stats().blocksShared);
    expect(publisher.status).toBe('wait');
    publisher.disconnect();
  });
});
