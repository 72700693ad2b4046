import request from 'supertest';
import { observeScriptCalls } from '@tollway/accounts';
import { createLogger } from '@tollway/service-kit';
import { createMetricsRegistry, startMetricsServer } from '@tollway/telemetry';
import type { Server } from 'node:http';
import { sampleSum, scrape, type Scrape } from '@tollway/telemetry/testing';
import { countScriptCalls, registerApiMetrics, WorkerMetrics } from '../../src/observability/session-metrics';
import { startWorker, type RunningWorker } from '../../src/worker/start-worker';
import { readWorkerStats } from '../../src/worker/worker-registry';
import { deleteKeys, serve, startReplica, testPrefix, type ApiReplica } from '../api/api-harness';
import {
  builtInAgent,
  completion,
  sendJson,
  startTestServer,
  testWorkerConfig,
  waitFor,
  type TestServer,
} from '../worker/worker-harness';

/**
 * `tollway_sessions{status}` and `tollway_redis_script_*` of the session API, scraped from its
 * `/metrics` while real turns run on a real worker: the counts are the store's own (kept by the
 * Lua scripts that change a status), so they move by exactly what was done. API and worker share
 * this process here, hence one script observer for both.
 */
jest.setTimeout(60_000);

const prefix = testPrefix();
const HOUR_MS = 3_600_000;
// The API's clock follows real time (the worker's reaper judges turn ages by real time, and a frozen
// clock would make every running turn look a lease-lifetime old to it); `skew` moves it ahead.
let skew = 0;
let api: ApiReplica;
let served: Awaited<ReturnType<typeof serve>>;
let gateway: TestServer;
let worker: RunningWorker;
let workerMetrics: Server;

beforeAll(async () => {
  const registry = createMetricsRegistry('agent-session-api');
  countScriptCalls(registry);
  api = await startReplica(prefix, { metricsRegistry: registry, clock: () => Date.now() + skew });
  registerApiMetrics(registry, {
    sessionsByStatus: () => api.store.countByStatus(),
    queueCounts: () => api.scheduler.counts(),
    workerStats: () => readWorkerStats(api.redis, prefix),
    longPollWaiters: () => api.hub.size,
  });
  served = await serve(api.app);
  // The chat agent's gateway: `ok…` answers, `fail…` is refused (400, never retried), `hang` never answers.
  gateway = await startTestServer((req, res) => {
    const messages = (req.json as { messages: Array<{ content: string }> }).messages;
    const content = messages.at(-1)?.content ?? '';
    if (content.startsWith('ok')) sendJson(res, 200, completion('fine', 7));
    else if (content.startsWith('fail'))
      sendJson(res, 400, { error: { message: 'bad', type: 'invalid_request_error' } });
  });
  const workerRegistry = createMetricsRegistry('agent-session-worker');
  worker = await startWorker(
    testWorkerConfig(prefix, { AGENT_MODULE: builtInAgent('chat'), GATEWAY_BASE_URL: `${gateway.url}/v1` }),
    { logger: createLogger({ service: 'test', silent: true }), metrics: new WorkerMetrics(workerRegistry) },
  );
  workerMetrics = await startMetricsServer(workerRegistry, 0, '127.0.0.1');
});

afterAll(async () => {
  observeScriptCalls(null);
  await worker?.close();
  workerMetrics?.close();
  await gateway?.close();
  await served?.close();
  await api?.close();
  await deleteKeys(prefix);
});

const metrics = (): Promise<Scrape> => scrape(`${served.url}/metrics`);
const byStatus = (s: Scrape) => ({
  idle: sampleSum(s, 'tollway_sessions', { status: 'idle' }),
  running: sampleSum(s, 'tollway_sessions', { status: 'running' }),
  error: sampleSum(s, 'tollway_sessions', { status: 'error' }),
});
const scriptCalls = (s: Scrape, script: string) => sampleSum(s, 'tollway_redis_script_calls_total', { script });

async function create(): Promise<string> {
  return (await request(api.app).post('/sessions').send({}).expect(201)).body.session_id as string;
}

async function send(id: string, content: string): Promise<void> {
  await request(api.app).post(`/sessions/${id}/messages`).send({ content }).expect(202);
}

async function statusOf(id: string): Promise<string> {
  return (await request(api.app).get(`/sessions/${id}`)).body.status as string;
}

it('counts sessions per status exactly, and every Lua script call of the store by script', async () => {
  const before = await metrics();
  expect(byStatus(before)).toEqual({ idle: 0, running: 0, error: 0 });
  const delta = (s: Scrape, script: string) => scriptCalls(s, script) - scriptCalls(before, script);

  const ids = [];
  for (let i = 0; i < 6; i++) ids.push(await create());
  const [s1, s2, s3, s4, s5, s6] = ids as [string, string, string, string, string, string];
  expect(byStatus(await metrics())).toEqual({ idle: 6, running: 0, error: 0 });

  await Promise.all([send(s1, 'ok 1'), send(s2, 'ok 2'), send(s3, 'fail 3'), send(s4, 'fail 4'), send(s5, 'hang')]);
  await waitFor(async () => (await Promise.all([s1, s2, s3, s4].map(statusOf))).every((s) => s !== 'running'), 15_000);
  expect(await Promise.all([s1, s2, s3, s4, s5].map(statusOf))).toEqual(['idle', 'idle', 'error', 'error', 'running']);
  expect(byStatus(await metrics())).toEqual({ idle: 3, running: 1, error: 2 });

  // error → running → idle
  await send(s3, 'ok again');
  await waitFor(async () => (await statusOf(s3)) === 'idle', 15_000);
  expect(byStatus(await metrics())).toEqual({ idle: 4, running: 1, error: 1 });

  // Deleting a running and an idle session.
  await request(api.app).delete(`/sessions/${s5}`).expect(204);
  await request(api.app).delete(`/sessions/${s6}`).expect(204);
  expect(byStatus(await metrics())).toEqual({ idle: 3, running: 0, error: 1 });

  // An hour later one new session; the TTL sweep (30 min) takes the four older idle and errored ones.
  skew += HOUR_MS;
  await create();
  expect(byStatus(await metrics())).toEqual({ idle: 4, running: 0, error: 1 });
  expect(await api.store.sweepExpired(HOUR_MS / 2)).toBe(4);
  // The deleted running turn's worker ends it (stale: its session is gone) once its killed child is
  // reaped, a moment after the deletion answered.
  const after = await waitFor(async () => {
    const current = await metrics();
    return delta(current, 'turn_finish') === 6 ? current : false;
  }, 10_000);
  expect(byStatus(after)).toEqual({ idle: 1, running: 0, error: 0 });

  // Script calls, by script: 7 creates; 6 turn starts (s3 twice), each queuing its turn; 6 turn
  // ends, each releasing the turn's lease (the deleted running turn's too, stale); 2 deletions + 4
  // sweeps; claims by the worker (each lease taken by one, or by the end before it).
  expect(delta(after, 'session_create')).toBe(7);
  expect(delta(after, 'turn_start')).toBe(6);
  expect(delta(after, 'turn_finish')).toBe(6);
  expect(delta(after, 'session_delete')).toBe(6);
  expect(delta(after, 'turn_claim')).toBeGreaterThan(0);
  expect(scriptCalls(after, 'worker_heartbeat')).toBeGreaterThan(0);
  const durations = sampleSum(after, 'tollway_redis_script_duration_seconds_count', { script: 'session_create' });
  expect(
    durations - sampleSum(before, 'tollway_redis_script_duration_seconds_count', { script: 'session_create' }),
  ).toBe(7);
  expect(after.types.get('tollway_redis_script_duration_seconds')).toBe('histogram');
});

it("counts the agents' model calls on the worker: durations by outcome, exact token sums", async () => {
  const { port } = workerMetrics.address() as { port: number };
  const workerScrape = () => scrape(`http://127.0.0.1:${port}/metrics`);
  const model = { gen_ai_operation_name: 'chat', gen_ai_request_model: 'tollway/sim-chat' };
  const calls = (s: Scrape, labels: Record<string, string>) =>
    sampleSum(s, 'gen_ai_client_operation_duration_seconds_count', { ...model, ...labels });
  const tokens = (s: Scrape, type: string) =>
    sampleSum(s, 'gen_ai_client_token_usage_sum', { ...model, gen_ai_token_type: type });
  const before = await workerScrape();

  const [ok1, ok2, failed, hung] = [await create(), await create(), await create(), await create()];
  await Promise.all([send(ok1, 'ok a'), send(ok2, 'ok b'), send(failed, 'fail c'), send(hung, 'hang')]);
  await waitFor(
    async () => (await Promise.all([ok1, ok2, failed].map(statusOf))).every((s) => s !== 'running'),
    15_000,
  );
  await waitFor(() =>
    gateway.received.some(
      (r) => (r.json as { messages: Array<{ content: string }> }).messages.at(-1)?.content === 'hang',
    ),
  );
  // The hung call is still open: its turn's deletion kills the child, and the worker ends the call.
  await request(api.app).delete(`/sessions/${hung}`).expect(204);
  const after = await waitFor(async () => {
    const current = await workerScrape();
    return calls(current, { error_type: 'cancelled' }) - calls(before, { error_type: 'cancelled' }) === 1
      ? current
      : false;
  }, 10_000);

  expect(calls(after, { error_type: '' }) - calls(before, { error_type: '' })).toBe(2);
  expect(calls(after, { error_type: '400' }) - calls(before, { error_type: '400' })).toBe(1);
  // completion('fine', 7): 5 input and 2 output tokens per successful call.
  expect(tokens(after, 'input') - tokens(before, 'input')).toBe(10);
  expect(tokens(after, 'output') - tokens(before, 'output')).toBe(4);
  expect(after.types.get('gen_ai_client_token_usage')).toBe('histogram');
});
