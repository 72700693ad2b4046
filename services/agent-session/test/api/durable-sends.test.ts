import type { Redis } from 'ioredis';
import request from 'supertest';
import { createLogger, createRedis } from '@tollway/service-kit';
import { startRedisSentinelGroup, type RedisSentinelGroup } from '@tollway/service-kit/testing';
import { buildApp } from '../../src/app';
import { UNCONFIRMED_ERROR } from '../../src/api/messages.route';
import { SessionEventHub } from '../../src/store/session-event-hub';
import { SessionStore } from '../../src/store/session-store';
import { OrganizationLimits } from '../../src/store/organization-limits';
import { readWorkerStats } from '../../src/worker/worker-registry';

/**
 * REDIS_WAIT_REPLICAS: a 202 is sent only once a replica holds the turn, so a failover cannot
 * take back a message the client was told was accepted. A replica that does not acknowledge in
 * time turns the send into a 503 that leaves the session saying so; the wait holds a connection
 * of the sends alone, so nothing else waits behind it. The API reaches Redis through Sentinel.
 */
const prefix = 'durable-sends:';
const WAIT_TIMEOUT_MS = 200;
let group: RedisSentinelGroup;
let connections: Redis[];
let hub: SessionEventHub;
let app: ReturnType<typeof buildApp>;

beforeAll(async () => {
  group = await startRedisSentinelGroup();
  const connect = (name: string, failFast = true) => createRedis(group.connection, { name, failFast });
  const redis = connect('durable-api');
  const sends = connect('durable-sends');
  const subscriber = createRedis(group.connection, { name: 'durable-events', maxRetriesPerRequest: null });
  connections = [redis, sends, subscriber];
  const store = new SessionStore({
    redis,
    prefix,
    durableSends: { redis: sends, wait: { replicas: 1, timeoutMs: WAIT_TIMEOUT_MS } },
  });
  hub = new SessionEventHub(subscriber, prefix);
  await hub.start();
  app = buildApp({
    redis,
    store,
    hub,
    limits: new OrganizationLimits({
      redis,
      prefix,
      defaults: { maxSessions: 0, maxRunningTurns: 0, maxWaitingTurns: 0, weight: 1 },
    }),
    authenticator: null,
    workerStats: () => readWorkerStats(redis, prefix),
    logger: createLogger({ service: 'durable-sends-test', silent: true }),
    maxSessions: 100,
    allowCustomIds: false,
    maxBodyBytes: 1024 * 1024,
  });
}, 30_000);

afterAll(async () => {
  hub.close();
  await Promise.all(connections.map((connection) => connection.quit().catch(() => connection.disconnect())));
  await group.stop();
});

/** The API's command connection. */
function redis0(): Redis {
  return connections[0]!;
}

async function newSession(): Promise<string> {
  const created = await request(app).post('/sessions').send({});
  expect(created.status).toBe(201);
  return created.body.session_id as string;
}

/** The replica's process (the node that is not the primary). */
async function replica() {
  const primary = await group.primaryPort();
  return [...group.nodes.values()].find((node) => node.port !== primary)!;
}

test('a send the replica acknowledged is accepted, 202', async () => {
  const id = await newSession();
  const sent = await request(app).post(`/sessions/${id}/messages`).send({ content: 'hello' });
  expect(sent.status).toBe(202);
  // The replica holds the turn: it is running there, with its message.
  const port = (await replica()).port;
  const onReplica = group.client(port);
  try {
    expect(await onReplica.hget(`${prefix}{sessions}:s:${id}`, 'status')).toBe('running');
  } finally {
    onReplica.disconnect();
  }
});

test('a send no replica acknowledged in time is a 503 to retry, and its session says why; reads do not wait', async () => {
  const id = await newSession();
  const other = await newSession();
  const stopped = await replica();
  stopped.pause();
  try {
    const started = performance.now();
    const [sent, read] = await Promise.all([
      request(app).post(`/sessions/${id}/messages`).send({ content: 'hello' }),
      // Behind the send's wait, on the API's own connection: answered at once.
      new Promise((resolve) => setTimeout(resolve, 50)).then(async () => {
        const readStarted = performance.now();
        const res = await request(app).get(`/sessions/${other}`);
        return { status: res.status, ms: performance.now() - readStarted };
      }),
    ]);
    expect(sent.status).toBe(503);
    expect(sent.body.error).toMatchObject({ code: 'turn_not_queued', type: 'server_error' });
    expect(sent.headers['retry-after']).toBe('1');
    expect(performance.now() - started).toBeGreaterThanOrEqual(WAIT_TIMEOUT_MS);
    expect(read.status).toBe(200);
    expect(read.ms).toBeLessThan(WAIT_TIMEOUT_MS);
    const session = await request(app).get(`/sessions/${id}`);
    expect(session.body).toMatchObject({ status: 'error', error: UNCONFIRMED_ERROR });
    // Ended, it left its queue: no worker will run it.
    const queued = await redis0().lrange(`${prefix}{sessions}:q:`, 0, -1);
    expect(queued.some((entry) => entry.startsWith(`${id}:`))).toBe(false);
    // Right after, sends are refused at once rather than queueing behind waits that cannot succeed.
    const next = performance.now();
    const refused = await request(app).post(`/sessions/${other}/messages`).send({ content: 'hello' });
    expect(refused.status).toBe(503);
    expect(performance.now() - next).toBeLessThan(WAIT_TIMEOUT_MS);
  } finally {
    stopped.resume();
  }
  // The replica is back: sends are accepted again, within a second.
  const deadline = performance.now() + 3000;
  let again = await request(app).post(`/sessions/${id}/messages`).send({ content: 'hello again' });
  while (again.status !== 202 && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    again = await request(app).post(`/sessions/${id}/messages`).send({ content: 'hello again' });
  }
  expect(again.status).toBe(202);
});
