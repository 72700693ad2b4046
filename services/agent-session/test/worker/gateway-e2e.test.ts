import { randomBytes } from 'node:crypto';
import request from 'supertest';
import { WebhookPayload } from '@tollway/contracts';
import type { RunningWorker } from '../../src/worker/start-worker';
import { deleteKeys, startReplica, testPrefix, type ApiReplica } from '../api/api-harness';
import {
  sendJson,
  startGatewayProcess,
  startTestServer,
  startTestWorker,
  waitFor,
  type GatewayProcess,
  type TestServer,
} from './worker-harness';

const prefix = testPrefix();
const apiKey = `tw-${randomBytes(30).toString('base64url')}`;
let gateway: GatewayProcess;
let api: ApiReplica;
let worker: RunningWorker;
let receiver: TestServer;

beforeAll(async () => {
  gateway = await startGatewayProcess(prefix, { DEV_API_KEY: apiKey });
  api = await startReplica(prefix);
  receiver = await startTestServer((_req, res) => sendJson(res, 200, {}));
  worker = await startTestWorker(prefix, {
    GATEWAY_BASE_URL: gateway.baseUrl,
    GATEWAY_API_KEY: apiKey,
    TRACING_ENABLED: 'true',
  });
}, 40_000);

afterAll(async () => {
  await worker?.close();
  await receiver?.close();
  await api?.close();
  await gateway?.stop();
  await deleteKeys(prefix);
});

async function runTurn(body: Record<string, unknown>) {
  const id = (
    await request(api.app)
      .post('/sessions')
      .send({
        state: [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: 'hello' },
        ],
      })
  ).body.session_id as string;
  expect((await request(api.app).post(`/sessions/${id}/messages`).send(body)).status).toBe(202);
  const done = await request(api.app).get(`/sessions/${id}?wait=true&timeout=15`);
  return {
    id,
    done: done.body as { status: string; response: { role: string; content: string } | null; error: string | null },
  };
}

it('the default agent answers through the real gateway and simulated engine, with tokens in trace_metrics', async () => {
  const { id, done } = await runTurn({
    content: 'Tell me about mountains.',
    user_params: { max_tokens: 8, temperature: 0.5 },
    webhook: { url: receiver.url, include_messages: true },
  });
  expect(done.status).toBe('idle');
  expect(done.response?.role).toBe('assistant');
  expect(typeof done.response?.content).toBe('string');
  expect(done.response!.content.length).toBeGreaterThan(0);
  const history = (await request(api.app).get(`/sessions/${id}/messages`)).body as Array<{ role: string }>;
  expect(history.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
  const callback = await waitFor(() =>
    receiver.received.find((r) => (r.json as { session_id?: string }).session_id === id),
  );
  const payload = WebhookPayload.parse(callback.json);
  expect(payload.status).toBe('idle');
  expect(payload.trace_metrics!.total_tokens).toBeGreaterThan(0);
  expect(payload.messages).toHaveLength(4);
});

it('a model the gateway does not know fails the turn with the gateway message (404, not retried)', async () => {
  const { done } = await runTurn({ content: 'hi', user_params: { model: 'acme/missing-model' } });
  expect(done.status).toBe('error');
  expect(done.error).toContain('acme/missing-model');
});

it('an engine validation failure (top_p on a production model) fails the turn with the engine message', async () => {
  const { done } = await runTurn({ content: 'hi', user_params: { model: 'tollway/sim-prod', top_p: 0.5 } });
  expect(done.status).toBe('error');
  expect(done.error).toMatch(/top_p/);
});
