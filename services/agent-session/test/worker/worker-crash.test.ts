import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import request from 'supertest';
import { createLogger } from '@tollway/service-kit';
import { SessionStore } from '../../src/store/session-store';
import { TurnScheduler } from '../../src/store/turn-scheduler';
import { TurnNotifier } from '../../src/webhooks/turn-notifier';
import { WebhookDelivery } from '../../src/webhooks/webhook-delivery';
import type { RunningWorker } from '../../src/worker/start-worker';
import { startTurnReaper, type RunningReaper } from '../../src/worker/start-reaper';
import { TurnReaper, WORKER_LOST_ERROR, type TurnReaperOptions } from '../../src/worker/turn-reaper';
import { WorkerRegistration } from '../../src/worker/worker-registry';
import { TURN_CANCELLED_ERROR } from '../../src/webhooks/webhook-payload';
import { deleteKeys, startReplica, testPrefix, type ApiReplica } from '../api/api-harness';
import {
  completion,
  fixtureAgent,
  processAlive,
  sendJson,
  sleep,
  startTestServer,
  startTestWorker,
  testWorkerConfig,
  waitFor,
  type TestServer,
} from './worker-harness';

const prefix = testPrefix();
const logger = createLogger({ service: 'reaper-test', silent: true });
let api: ApiReplica;
let gateway: TestServer;
let receiver: TestServer;
let reaper: RunningReaper;
let workerProcess: ChildProcess | null = null;
let secondWorker: RunningWorker | null = null;

const workerEnv = {
  REDIS_PREFIX: prefix,
  WORKER_CONCURRENCY: '1',
  GATEWAY_API_KEY: 'sk-test',
  WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
  WORKER_LEASE_TTL_MS: '1000',
  REAPER_INTERVAL_MS: '200',
  LOG_LEVEL: 'error',
};

beforeAll(async () => {
  api = await startReplica(prefix);
  gateway = await startTestServer((_req, res) => setTimeout(() => sendJson(res, 200, completion('late')), 600));
  receiver = await startTestServer((_req, res) => sendJson(res, 200, {}));
  // The reaper as a process without a worker runs it (the API without --embedded-worker).
  reaper = startTurnReaper(testWorkerConfig(prefix, workerEnv), { redis: api.redis, store: api.store, logger });
});

afterAll(async () => {
  workerProcess?.kill('SIGKILL');
  await secondWorker?.close();
  await reaper.stop();
  await Promise.all([gateway.close(), receiver.close()]);
  await api.close();
  await deleteKeys(prefix);
});

it('kill -9 of a whole worker process: the reaper ends its turn in error within seconds, and no worker runs it again', async () => {
  const main = path.join(__dirname, '..', '..', 'src', 'main-worker.ts');
  workerProcess = spawn(process.execPath, ['--conditions=@tollway/source', '--import', 'tsx', main], {
    env: { ...process.env, ...workerEnv, AGENT_MODULE: fixtureAgent('two-calls'), GATEWAY_BASE_URL: gateway.url },
    stdio: 'ignore',
  });
  const id = (await request(api.app).post('/sessions').send({})).body.session_id as string;
  await request(api.app)
    .post(`/sessions/${id}/messages`)
    .send({ content: 'work', webhook: { url: receiver.url } });
  const agentPid = Number(
    await waitFor(() => (gateway.received[0]?.json as { user?: string } | undefined)?.user, 15_000),
  );

  const killedAt = Date.now();
  workerProcess.kill('SIGKILL');
  const done = await request(api.app).get(`/sessions/${id}?wait=true&timeout=10`);
  expect(done.body).toEqual({ session_id: id, status: 'error', response: null, error: WORKER_LOST_ERROR });
  expect(Date.now() - killedAt).toBeLessThan(10_000);
  await waitFor(() => !processAlive(agentPid), 2000);
  const callback = await waitFor(() => receiver.received[0]);
  expect(callback.json).toMatchObject({ session_id: id, status: 'error', error: WORKER_LOST_ERROR });

  // The turn left the queue when the dead worker claimed it: a live worker never runs it again.
  secondWorker = await startTestWorker(prefix, {
    ...workerEnv,
    AGENT_MODULE: fixtureAgent('two-calls'),
    GATEWAY_BASE_URL: gateway.url,
  });
  await sleep(700);
  expect(await api.scheduler.counts()).toEqual({ waiting: 0, active: 0 });
  expect(gateway.received).toHaveLength(1);
  expect(receiver.received).toHaveLength(1);
});

/** Puts a turn in the queue as the API's send does, with `job` as its job (JSON); returns its id. */
async function queueTurn(id: string, content: string, job?: (turnId: string) => unknown): Promise<string> {
  const turnId = randomUUID();
  const message = { role: 'user' as const, content };
  const payload = job?.(turnId) ?? { session_id: id, turn_id: turnId, org_id: null, message, accepted_at: Date.now() };
  const started = await api.store.startTurn(
    id,
    null,
    { turnId, message, job: typeof payload === 'string' ? payload : JSON.stringify(payload) },
    { maxHistoryBytes: 1 << 20, maxRunningTurns: 0, maxWaitingTurns: 0, weight: 1 },
  );
  expect(started.result).toBe('ok');
  return turnId;
}

/** A reaper of this suite's sessions and queue, driven by the test (no timer); `overrides` as needed. */
function testReaper(overrides: Partial<TurnReaperOptions>): TurnReaper {
  return new TurnReaper({
    store: api.store,
    scheduler: api.scheduler,
    notifier: new TurnNotifier(new WebhookDelivery({ logger, timeoutMs: 1000, allowedHosts: ['127.0.0.1'] }), false),
    logger,
    intervalMs: 200,
    leaseTtlMs: 1000,
    ...overrides,
  });
}

it('fails a turn whose job does not parse (a hand-edited key) without running it (the worker started above takes it)', async () => {
  const id = (await request(api.app).post('/sessions').send({})).body.session_id as string;
  const calls = gateway.received.length;
  await queueTurn(id, 'corrupted', () => '{"session_id":"not-a-uuid"}');
  const done = await request(api.app).get(`/sessions/${id}?wait=true&timeout=10`);
  expect(done.body).toMatchObject({ status: 'error', error: 'turn failed: its job is invalid' });
  expect(gateway.received).toHaveLength(calls);
});

it('after a Redis outage, leases that expired meanwhile wait one lease time: a live worker renews and keeps its turn, a dead one loses it', async () => {
  // The suite's reapers (on connections that stay up; every worker runs one) would reap the
  // expired leases themselves.
  await reaper.stop();
  await secondWorker?.close();
  secondWorker = null;
  // This reaper's own connection goes down and comes back, as after a Redis restart.
  const reaperRedis = new Redis('redis://127.0.0.1:6379', {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    lazyConnect: true,
  });
  await reaperRedis.connect();
  let now = Date.now();
  const outageReaper = testReaper({
    store: new SessionStore({ redis: reaperRedis, prefix }),
    scheduler: new TurnScheduler(reaperRedis, prefix),
    leaseTtlMs: 300,
    clock: () => now,
  });
  const turn = async (worker: WorkerRegistration) => {
    const id = (await request(api.app).post('/sessions').send({})).body.session_id as string;
    await queueTurn(id, 'through the outage');
    const [claimed] = await api.scheduler.claim(1, 300, false);
    expect(claimed?.sessionId).toBe(id);
    worker.hold(id, claimed!.turnId, null);
    return id;
  };
  const live = new WorkerRegistration({ redis: api.redis, prefix, workerId: 'live', concurrency: 1, ttlMs: 300 });
  const dead = new WorkerRegistration({ redis: api.redis, prefix, workerId: 'dead', concurrency: 1, ttlMs: 300 });
  const liveSession = await turn(live);
  const deadSession = await turn(dead);
  try {
    reaperRedis.disconnect();
    expect(await outageReaper.runPass()).toBeNull();
    await sleep(400); // both leases expire: no worker could renew during the outage
    await reaperRedis.connect();
    now = Date.now();
    expect(await outageReaper.runPass()).toBe(0); // Redis is back: expired leases are held
    await live.heartbeat(); // the live worker renews its lease within the lease time
    expect(await outageReaper.runPass()).toBe(0);
    now = Date.now() + 301; // the hold is over
    expect(await outageReaper.runPass()).toBe(1);
    expect((await request(api.app).get(`/sessions/${liveSession}`)).body.status).toBe('running');
    expect((await request(api.app).get(`/sessions/${deadSession}`)).body).toMatchObject({
      status: 'error',
      error: WORKER_LOST_ERROR,
    });
  } finally {
    const liveTurn = (await api.store.get(liveSession, null))?.turnId ?? '';
    await api.store.finishTurn(liveSession, liveTurn, { kind: 'error', error: 'test over' }).catch(() => undefined);
    reaperRedis.disconnect();
  }
});

it("a deleted session's turn whose worker died gets its one cancellation callback, from the reaper that claims the lease", async () => {
  await reaper.stop();
  await secondWorker?.close();
  secondWorker = null;
  const id = (await request(api.app).post('/sessions').send({})).body.session_id as string;
  const content = 'deleted while its worker was dead';
  await queueTurn(id, content, (turnId) => ({
    session_id: id,
    turn_id: turnId,
    org_id: null,
    message: { role: 'user', content, webhook: { url: `${receiver.url}/deleted` } },
    accepted_at: Date.now(),
  }));
  // A worker claimed the turn (leasing it), then died: its lease is never renewed.
  expect((await api.scheduler.claim(1, 200, false))[0]?.sessionId).toBe(id);
  expect((await request(api.app).delete(`/sessions/${id}`)).status).toBe(204);
  await sleep(300);
  const deliveryReaper = testReaper({ leaseTtlMs: 200 });
  await deliveryReaper.runPass();
  const callback = await waitFor(() => receiver.received.find((delivery) => delivery.url === '/deleted'));
  expect(callback.json).toMatchObject({ session_id: id, status: 'error', error: TURN_CANCELLED_ERROR });
  await deliveryReaper.runPass();
  await sleep(300);
  expect(receiver.received.filter((delivery) => delivery.url === '/deleted')).toHaveLength(1);
});

it('a reaper whose process stood still for over half a lease holds expired leases for one lease time: its worker, which stood still too, renews first', async () => {
  await reaper.stop();
  await secondWorker?.close();
  secondWorker = null;
  const id = (await request(api.app).post('/sessions').send({})).body.session_id as string;
  await queueTurn(id, 'through a stall');
  const [claimed] = await api.scheduler.claim(1, 300, false);
  expect(claimed?.sessionId).toBe(id);
  const worker = new WorkerRegistration({ redis: api.redis, prefix, workerId: 'stalled', concurrency: 1, ttlMs: 300 });
  worker.hold(id, claimed!.turnId, null);
  const stalled = testReaper({ intervalMs: 20, leaseTtlMs: 300 });
  stalled.start();
  const status = async () => (await request(api.app).get(`/sessions/${id}`)).body.status as string;
  try {
    await sleep(100);
    // The process stands still for 500 ms (CPU starved, a GC pause): the lease lapses meanwhile.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 500);
    await sleep(60); // the reaper's late ticks come first
    expect(await worker.heartbeat()).toEqual([]);
    expect(await status()).toBe('running');
    // A worker that stays silent loses the turn once the hold is over.
    await waitFor(async () => (await status()) === 'error', 3000);
  } finally {
    await stalled.stop();
  }
});
