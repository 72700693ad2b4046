import { Queue } from 'bullmq';
import request from 'supertest';
import { AGENT_TURN_QUEUE } from '@tollway/contracts';
import { startPrivateRedis, type PrivateRedis } from '@tollway/service-kit/testing';
import { turnQueuePrefix } from '../../src/store/turn-queue';
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
let queue: Queue;

beforeAll(async () => {
  redis = await startPrivateRedis();
  api = await startReplica(prefix, { redisUrl: redis.url });
  for (const connection of [api.redis, api.subscriber]) connection.on('error', () => undefined);
  queue = new Queue(AGENT_TURN_QUEUE, { connection: api.redis, prefix: turnQueuePrefix(prefix) });
  receiver = await startTestServer((_req, res) => sendJson(res, 200, {}));
  worker = await startTestWorker(prefix, {
    REDIS_URL: redis.url,
    AGENT_MODULE: fixtureAgent('slow'),
    WORKER_CONCURRENCY: '1',
    WORKER_LEASE_TTL_MS: '1000',
    REAPER_INTERVAL_MS: '200',
  });
}, 30_000);

afterAll(async () => {
  await queue.close().catch(() => undefined);
  await worker.close().catch(() => undefined);
  await receiver.close();
  await api.close().catch(() => undefined);
  await redis.stop();
});

it('a turn that ends during a Redis outage longer than its lease keeps its answer, with one webhook', async () => {
  const id = (await request(api.app).post('/sessions').send({})).body.session_id as string;
  const sent = await request(api.app)
    .post(`/sessions/${id}/messages`)
    .send({ content: 'through the outage', user_params: { delay_ms: 2000 }, webhook: { url: `${receiver.url}/hook` } });
  expect(sent.status).toBe(202);
  // The turn is leased (an agent process runs it) before Redis goes.
  await waitFor(async () => (await readLeases()) === 1, 5000);
  await redis.kill();
  // The agent answers after 2 s, while Redis is gone: for 10 s, long enough for the worker's
  // client to give up on the command that ends the turn. The lease (1 s) lapses meanwhile.
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
  return api.redis.zcard(`${prefix}{workers}:leases`).catch(() => 0);
}

it('a job whose turn a reaper ended while it waited is dropped: not run, and no second webhook', async () => {
  await worker.close();
  const id = (await request(api.app).post('/sessions').send({})).body.session_id as string;
  const sent = await request(api.app)
    .post(`/sessions/${id}/messages`)
    .send({ content: 'reaped while queued', user_params: { delay_ms: 10 }, webhook: { url: `${receiver.url}/late` } });
  expect(sent.status).toBe(202);
  // As a reaper does when the worker that fetched the job seems gone (paused, partitioned).
  const turn = (await api.store.listRunningTurns()).find((running) => running.sessionId === id)!;
  expect(await api.store.finishTurn(id, turn.turnId, { kind: 'error', error: WORKER_LOST_ERROR }, 'reaper')).toBe(
    'applied',
  );
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

it('a fetched job whose turn a reaper ended while it waited for an agent process is dropped: not run, no false "session deleted" webhook', async () => {
  const { waitingId, turnId } = await reapFetchedBehindBusy('busy', 'fetched');
  await waitFor(() => receiver.received.some((delivery) => delivery.url === '/busy'), 10_000);
  // Not run: its job ends (completed, so removed) well before its agent's 20 s would.
  await waitFor(async () => (await queue.getJobState(turnId)) === 'unknown', 10_000);
  await sleep(500);
  expect(receiver.received.filter((delivery) => delivery.url === '/fetched')).toEqual([]);
  expect((await request(api.app).get(`/sessions/${waitingId}`)).body).toMatchObject({
    status: 'error',
    error: WORKER_LOST_ERROR,
  });
}, 45_000);

it('a leased turn a reaper ended (it checked for a lease just before the worker took one) gets no false "session deleted" webhook', async () => {
  const id = (await request(api.app).post('/sessions').send({})).body.session_id as string;
  const sent = await request(api.app)
    .post(`/sessions/${id}/messages`)
    .send({ content: 'raced', user_params: { delay_ms: 1000 }, webhook: { url: `${receiver.url}/raced` } });
  expect(sent.status).toBe(202);
  await waitFor(async () => (await readLeases()) === 1, 5000);
  const turn = (await api.store.listRunningTurns()).find((running) => running.sessionId === id)!;
  expect(await api.store.finishTurn(id, turn.turnId, { kind: 'error', error: WORKER_LOST_ERROR }, 'reaper')).toBe(
    'applied',
  );
  await waitFor(async () => (await readLeases()) === 0 && (await api.turnQueue.counts()).active === 0, 5000);
  await sleep(500);
  expect(receiver.received.filter((delivery) => delivery.url === '/raced')).toEqual([]);
}, 30_000);

it('a fetched job whose turn a reaper ended and whose session was then deleted sends no second webhook', async () => {
  // A reaper ends the turn (and sends its one webhook); the client then deletes the session.
  const { waitingId, turnId } = await reapFetchedBehindBusy('busy-2', 'reaped-deleted');
  expect((await request(api.app).delete(`/sessions/${waitingId}`)).status).toBe(204);
  await waitFor(() => receiver.received.some((delivery) => delivery.url === '/busy-2'), 10_000);
  await waitFor(async () => (await queue.getJobState(turnId)) === 'unknown', 10_000);
  await sleep(500);
  expect(receiver.received.filter((delivery) => delivery.url === '/reaped-deleted')).toEqual([]);
}, 45_000);

it('a queued job whose turn a reaper ended and whose session was then deleted sends no second webhook', async () => {
  await worker.close();
  const id = (await request(api.app).post('/sessions').send({})).body.session_id as string;
  const sent = await request(api.app)
    .post(`/sessions/${id}/messages`)
    .send({ content: 'queued', user_params: { delay_ms: 10 }, webhook: { url: `${receiver.url}/queued-deleted` } });
  expect(sent.status).toBe(202);
  const turn = (await api.store.listRunningTurns()).find((running) => running.sessionId === id)!;
  expect(await api.store.finishTurn(id, turn.turnId, { kind: 'error', error: WORKER_LOST_ERROR }, 'reaper')).toBe(
    'applied',
  );
  expect((await request(api.app).delete(`/sessions/${id}`)).status).toBe(204);
  worker = await startTestWorker(prefix, { REDIS_URL: redis.url, AGENT_MODULE: fixtureAgent('slow') });
  await waitFor(async () => (await queueCounts()).waiting === 0, 5000);
  await sleep(1000);
  expect(receiver.received.filter((delivery) => delivery.url === '/queued-deleted')).toEqual([]);
}, 30_000);

/**
 * On a worker of one agent process, a turn of 6 s runs while a second (of 20 s) is fetched ahead
 * and waits for the process, its context read; a reaper then ends the waiting turn, as it does
 * when the worker that fetched the job seems gone (paused, partitioned). Each turn's webhook goes
 * to `/<hook>` of the receiver.
 */
async function reapFetchedBehindBusy(
  busyHook: string,
  waitingHook: string,
): Promise<{ waitingId: string; turnId: string }> {
  await worker.close();
  worker = await startTestWorker(prefix, {
    REDIS_URL: redis.url,
    AGENT_MODULE: fixtureAgent('slow'),
    WORKER_CONCURRENCY: '1',
  });
  const [busy, waiting] = [0, 1].map(() => request(api.app).post('/sessions').send({}));
  const busyId = (await busy!).body.session_id as string;
  const waitingId = (await waiting!).body.session_id as string;
  const send = (id: string, delayMs: number, hook: string) =>
    request(api.app)
      .post(`/sessions/${id}/messages`)
      .send({ content: hook, user_params: { delay_ms: delayMs }, webhook: { url: `${receiver.url}/${hook}` } });
  // Long enough that the reaper below ends the second turn while it still waits, on a loaded machine too.
  expect((await send(busyId, 6000, busyHook)).status).toBe(202);
  await waitFor(async () => (await readLeases()) === 1, 5000);
  expect((await send(waitingId, 20_000, waitingHook)).status).toBe(202);
  await waitFor(async () => (await api.turnQueue.counts()).active === 2, 5000);
  const turn = (await api.store.listRunningTurns()).find((running) => running.sessionId === waitingId)!;
  expect(
    await api.store.finishTurn(waitingId, turn.turnId, { kind: 'error', error: WORKER_LOST_ERROR }, 'reaper'),
  ).toBe('applied');
  return { waitingId, turnId: turn.turnId };
}

async function queueCounts(): Promise<{ waiting: number }> {
  return api.turnQueue.counts();
}
