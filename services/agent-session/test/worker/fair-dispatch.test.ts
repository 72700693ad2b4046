import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { Redis } from 'ioredis';
import request from 'supertest';
import { createLogger } from '@tollway/service-kit';
import { sessionKeys } from '../../src/store/session-keys';
import type { RunningWorker } from '../../src/worker/start-worker';
import { startTurnReaper, type RunningReaper } from '../../src/worker/start-reaper';
import { WORKER_LOST_ERROR } from '../../src/worker/turn-reaper';
import { deleteKeys, startAuthedReplica, testPrefix, type ApiReplica, type AuthedReplica } from '../api/api-harness';
import { fixtureAgent, sleep, startTestWorker, testWorkerConfig, waitFor } from './worker-harness';

/**
 * Fair dispatch and the limits on running turns hold cluster-wide: two workers (of two agent
 * processes each) share the organizations' queues; one organization's backlog or cap never holds
 * up another's turn, and a worker killed mid-turn gives its organization's running slot back.
 */
const prefix = testPrefix();
const keys = sessionKeys(prefix);
const workerEnv = { WORKER_CONCURRENCY: '2', WORKER_LEASE_TTL_MS: '1000', REAPER_INTERVAL_MS: '200' };
let authed: AuthedReplica;
let api: ApiReplica;
let redis: Redis;
let workers: RunningWorker[] = [];

beforeAll(async () => {
  authed = await startAuthedReplica(prefix);
  ({ api, redis } = authed);
});

afterEach(async () => {
  await Promise.all(workers.map((worker) => worker.close()));
  workers = [];
});

afterAll(async () => {
  await authed.close();
  await deleteKeys(prefix);
});

async function startWorkers(count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    workers.push(await startTestWorker(prefix, { ...workerEnv, AGENT_MODULE: fixtureAgent('slow') }));
  }
}

/** A new organization (with `fields` in its record: its limits) and a send function for it. */
async function organization(fields: Record<string, string> = {}) {
  const { orgId, auth } = await authed.organization(fields);
  /** Creates a session and sends it one message whose turn takes `delayMs`; its session id. */
  const send = async (delayMs: number): Promise<string> => {
    const id = (await request(api.app).post('/sessions').set('authorization', auth).send({})).body.session_id as string;
    const sent = await request(api.app)
      .post(`/sessions/${id}/messages`)
      .set('authorization', auth)
      .send({ content: 'x', user_params: { delay_ms: delayMs } });
    expect(sent.status).toBe(202);
    return id;
  };
  const status = async (id: string): Promise<string> =>
    (await request(api.app).get(`/sessions/${id}`).set('authorization', auth)).body.status as string;
  return { orgId, auth, send, status };
}

/** Turns of `orgId` executing now, cluster-wide (their leases). */
async function executing(orgId: string): Promise<number> {
  return (await redis.zrange(keys.leases, 0, -1)).filter((member) => member.endsWith(`:${orgId}`)).length;
}

it("a cap on running turns holds across two workers, and does not hold up another organization's turn", async () => {
  await startWorkers(2);
  const capped = await organization({ limit_running_turns: '1' });
  const other = await organization();
  const cappedIds = await Promise.all([0, 1, 2, 3].map(() => capped.send(400)));
  let most = 0;
  const sampler = setInterval(() => {
    void executing(capped.orgId).then((n) => (most = Math.max(most, n)));
  }, 15);
  try {
    await waitFor(async () => (await executing(capped.orgId)) === 1, 5000);
    // Three agent processes are free: the other organization's turn starts at once, not after 4 × 400 ms.
    const otherId = await other.send(100);
    await waitFor(async () => (await other.status(otherId)) === 'idle', 5000);
    expect(await Promise.all(cappedIds.map(capped.status))).toContain('running');
    await waitFor(async () => (await Promise.all(cappedIds.map(capped.status))).every((s) => s === 'idle'), 10_000);
  } finally {
    clearInterval(sampler);
  }
  expect(most).toBe(1);
  expect(await redis.hmget(keys.scheduler(capped.orgId), 'running', 'waiting')).toEqual(['0', '0']);
}, 30_000);

it("a newcomer's turn is dispatched within one turn's run behind a backlog spread over two workers", async () => {
  await startWorkers(2);
  const flood = await organization();
  const late = await organization();
  const floodIds: string[] = [];
  for (let i = 0; i < 24; i++) floodIds.push(await flood.send(1000));
  await waitFor(async () => (await executing(flood.orgId)) === 4, 5000);
  const lateId = await late.send(10);
  await waitFor(async () => (await late.status(lateId)) === 'idle', 5000);
  // Four agent processes drain the backlog four at a time, a second a turn: the newcomer's turn
  // takes the first process to free up, so when it is done at least half of the flood still waits
  // or runs (behind a FIFO it would have been last, after six seconds).
  const states = await Promise.all(floodIds.map(flood.status));
  expect(states.filter((s) => s === 'running').length).toBeGreaterThanOrEqual(12);
  await waitFor(async () => (await Promise.all(floodIds.map(flood.status))).every((s) => s === 'idle'), 30_000);
}, 60_000);

it("kill -9 of a worker mid-turn: the reaper ends the turn in error and gives the organization's running slot back", async () => {
  const capped = await organization({ limit_running_turns: '1' });
  const main = path.join(__dirname, '..', '..', 'src', 'main-worker.ts');
  const env = {
    ...process.env,
    ...workerEnv,
    REDIS_PREFIX: prefix,
    WORKER_CONCURRENCY: '1',
    AGENT_MODULE: fixtureAgent('slow'),
    GATEWAY_API_KEY: 'sk-test',
    LOG_LEVEL: 'error',
  };
  const doomed: ChildProcess = spawn(process.execPath, ['--conditions=@tollway/source', '--import', 'tsx', main], {
    env,
    stdio: 'ignore',
  });
  const reaper: RunningReaper = startTurnReaper(testWorkerConfig(prefix, workerEnv), {
    redis,
    store: api.store,
    logger: createLogger({ service: 'fair-dispatch-test', silent: true }),
  });
  try {
    const first = await capped.send(60_000);
    await waitFor(async () => (await executing(capped.orgId)) === 1, 20_000);
    const second = await capped.send(10);
    doomed.kill('SIGKILL');
    const done = await request(api.app)
      .get(`/sessions/${first}?wait=true&timeout=10`)
      .set('authorization', capped.auth);
    expect(done.body).toMatchObject({ status: 'error', error: WORKER_LOST_ERROR });
    // The slot is back: the capped organization's next turn runs on a live worker.
    await startWorkers(1);
    await waitFor(async () => (await capped.status(second)) === 'idle', 10_000);
    await sleep(100);
    expect(await redis.hmget(keys.scheduler(capped.orgId), 'running', 'waiting')).toEqual(['0', '0']);
  } finally {
    doomed.kill('SIGKILL');
    await reaper.stop();
  }
}, 40_000);
