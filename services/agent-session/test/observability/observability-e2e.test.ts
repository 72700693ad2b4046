import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  freePort,
  scrape,
  sampleSum,
  startOtlpReceiver,
  startPrometheus,
  type OtlpReceiver,
  type PrometheusServer,
  type ReceivedSpan,
  type Scrape,
} from '@tollway/telemetry/testing';
import { WebhookPayload } from '@tollway/contracts';
import { deleteKeys, testPrefix } from '../api/api-harness';
import { sendJson, startTestServer, waitFor, type TestServer } from '../worker/worker-harness';
import { startServiceProcess, type ServiceProcess } from './service-process';

/**
 * The three processes (gateway, session API, worker) run as themselves, from their mains, with
 * metrics and tracing configured by their environment: `/metrics` of each is scraped by the test
 * and by a real Prometheus, and one trace is followed from the API to the engine.
 */
jest.setTimeout(120_000);

const SERVICES = path.join(__dirname, '..', '..', '..');
const prefix = testPrefix();
const apiKey = `tw-${randomBytes(30).toString('base64url')}`;
const SIM = 'test/sim';
const ECHO = 'test/echo';

let engine: TestServer;
let receiver: TestServer;
let otlp: OtlpReceiver;
let prometheus: PrometheusServer;
let catalogDir: string;
let processes: ServiceProcess[] = [];
const urls = { gateway: '', api: '', workerMetrics: '' };

beforeAll(async () => {
  otlp = await startOtlpReceiver();
  engine = await startTestServer((request, res) => {
    if (request.method === 'GET') return sendJson(res, 200, { object: 'list', data: [] });
    // The agents stream their calls: the same answer as the chunks an engine streams.
    if ((request.json as { stream?: boolean } | null)?.stream) {
      const chunk = (fields: Record<string, unknown>) =>
        `data: ${JSON.stringify({ id: 'cmpl-1', object: 'chat.completion.chunk', created: 1, model: ECHO, ...fields })}\n\n`;
      const delta = (delta: Record<string, unknown>, finish: string | null = null) =>
        chunk({ choices: [{ index: 0, delta, finish_reason: finish }] });
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(
        delta({ role: 'assistant', content: '' }) +
          delta({ content: 'traced' }) +
          delta({}, 'stop') +
          chunk({ choices: [], usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 } }) +
          'data: [DONE]\n\n',
      );
      return;
    }
    sendJson(res, 200, {
      id: 'cmpl-1',
      object: 'chat.completion',
      created: 1,
      model: ECHO,
      choices: [{ index: 0, message: { role: 'assistant', content: 'traced' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
    });
  });
  receiver = await startTestServer((_request, res) => sendJson(res, 200, {}));
  catalogDir = mkdtempSync(path.join(tmpdir(), 'tollway-observability-'));
  const catalog = path.join(catalogDir, 'catalog.json');
  writeFileSync(
    catalog,
    JSON.stringify({
      models: [
        {
          id: SIM,
          owned_by: 'test',
          created: 1,
          price_per_million: { input: 0.1, output: 0.1 },
          engine: { kind: 'simulated', time_to_first_token_ms: 20, time_per_output_token_ms: 1 },
        },
        {
          id: ECHO,
          owned_by: 'test',
          created: 1,
          price_per_million: { input: 0.1, output: 0.1 },
          engine: { kind: 'openai-compatible', replicas: [{ base_url: `${engine.url}/v1` }] },
        },
      ],
    }),
  );
  const [gatewayPort, apiPort, workerMetricsPort] = await Promise.all([freePort(), freePort(), freePort()]);
  urls.gateway = `http://127.0.0.1:${gatewayPort}`;
  urls.api = `http://127.0.0.1:${apiPort}`;
  urls.workerMetrics = `http://127.0.0.1:${workerMetricsPort}`;
  const common = {
    REDIS_PREFIX: prefix,
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: otlp.tracesUrl,
    OTEL_BSP_SCHEDULE_DELAY: '100',
    ACCESS_LOG: 'false',
  };
  processes = await Promise.all([
    startServiceProcess(
      path.join(SERVICES, 'inference-gateway', 'src', 'main.ts'),
      {
        ...common,
        GATEWAY_PORT: String(gatewayPort),
        GATEWAY_HOST: '127.0.0.1',
        DEV_API_KEY: apiKey,
        CATALOG_PATH: catalog,
        CATALOG_WATCH: 'false',
      },
      'gateway listening',
    ),
    startServiceProcess(
      path.join(SERVICES, 'agent-session', 'src', 'main-api.ts'),
      { ...common, SESSIONS_PORT: String(apiPort), SESSIONS_HOST: '127.0.0.1', SESSIONS_AUTH: 'false' },
      'agent session API listening',
    ),
    startServiceProcess(
      path.join(SERVICES, 'agent-session', 'src', 'main-worker.ts'),
      {
        ...common,
        METRICS_PORT: String(workerMetricsPort),
        METRICS_HOST: '127.0.0.1',
        WORKER_CONCURRENCY: '1',
        GATEWAY_BASE_URL: `${urls.gateway}/v1`,
        GATEWAY_API_KEY: apiKey,
        AGENT_DEFAULT_MODEL: ECHO,
        WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
      },
      'worker metrics listening',
    ),
  ]);
  prometheus = await startPrometheus([
    { job: 'gateway', targets: [`127.0.0.1:${gatewayPort}`] },
    { job: 'sessions-api', targets: [`127.0.0.1:${apiPort}`] },
    { job: 'sessions-worker', targets: [`127.0.0.1:${workerMetricsPort}`] },
  ]);
});

afterAll(async () => {
  await Promise.all(processes.map((service) => service.stop()));
  await Promise.all([prometheus?.stop(), otlp?.close(), engine?.close(), receiver?.close()]);
  if (catalogDir) rmSync(catalogDir, { recursive: true, force: true });
  await deleteKeys(prefix);
});

function chat(key: string, body: Record<string, unknown>): Promise<Response> {
  return fetch(`${urls.gateway}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: SIM, messages: [{ role: 'user', content: 'hi' }], max_tokens: 6, ...body }),
  });
}

async function post(url: string, body: unknown): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

/** Creates a session and sends it a message with a webhook; resolves with the session id. */
async function runTurn(): Promise<string> {
  const created = (await (await post(`${urls.api}/sessions`, {})).json()) as { session_id: string };
  const sent = await post(`${urls.api}/sessions/${created.session_id}/messages`, {
    content: 'hello',
    webhook: { url: `${receiver.url}/hook` },
  });
  expect(sent.status).toBe(202);
  return created.session_id;
}

function webhookFor(sessionId: string): Promise<WebhookPayload> {
  return waitFor(
    () => {
      const found = receiver.received.find((r) => (r.json as { session_id?: string })?.session_id === sessionId);
      return found ? WebhookPayload.parse(found.json) : false;
    },
    30_000,
    50,
  );
}

const scrapeAll = async (): Promise<Record<'gateway' | 'api' | 'worker', Scrape>> => {
  const [gateway, api, worker] = await Promise.all([
    scrape(`${urls.gateway}/metrics`),
    scrape(`${urls.api}/metrics`),
    scrape(`${urls.workerMetrics}/metrics`),
  ]);
  return { gateway, api, worker };
};

describe('metrics of the three processes', () => {
  it('move by exactly the traffic sent, and a real Prometheus scrapes and queries them', async () => {
    await waitFor(async () => (await prometheus.query('up == 1')).length === 3, 30_000, 250);
    const before = await scrapeAll();

    const streams = await Promise.all([1, 2, 3].map(() => chat(apiKey, { stream: true })));
    for (const res of streams)
      expect([res.status, (await res.text()).endsWith('data: [DONE]\n\n')]).toEqual([200, true]);
    const jsons = await Promise.all([1, 2].map(() => chat(apiKey, {})));
    for (const res of jsons) expect([res.status, typeof (await res.json())]).toEqual([200, 'object']);
    for (let i = 0; i < 3; i++) expect((await chat('tw-not-a-key', {})).status).toBe(401);
    const sessions = await Promise.all([runTurn(), runTurn()]);
    for (const id of sessions) expect((await webhookFor(id)).status).toBe('idle');

    const after = await waitFor(async () => {
      const current = await scrapeAll();
      return sampleSum(current.worker, 'tollway_webhook_deliveries_total') -
        sampleSum(before.worker, 'tollway_webhook_deliveries_total') ===
        2
        ? current
        : false;
    }, 10_000);
    const delta = (service: 'gateway' | 'api' | 'worker', name: string, labels: Record<string, string> = {}) =>
      sampleSum(after[service], name, labels) - sampleSum(before[service], name, labels);

    const sim = { gen_ai_request_model: SIM };
    expect(delta('gateway', 'gen_ai_server_time_to_first_token_seconds_count', sim)).toBe(3);
    expect(delta('gateway', 'gen_ai_server_request_duration_seconds_count', { ...sim, error_type: '' })).toBe(5);
    expect(delta('gateway', 'gen_ai_client_token_usage_count', { ...sim, gen_ai_token_type: 'output' })).toBe(5);
    // The two agent turns made one model call each, through the gateway, to the HTTP engine.
    expect(delta('gateway', 'gen_ai_server_request_duration_seconds_count', { gen_ai_request_model: ECHO })).toBe(2);
    expect(
      delta('gateway', 'gen_ai_client_token_usage_sum', { gen_ai_request_model: ECHO, gen_ai_token_type: 'output' }),
    ).toBe(4);
    expect(delta('gateway', 'tollway_admission_decisions_total', { outcome: 'admitted' })).toBe(7);
    expect(delta('gateway', 'tollway_admission_decisions_total', { outcome: 'unauthorized' })).toBe(3);
    expect(sampleSum(after.gateway, 'tollway_engine_replica_in_flight', { model: ECHO })).toBe(0);
    expect(after.gateway.types.get('tollway_engine_replica_errors_total')).toBe('counter');

    expect(delta('worker', 'tollway_turns_started_total')).toBe(2);
    expect(delta('worker', 'tollway_turns_total', { outcome: 'succeeded' })).toBe(2);
    expect(delta('worker', 'tollway_turns_total', { outcome: 'failed' })).toBe(0);
    expect(delta('worker', 'tollway_turn_duration_seconds_count', { outcome: 'succeeded' })).toBe(2);
    expect(
      delta('worker', 'gen_ai_client_operation_duration_seconds_count', { gen_ai_operation_name: 'invoke_agent' }),
    ).toBe(2);
    // The agents' model calls as the worker saw them (gen_ai.client.*, operation chat): 5 input
    // and 2 output tokens each, as the engine answered.
    const chatCall = { gen_ai_operation_name: 'chat', gen_ai_request_model: ECHO };
    expect(delta('worker', 'gen_ai_client_operation_duration_seconds_count', { ...chatCall, error_type: '' })).toBe(2);
    expect(delta('worker', 'gen_ai_client_token_usage_sum', { ...chatCall, gen_ai_token_type: 'input' })).toBe(10);
    expect(delta('worker', 'gen_ai_client_token_usage_sum', { ...chatCall, gen_ai_token_type: 'output' })).toBe(4);
    expect(delta('worker', 'gen_ai_client_token_usage_count', { ...chatCall, gen_ai_token_type: 'output' })).toBe(2);
    expect(delta('worker', 'tollway_webhook_deliveries_total', { outcome: 'delivered' })).toBe(2);
    expect(delta('worker', 'tollway_webhook_delivery_duration_seconds_count', { outcome: 'delivered' })).toBe(2);

    // The API's gauges: this prefix holds exactly the two sessions, both idle now.
    expect(sampleSum(after.api, 'tollway_sessions', { status: 'idle' })).toBe(2);
    expect(sampleSum(after.api, 'tollway_sessions', { status: 'running' })).toBe(0);
    expect(sampleSum(after.api, 'tollway_sessions', { status: 'error' })).toBe(0);
    expect(sampleSum(after.api, 'tollway_workers_max')).toBe(1);
    // The turn's lease goes just after its webhook: the gauge, read from the registry, follows.
    await waitFor(
      async () => sampleSum(await scrape(`${urls.api}/metrics`), 'tollway_workers_running') === 0,
      5000,
      50,
    );
    expect(sampleSum(after.api, 'tollway_turn_queue_jobs', { state: 'waiting' })).toBe(0);
    expect(after.api.types.get('tollway_long_poll_waiters')).toBe('gauge');

    // Prometheus: two more scrapes take in the traffic, then its query API answers over it.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const ttft = await prometheus.query(
      `histogram_quantile(0.5, sum by (le) (rate(gen_ai_server_time_to_first_token_seconds_bucket{gen_ai_request_model="${SIM}"}[1m])))`,
    );
    expect(ttft).toHaveLength(1);
    const median = Number(ttft[0]!.value[1]);
    // The simulated engine takes 20 ms to its first token (more under load, never less).
    expect(median).toBeGreaterThan(0.02);
    expect(median).toBeLessThan(5);
    const tokens = await prometheus.query(
      'sum by (gen_ai_request_model) (rate(gen_ai_client_token_usage_sum{gen_ai_token_type="output"}[1m]))',
    );
    const byModel = Object.fromEntries(
      tokens.map((series) => [series.metric.gen_ai_request_model, Number(series.value[1])]),
    );
    expect(byModel[SIM]).toBeGreaterThan(0);
    expect(byModel[ECHO]).toBeGreaterThan(0);
    // The API runs a reaper too, so it exports the turn counters (at zero: it ran no turn).
    const turns = await prometheus.query('sum by (job) (tollway_turns_total{outcome="succeeded"}) > 0');
    expect(turns.map((series) => [series.metric.job, series.value[1]])).toEqual([['sessions-worker', '2']]);
  });
});

describe('one trace from the session API to the engine', () => {
  const byId = (spans: ReceivedSpan[], id: string) => spans.find((span) => span.spanId === id);

  it('links API → worker turn → invoke_agent → chat (client) → gateway → engine, and the webhook names the trace', async () => {
    const sessionId = await runTurn();
    const payload = await webhookFor(sessionId);
    const traceId = payload.trace_metrics?.trace_id;
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(traceId).not.toBe('0'.repeat(32));

    const spans = await waitFor(() => {
      const found = otlp.spans.filter((span) => span.traceId === traceId);
      return found.some(
        (span) => span.service === 'inference-gateway' && span.name === `chat ${ECHO}` && span.kind === 3,
      ) &&
        found.some((span) => span.service === 'agent-session-api') &&
        found.some((span) => span.name === 'process agent-turns') &&
        found.some((span) => span.name === 'invoke_agent') &&
        found.some((span) => span.service === 'agent-session-worker' && span.kind === 3)
        ? found
        : false;
    }, 15_000);

    const api = spans.find((span) => span.service === 'agent-session-api')!;
    expect(api).toMatchObject({ name: 'POST /sessions/:sessionId/messages', kind: 2, parentSpanId: '' });
    const turn = spans.find((span) => span.name === 'process agent-turns')!;
    expect(turn).toMatchObject({ service: 'agent-session-worker', kind: 5, parentSpanId: api.spanId });
    const agent = spans.find((span) => span.name === 'invoke_agent')!;
    expect(agent.parentSpanId).toBe(turn.spanId);
    expect(agent.attributes).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.conversation.id': sessionId,
    });
    // The agent's model call: a client span under invoke_agent, whose traceparent the gateway got.
    const client = spans.find((span) => span.service === 'agent-session-worker' && span.kind === 3)!;
    expect(client).toMatchObject({ name: `chat ${ECHO}`, parentSpanId: agent.spanId });
    expect(client.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'tollway',
      'gen_ai.request.model': ECHO,
      'gen_ai.response.model': ECHO,
      'gen_ai.usage.input_tokens': 5,
      'gen_ai.usage.output_tokens': 2,
      'gen_ai.response.finish_reasons': ['stop'],
    });
    expect(client.attributes['error.type']).toBeUndefined();
    const server = spans.find((span) => span.service === 'inference-gateway' && span.kind === 2)!;
    expect(server).toMatchObject({ name: `chat ${ECHO}`, parentSpanId: client.spanId });
    // The agent streams its call: the gateway records finish reasons for whole answers only (its
    // README, "Traces"); the worker's client span above has them from the chunks.
    expect(server.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': ECHO,
      'gen_ai.response.model': ECHO,
      'gen_ai.usage.input_tokens': 5,
      'gen_ai.usage.output_tokens': 2,
    });
    const admission = spans.find((span) => span.name === 'admission')!;
    expect(admission.parentSpanId).toBe(server.spanId);
    const engineCall = spans.find((span) => span.service === 'inference-gateway' && span.kind === 3)!;
    expect(engineCall.parentSpanId).toBe(server.spanId);

    // The engine received the engine-call span as its parent.
    const engineRequest = engine.received.find(
      (request) => request.method === 'POST' && String(request.headers.traceparent).includes(traceId!),
    );
    expect(engineRequest?.headers.traceparent).toBe(`00-${traceId}-${engineCall.spanId}-01`);
    expect(byId(spans, engineCall.parentSpanId)?.name).toBe(`chat ${ECHO}`);
  });
});
