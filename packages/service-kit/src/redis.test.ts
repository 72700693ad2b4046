import { createConnection, createServer } from 'node:net';
import { Redis } from 'ioredis';
import { createRedis } from './redis';
import { freePort, startTcpLink, type TcpLink } from './testing';

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

/** Polls until `redis` is ready (5 s at most); its status then. */
async function readyAgain(redis: Redis): Promise<string> {
  for (let i = 0; i < 100 && redis.status !== 'ready'; i++) await new Promise((resolve) => setTimeout(resolve, 50));
  return redis.status;
}

/**
 * What ioredis's Sentinel failover detector does when the sentinels announce a new primary while
 * the client, its connection broken by the failover, is connecting again: it tells the connector to
 * disconnect mid-connection, and ioredis gives the client up (status `end`). Here the same call,
 * made when the reconnection starts; resolves once the client is given up.
 */
async function giveUp(redis: Redis): Promise<void> {
  const ended = new Promise((resolve) => redis.once('end', resolve));
  const connector = (redis as unknown as { connector: { disconnect(): void } }).connector;
  redis.once('connecting', () => connector.disconnect());
  redis.disconnect(true);
  await ended;
}

/** Gives `redis` up as the race does, then expects it ready again and answering. */
async function givenUpThenBack(redis: Redis): Promise<void> {
  await ready(redis);
  await giveUp(redis);
  expect(await readyAgain(redis)).toBe('ready');
  expect(await redis.ping()).toBe('PONG');
}

test.each([
  ['a fail-fast client', { failFast: true }],
  ['an ordinary client', {}],
])('%s that ioredis gave up while it was connecting again connects again by itself', async (_, options) => {
  // The race leaves ioredis a timer to destroy the broken stream, of `disconnectTimeout`.
  const redis = createRedis(`redis://127.0.0.1:${REDIS_PORT}`, {
    name: 'given-up-test',
    extra: { disconnectTimeout: 50 },
    ...options,
  });
  redis.on('error', () => undefined);
  const copy = redis.duplicate();
  copy.on('error', () => undefined);
  try {
    await givenUpThenBack(redis);
    // Its duplicates too.
    await givenUpThenBack(copy);
  } finally {
    copy.disconnect();
    redis.disconnect();
  }
});

test('a subscriber ioredis gave up is subscribed again once it connects again', async () => {
  const subscriber = createRedis(`redis://127.0.0.1:${REDIS_PORT}`, {
    name: 'given-up-test',
    maxRetriesPerRequest: null,
    extra: { disconnectTimeout: 50 },
  });
  subscriber.on('error', () => undefined);
  const channel = `${key}:channel`;
  const received: string[] = [];
  subscriber.on('message', (_channel: string, message: string) => received.push(message));
  try {
    await subscriber.subscribe(channel);
    await giveUp(subscriber);
    expect(await readyAgain(subscriber)).toBe('ready');
    // Subscribed again (ioredis does it on ready): a message published now arrives.
    for (let i = 0; i < 100 && received.length === 0; i++) {
      await direct.publish(channel, 'after');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(received[0]).toBe('after');
  } finally {
    subscriber.disconnect();
  }
});

test('a client the program closed stays closed', async () => {
  const quitted = createRedis(`redis://127.0.0.1:${REDIS_PORT}`, { name: 'given-up-test', failFast: true });
  const disconnected = createRedis(`redis://127.0.0.1:${REDIS_PORT}`, { name: 'given-up-test' });
  await Promise.all([ready(quitted), ready(disconnected)]);
  await quitted.quit();
  disconnected.disconnect();
  await new Promise((resolve) => setTimeout(resolve, 800));
  expect([quitted.status, disconnected.status]).toEqual(['end', 'end']);
  // Opened again by the program, it is looked after again.
  const reopened = createRedis(`redis://127.0.0.1:${REDIS_PORT}`, {
    name: 'given-up-test',
    extra: { disconnectTimeout: 50 },
  });
  reopened.on('error', () => undefined);
  try {
    await ready(reopened);
    const closed = new Promise((resolve) => reopened.once('end', resolve));
    reopened.disconnect();
    await closed;
    await reopened.connect();
    await givenUpThenBack(reopened);
  } finally {
    reopened.disconnect();
  }
});

test("a connection's errors go to the service's log, each at most once in 5 s, and its return too", async () => {
  const lines: Array<{ level: string; message: string; meta: Record<string, unknown> }> = [];
  const logger = {
    warn: (message: string, meta: Record<string, unknown>) => lines.push({ level: 'warn', message, meta }),
    info: (message: string, meta: Record<string, unknown>) => lines.push({ level: 'info', message, meta }),
  } as unknown as Parameters<typeof createRedis>[1]['logger'];
  // Nothing listens on the port at first: every try is refused.
  const port = await freePort();
  const redis = createRedis(`redis://127.0.0.1:${port}`, { name: 'logged-test', logger });
  let refusals = 0;
  redis.on('error', () => (refusals += 1));
  const server = createServer((socket) => {
    const upstream = createConnection(REDIS_PORT, '127.0.0.1');
    socket.pipe(upstream).pipe(socket);
    socket.on('error', () => upstream.destroy());
    upstream.on('error', () => socket.destroy());
  });
  try {
    for (let i = 0; i < 100 && refusals < 3; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(refusals).toBeGreaterThanOrEqual(3);
    expect(lines).toEqual([
      {
        level: 'warn',
        message: 'redis connection error',
        meta: { redis_connection: 'logged-test', err: expect.stringContaining('ECONNREFUSED') },
      },
    ]);
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    await ready(redis);
    expect(lines.at(-1)).toEqual({
      level: 'info',
      message: 'redis connection ready again',
      meta: { redis_connection: 'logged-test' },
    });
    expect(lines).toHaveLength(2);
  } finally {
    redis.disconnect();
    server.close();
  }
});
