import type { Redis } from 'ioredis';
import {
  confirmReplicated,
  createRedis,
  isRedisUnavailable,
  REDIS_COMMAND_TIMEOUT_MS,
  REPLICA_SHORTFALL_HOLD_MS,
  ReplicationShortfallError,
} from '@tollway/service-kit';
import { startRedisSentinelGroup, type RedisSentinelGroup } from '@tollway/service-kit/testing';

/**
 * The factory's clients through Sentinel: a primary with an ACL user (its default user off), one
 * replica, three sentinels with a password of their own. A client finds the primary, fails fast
 * (never hangs) while it is gone, and serves again from the replica the sentinels promote.
 */
let group: RedisSentinelGroup;
const clients: Redis[] = [];
const key = `sentinel-test:${process.pid}`;

function client(options: Parameters<typeof createRedis>[1]): Redis {
  const redis = createRedis(group.connection, options);
  redis.on('error', () => undefined);
  clients.push(redis);
  return redis;
}

async function ready(redis: Redis): Promise<void> {
  if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
}

beforeAll(async () => {
  group = await startRedisSentinelGroup({
    user: { name: 'tollway', password: 'p@ss:w/rd#1' },
    sentinelPassword: 'watch-word',
  });
}, 30_000);

afterAll(async () => {
  for (const redis of clients) redis.disconnect();
  await group.stop();
});

test('a client finds the primary through the sentinels, as the ACL user of REDIS_URL', async () => {
  const redis = client({ name: 'sentinel-test', failFast: true });
  await ready(redis);
  expect(await redis.acl('WHOAMI')).toBe('tollway');
  expect(await redis.set(key, 'before')).toBe('OK');
  const info = await redis.info('replication');
  expect(info).toMatch(/^role:master/m);
  expect(`${await redis.config('GET', 'port').then((reply) => (reply as string[])[1])}`).toBe(
    String(await group.primaryPort()),
  );
});

test('a write the replicas acknowledged is confirmed; one a stopped replica never saw falls short in time', async () => {
  const redis = client({ name: 'wait-test', failFast: true });
  await ready(redis);
  await redis.incr(`${key}:wait`);
  await confirmReplicated(redis, { replicas: 1, timeoutMs: 400 });
  const primary = await group.primaryPort();
  const replica = [...group.nodes.values()].find((node) => node.port !== primary)!;
  replica.pause();
  try {
    await redis.incr(`${key}:wait`);
    const started = performance.now();
    const outcome = await confirmReplicated(redis, { replicas: 1, timeoutMs: 200 }).catch((err: unknown) => err);
    expect(outcome).toBeInstanceOf(ReplicationShortfallError);
    expect(isRedisUnavailable(outcome)).toBe(true);
    expect(performance.now() - started).toBeLessThan(REDIS_COMMAND_TIMEOUT_MS);
    // The next wait on that connection fails at once: writes behind it need not queue up.
    const next = performance.now();
    const held = await confirmReplicated(redis, { replicas: 1, timeoutMs: 200 }).catch((err: unknown) => err);
    expect(held).toMatchObject({ held: true });
    expect(performance.now() - next).toBeLessThan(100);
  } finally {
    replica.resume();
  }
  // A second later it waits again, and the replica, back, holds the write.
  await new Promise((resolve) => setTimeout(resolve, REPLICA_SHORTFALL_HOLD_MS));
  await confirmReplicated(redis, { replicas: 1, timeoutMs: 2000 });
});

test('after kill -9 of the primary: commands fail fast meanwhile, and the promoted replica serves what was replicated', async () => {
  const redis = client({ name: 'failover-test', failFast: true });
  const subscriber = client({ name: 'failover-subscriber', maxRetriesPerRequest: null });
  await Promise.all([ready(redis), ready(subscriber)]);
  await redis.set(key, 'replicated');
  await confirmReplicated(redis, { replicas: 1, timeoutMs: 1000 });
  const heard: string[] = [];
  await subscriber.subscribe(`${key}:channel`);
  subscriber.on('message', (_channel, message: string) => heard.push(message));

  const killedAt = performance.now();
  const former = await group.killPrimary();
  const slowest = { ms: 0 };
  let servedAt = 0;
  while (servedAt === 0) {
    const started = performance.now();
    try {
      await redis.incr(`${key}:after`);
      servedAt = performance.now();
    } catch (err) {
      expect(isRedisUnavailable(err)).toBe(true);
      slowest.ms = Math.max(slowest.ms, performance.now() - started);
      if (performance.now() - killedAt > 20_000) throw new Error('no primary served within 20 s');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  // Never a hang: each failure came within the reply timeout (and some slack for a loaded machine).
  expect(slowest.ms).toBeLessThan(REDIS_COMMAND_TIMEOUT_MS + 500);
  const promoted = await group.primaryPort();
  expect(promoted).not.toBe(former);
  expect(await redis.get(key)).toBe('replicated');
  // The subscriber found the new primary too, and subscribed again.
  const publisher = client({ name: 'failover-publisher' });
  await ready(publisher);
  for (let i = 0; i < 50 && heard.length === 0; i++) {
    await publisher.publish(`${key}:channel`, 'after the failover');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect(heard[0]).toBe('after the failover');
}, 40_000);
