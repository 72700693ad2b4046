import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { readOrganizationTurns, sessionSchedulerKeys } from './organization-turns';
import { countSocketWrites, deleteKeysWithPrefix } from './test-redis';

const prefix = `test-${randomUUID()}:`;
const redis = new Redis('redis://127.0.0.1:6379');

afterAll(async () => {
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
});

describe('sessionSchedulerKeys', () => {
  it("names the session store's organization set and the scheduler's hash, under the {sessions} tag", () => {
    const keys = sessionSchedulerKeys('tollway:');
    expect(keys.sessions('org_1')).toBe('tollway:{sessions}:org:org_1');
    expect(keys.scheduler('org_1')).toBe('tollway:{sessions}:sched:org_1');
  });
});

describe('readOrganizationTurns', () => {
  const keys = sessionSchedulerKeys(prefix);

  it('reads sessions held (ZCARD) and turns running and waiting (the hash) as the session service writes them', async () => {
    await redis.zadd(keys.sessions('busy'), 1, 's1', 2, 's2', 3, 's3');
    await redis.hset(keys.scheduler('busy'), { running: '2', waiting: '41' });
    // Another organization's keys are not counted.
    await redis.zadd(keys.sessions('other'), 1, 's9');
    await redis.hset(keys.scheduler('other'), { running: '7', waiting: '7' });
    expect(await readOrganizationTurns(redis, prefix, 'busy')).toEqual({ sessions: 3, running: 2, waiting: 41 });
  });

  it('reads absent keys and fields as 0, and a count that is not an integer as 0', async () => {
    expect(await readOrganizationTurns(redis, prefix, 'idle')).toEqual({ sessions: 0, running: 0, waiting: 0 });
    await redis.hset(keys.scheduler('half'), { waiting: '3' });
    expect(await readOrganizationTurns(redis, prefix, 'half')).toEqual({ sessions: 0, running: 0, waiting: 3 });
    await redis.hset(keys.scheduler('garbled'), { running: 'lots', waiting: '1.5' });
    expect(await readOrganizationTurns(redis, prefix, 'garbled')).toEqual({ sessions: 0, running: 0, waiting: 0 });
  });

  it('takes one round trip', async () => {
    const client = redis.duplicate();
    try {
      await client.ping();
      const writes = countSocketWrites(client);
      await readOrganizationTurns(client, prefix, 'busy');
      expect(writes()).toBe(1);
    } finally {
      client.disconnect();
    }
  });
});
