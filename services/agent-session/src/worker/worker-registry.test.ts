import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { claimExpiredLeases, hasTurnLease, readWorkerStats, WorkerRegistration } from './worker-registry';

const prefix = `test-${randomUUID()}:`;
const redis = new Redis('redis://127.0.0.1:6379');

afterAll(async () => {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('sums live workers, counts unexpired leases, and forgets workers whose heartbeat expired', async () => {
  const a = new WorkerRegistration({
    redis,
    prefix,
    workerId: 'a',
    concurrency: 4,
    ttlMs: 10_000,
  });
  const b = new WorkerRegistration({
    redis,
    prefix,
    workerId: 'b',
    concurrency: 2,
    ttlMs: 150,
  });
  await a.heartbeat();
  await b.heartbeat();
  await a.acquireLease('s1', 't1', '{}');
  await a.acquireLease('s2', 't2', '{}');
  expect(await readWorkerStats(redis, prefix)).toEqual({
    maxWorkers: 6,
    runningWorkers: 2,
  });

  await a.releaseLease('s2', 't2');
  await sleep(250);
  expect(await readWorkerStats(redis, prefix)).toEqual({
    maxWorkers: 4,
    runningWorkers: 1,
  });

  await a.deregister();
  expect(await readWorkerStats(redis, prefix)).toEqual({
    maxWorkers: 0,
    runningWorkers: 1,
  });
  expect(await a.releaseLease('s1', 't1')).toBe(true);
});

test('an expired lease is claimed exactly once, with its job, and heartbeats keep a lease alive', async () => {
  const w = new WorkerRegistration({
    redis,
    prefix,
    workerId: 'c',
    concurrency: 1,
    ttlMs: 400,
  });
  await w.acquireLease('s3', 't3', '{"x":1}');
  await w.acquireLease('s4', 't4', '{"x":2}');
  await sleep(250);
  await w.releaseLease('s4', 't4');
  await w.acquireLease('s4', 't4', '{"x":2}');
  await w.heartbeat();
  await sleep(250);
  expect(await claimExpiredLeases(redis, prefix)).toEqual([]);

  const dead = new WorkerRegistration({
    redis,
    prefix,
    workerId: 'd',
    concurrency: 1,
    ttlMs: 50,
  });
  await dead.acquireLease('s5', 't5', '{"x":3}');
  await sleep(80);
  const [first, second] = await Promise.all([claimExpiredLeases(redis, prefix), claimExpiredLeases(redis, prefix)]);
  expect([...(first ?? []), ...(second ?? [])]).toEqual([{ sessionId: 's5', turnId: 't5', jobJson: '{"x":3}' }]);
  expect(await hasTurnLease(redis, prefix, 's5', 't5')).toBe(false);
  expect(await hasTurnLease(redis, prefix, 's4', 't4')).toBe(true);
  expect(await dead.releaseLease('s5', 't5')).toBe(false);
});
