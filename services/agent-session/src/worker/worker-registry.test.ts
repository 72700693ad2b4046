import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { sessionKeys } from '../store/session-keys';
import { leaseMember, readWorkerStats, WorkerRegistration } from './worker-registry';

const prefix = `test-${randomUUID()}:`;
const redis = new Redis('redis://127.0.0.1:6379');
const keys = sessionKeys(prefix);

afterAll(async () => {
  const found = await redis.keys(`${prefix}*`);
  if (found.length > 0) await redis.del(...found);
  await redis.quit();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A lease as the scheduler's claim takes it, expiring `ms` from now on the Redis clock. */
async function lease(sessionId: string, turnId: string, ms: number): Promise<void> {
  const [seconds, micros] = await redis.time();
  await redis.zadd(
    keys.leases,
    Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) + ms,
    leaseMember(sessionId, turnId, 'o'),
  );
}

test('sums live workers, counts unexpired leases, and forgets workers whose heartbeat expired', async () => {
  const a = new WorkerRegistration({ redis, prefix, workerId: 'a', concurrency: 4, ttlMs: 10_000 });
  const b = new WorkerRegistration({ redis, prefix, workerId: 'b', concurrency: 2, ttlMs: 150 });
  await a.heartbeat();
  await b.heartbeat();
  await lease('s1', 't1', 10_000);
  await lease('s2', 't2', 100);
  expect(await readWorkerStats(redis, prefix)).toEqual({ maxWorkers: 6, runningWorkers: 2 });

  await sleep(250);
  expect(await readWorkerStats(redis, prefix)).toEqual({ maxWorkers: 4, runningWorkers: 1 });

  await a.deregister();
  expect(await readWorkerStats(redis, prefix)).toEqual({ maxWorkers: 0, runningWorkers: 1 });
});

test('a heartbeat keeps the leases it holds alive, and only those', async () => {
  const w = new WorkerRegistration({ redis, prefix, workerId: 'c', concurrency: 2, ttlMs: 300 });
  await redis.hset(keys.session('s3'), 'status', 'running');
  await lease('s3', 't3', 300);
  await lease('s4', 't4', 300);
  w.hold('s3', 't3', 'o');
  w.hold('s4', 't4', 'o');
  w.forget('s4', 't4', 'o');
  const expiry = async (member: string) => Number(await redis.zscore(keys.leases, member));
  const [s3, s4] = [leaseMember('s3', 't3', 'o'), leaseMember('s4', 't4', 'o')];
  const [s3Before, s4Before] = [await expiry(s3), await expiry(s4)];
  await sleep(200);
  expect(await w.heartbeat()).toEqual([]);
  expect(await expiry(s3)).toBeGreaterThan(s3Before + 150);
  expect(await expiry(s4)).toBe(s4Before);
});
