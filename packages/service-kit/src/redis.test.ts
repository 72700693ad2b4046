import { Redis } from 'ioredis';
import { createRedis } from './redis';
import { startTcpLink, type TcpLink } from './testing';

/**
 * What a client does with a command whose answer a broken connection lost. Redis ran it; sent
 * again after the reconnect, it would run twice. The link between client and Redis loses the
 * answer, then breaks.
 */
const REDIS_PORT = 6379;
const key = `service-kit:redis-test:${process.pid}`;
let link: TcpLink;
let direct: Redis;

beforeAll(async () => {
  link = await startTcpLink(REDIS_PORT);
  direct = new Redis(REDIS_PORT, '127.0.0.1');
});

afterAll(async () => {
  await direct.del(key);
  direct.disconnect();
  await link.close();
});

beforeEach(async () => {
  await direct.del(key);
});

async function ready(redis: Redis): Promise<void> {
  if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
}

/** INCRs through the link, loses the answer, breaks the link; resolves with the command's outcome. */
async function incrAcrossABreak(redis: Redis): Promise<PromiseSettledResult<number>> {
  await ready(redis);
  link.dropReplies();
  const incr = redis.incr(key);
  const outcome = Promise.allSettled([incr]).then(([settled]) => settled!);
  // Redis has run it once its count moved; then the connection breaks.
  for (let i = 0; i < 500 && (await direct.get(key)) !== '1'; i += 1) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  expect(await direct.get(key)).toBe('1');
  link.cut();
  return outcome;
}

test('a fail-fast client never sends a command again after a reconnect: it fails, and Redis ran it once', async () => {
  const redis = createRedis(`redis://127.0.0.1:${link.port}`, {
    name: 'resend-test',
    failFast: true,
    commandTimeoutMs: 400,
  });
  try {
    const outcome = await incrAcrossABreak(redis);
    expect(outcome.status).toBe('rejected');
    await ready(redis);
    // The reconnected client works, and nothing ran twice.
    expect(await redis.incr(`${key}:other`)).toBe(1);
    await redis.del(`${key}:other`);
    expect(await direct.get(key)).toBe('1');
  } finally {
    redis.disconnect();
  }
});

test('its duplicates do not send again either', async () => {
  const parent = createRedis(`redis://127.0.0.1:${link.port}`, { name: 'resend-test', failFast: true });
  const redis = parent.duplicate({ commandTimeout: 400 });
  try {
    const outcome = await incrAcrossABreak(redis);
    expect(outcome.status).toBe('rejected');
    await ready(redis);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await direct.get(key)).toBe('1');
  } finally {
    redis.disconnect();
    parent.disconnect();
  }
});

test('an ordinary client (BullMQ waits on reconnects) still sends it again', async () => {
  // The contrast that shows the link really loses an answer ioredis would otherwise recover.
  const redis = createRedis(`redis://127.0.0.1:${link.port}`, { name: 'resend-test', maxRetriesPerRequest: null });
  try {
    const outcome = await incrAcrossABreak(redis);
    expect(outcome).toEqual({ status: 'fulfilled', value: 2 });
    expect(await direct.get(key)).toBe('2');
  } finally {
    redis.disconnect();
  }
});

test('a fail-fast client whose connection went silent, TCP still up, connects again after a few reply timeouts', async () => {
  const redis = createRedis(`redis://127.0.0.1:${link.port}`, {
    name: 'silent-test',
    failFast: true,
    commandTimeoutMs: 200,
  });
  try {
    await ready(redis);
    const before = link.connections();
    link.silence();
    const outcomes = await Promise.allSettled([redis.get(key), redis.get(key), redis.get(key)]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['rejected', 'rejected', 'rejected']);
    // A new connection, which answers.
    let pong: string | null = null;
    for (let i = 0; i < 100 && pong === null; i++) {
      pong = await redis.ping().catch(() => null);
      if (pong === null) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(pong).toBe('PONG');
    expect(link.connections()).toBeGreaterThan(before);
  } finally {
    redis.disconnect();
  }
});
