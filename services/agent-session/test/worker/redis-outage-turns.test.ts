import request from 'supertest';
import { startPrivateRedis, type PrivateRedis } from '@tollway/service-kit/testing';
import { sessionKeys } from '../../src/store/session-keys';
import type { RunningWorker } from '../../src/worker/start-worker';
import { WORKER_LOST_ERROR } from '../../src/worker/turn-reaper';
import { startReplica, testPrefix, type ApiReplica } from '../api/api-harness';
import {
  fixtureAgent,
  sendJson,
  sleep,
  startTestServer,
  startTestWorker,
  waitFor,
  type TestServer,
} from './worker-harness';

/**
 * Redis goes away while a turn runs and comes back long after the turn's lease would have expired:
 * the worker keeps the outcome it has, ends the turn once Redis answers, and the reaper, which
 * waits one lease time after an outage for live workers, leaves the turn to it.
 */
const prefix = testPrefix();
let redis: PrivateRedis;
let api: ApiReplica;
let worker: RunningWorker;
let receiver: TestServer;

beforeAll(async () => {
  redis = await startPrivateRedis();
  api = await startReplica(prefix, { redisUrl: redis.url });
  for (const connection of [api.redis, api.subscriber]) connection.on('error', () => undefined);
  receiver = await startTestServer((_req, res) => sendJson(res, 200, {}));
  worker = await startTestWorker(prefix, {
    REDIS_URL: redis.url,
    AGENT_MODULE: fixtureAgent('slow'),
    WORKER_CONCURRENCY: '1',
    // Short enough that the outage outlasts it many times over; long enough that a loaded
    // machine's pauses do not let it lapse between two heartbeats.
    WORKER_LEASE_TTL_MS: '2000',
    REAPER_INTERVAL_MS: '200',
  });
}, 30_000);

afterAll(async () => {
  await worker.close().catch(() => undefined);
  await receiver.close();
  await api.close().catch(() => undefined);
  await redis.stop();
});

it('a turn that ends during a Redis outage longer than its lease keeps its answer, with one webhook', async () => {
  const id = await sendWithHook('through the outage', 2000, 'hook');
  // The turn is leased (an agent process runs it) before Redis goes.
  await waitFor(async () => (await readLeases()) === 1, 5000);
  await redis.kill();
  // The agent answers after 2 s, while Redis is gone: for 10 s, long enough for the worker's
  // client to give up on the command that ends the turn. The lease (2 s) lapses meanwhile.
  await sleep(10000);
  await redis.restart();
  const done = await request(api.app).get(`/sessions/${id}?wait=true&timeout=15`);
  expect(done.body).toMatchObject({
    status: 'idle',
    response: { role: 'assistant', content: 'done: through the outage' },
    error: null,
  });
  await waitFor(() => receiver.received.length > 0, 5000);
  await sleep(1500); // a second (false) webhook would come within the reaper's passes
  expect(receiver.received.map((delivery) => (delivery.json as { status?: string }).status)).toEqual(['idle']);
}, 40_000);

async function readLeases(): Promise<number> {
  return api.redis.zcard(sessionKeys(prefix).leases).catch(() => 0);
}

/** A new session sent `content` (its agent takes `delayMs`), whose webhook goes to `/<hook>`; its id. */
async function sendWithHook(content: string, delayMs: number, hook: string): Promise<string> {
  const id = (await request(api.app).post('/sessions').send({})).body.session_id as string;
  const sent = await request(api.app)
    .post(`/sessions/${id}/messages`)
    .send({ content, user_params: { delay_ms: delayMs }, webhook: { url: `${receiver.url}/${hook}` } });
  expect(sent.status).toBe(202);
  return id;
}

/** Ends the turn `id` runs as a reaper would, wherever it stands. */
async function endAsReaper(id: string): Promise<void> {
  const turnId = (await api.store.get(id, null))?.turnId ?? '';
  const error = { kind: 'error' as const, error: WORKER_LOST_ERROR };
  expect(await api.store.finishTurn(id, turnId, error, { endedBy: 'reaper' })).toBe('applied');
}

it('a waiting turn ended by another than a worker leaves the queue: not run, and no second webhook', async () => {
  await worker.close();
  const id = await sendWithHook('reaped while queued', 10, 'late');
  await endAsReaper(id);
  worker = await startTestWorker(prefix, { REDIS_URL: redis.url, AGENT_MODULE: fixtureAgent('slow') });
  await waitFor(async () => (await queueCounts()).waiting === 0, 5000);
  await sleep(1000);
  expect(receiver.received.filter((delivery) => delivery.url === '/late')).toEqual([]);
  expect((await request(api.app).get(`/sessions/${id}`)).body).toMatchObject({
    status: 'error',
    error: WORKER_LOST_ERROR,
  });
  expect((await request(api.app).get(`/sessions/${id}/messages`)).body).toHaveLength(1);
}, 30_000);

it('a worker of one agent process claims nothing ahead: a second turn waits in the queue, not leased, while the first runs', async () => {
  await worker.close();
  worker = await startTestWorker(prefix, {
    REDIS_URL: redis.url,
    AGENT_MODULE: fixtureAgent('slow'),
    WORKER_CONCURRENCY: '1',
  });
  const ids = await Promise.all(
    [0, 1].map(async () => (await request(api.app).post('/sessions').send({})).body.session_id as string),
  );
  const send = (id: string, hook: string) =>
    request(api.app)
      .post(`/sessions/${id}/messages`)
      .send({ content: hook, user_params: { delay_ms: 1500 }, webhook: { url: `${receiver.url}/${hook}` } });
  expect((await send(ids[0]!, 'first')).status).toBe(202);
  await waitFor(async () => (await readLeases()) === 1, 5000);
  expect((await send(ids[1]!, 'second')).status).toBe(202);
  await sleep(300);
  expect(await api.scheduler.counts()).toEqual({ waiting: 1, active: 1 });
  // The second runs once the first ends, on the same process.
  await waitFor(() => receiver.received.some((delivery) => delivery.url === '/second'), 10_000);
  expect(
    receiver.received.filter((delivery) => ['/first', '/second'].includes(delivery.url)).map((d) => d.url),
  ).toEqual(['/first', '/second']);
}, 30_000);

it('a leased turn a reaper ended (it checked for a lease just before the worker took one) gets no false "session deleted" webhook', async () => {
  const id = await sendWithHook('raced', 1000, 'raced');
  await waitFor(async () => (await readLeases()) === 1, 5000);
  await endAsReaper(id);
  await waitFor(async () => (await readLeases()) === 0 && (await api.scheduler.counts()).active === 0, 5000);
  await sleep(500);
  expect(receiver.received.filter((delivery) => delivery.url === '/raced')).toEqual([]);
}, 30_000);

it('a waiting turn ended by another than a worker, whose session was then deleted, sends no second webhook', async () => {
  await worker.close();
  const id = await sendWithHook('queued', 10, 'queued-deleted');
  await endAsReaper(id);
  expect((await request(api.app).delete(`/sessions/${id}`)).status).toBe(204);
  worker = await startTestWorker(prefix, { REDIS_URL: redis.url, AGENT_MODULE: fixtureAgent('slow') });
  await waitFor(async () => (await queueCounts()).waiting === 0, 5000);
  await sleep(1000);
  expect(receiver.received.filter((delivery) => delivery.url === '/queued-deleted')).toEqual([]);
}, 30_000);

async function queueCounts(): Promise<{ waiting: number }> {
  return api.scheduler.counts();
}
