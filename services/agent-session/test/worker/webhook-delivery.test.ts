import { Webhook } from 'standardwebhooks';
import type { WebhookPayload } from '@tollway/contracts';
import { createLogger } from '@tollway/service-kit';
import { WebhookDelivery } from '../../src/webhooks/webhook-delivery';
import { sendJson, startTestServer, type TestServer } from './worker-harness';

const logger = createLogger({ service: 'webhook-test', silent: true });
const payload: WebhookPayload = {
  session_id: '00000000-0000-4000-8000-000000000001',
  status: 'idle',
  response: { role: 'assistant', content: 'hi' },
  error: null,
  messages: null,
  trace_metrics: null,
};
const SECRET = 'whsec_' + Buffer.from('another-secret-for-the-tests-1234').toString('base64');

let ok: TestServer;
let failing: TestServer;
let hanging: TestServer;

beforeAll(async () => {
  ok = await startTestServer((_req, res) => sendJson(res, 204, {}));
  failing = await startTestServer((_req, res) => sendJson(res, 500, { error: 'down' }));
  hanging = await startTestServer(() => undefined);
});

afterAll(async () => {
  await Promise.all([ok.close(), failing.close(), hanging.close()]);
});

const allowLocal = new WebhookDelivery({ logger, timeoutMs: 300, allowedHosts: ['127.0.0.1'], signingSecret: SECRET });

it('POSTs the JSON payload with a bearer token and Standard Webhooks headers that verify', async () => {
  const result = await allowLocal.deliver(
    { url: `${ok.url}/cb?x=1`, token: 'secret-token', include_messages: false },
    payload,
    'msg_1',
  );
  expect(result).toEqual({ ok: true, status: 204 });
  const got = ok.received.at(-1)!;
  expect(got.method).toBe('POST');
  expect(got.url).toBe('/cb?x=1');
  expect(got.json).toEqual(payload);
  expect(got.headers.authorization).toBe('Bearer secret-token');
  expect(got.headers['webhook-id']).toBe('msg_1');
  const verified = new Webhook(SECRET).verify(got.body, {
    'webhook-id': String(got.headers['webhook-id']),
    'webhook-timestamp': String(got.headers['webhook-timestamp']),
    'webhook-signature': String(got.headers['webhook-signature']),
  });
  expect(verified).toEqual(payload);
});

it('sends no Authorization header and no signature without a token or secret', async () => {
  const unsigned = new WebhookDelivery({ logger, timeoutMs: 300, allowedHosts: ['127.0.0.1'] });
  await unsigned.deliver({ url: ok.url, token: null, include_messages: false }, payload, 'msg_2');
  const got = ok.received.at(-1)!;
  expect(got.headers.authorization).toBeUndefined();
  expect(got.headers['webhook-signature']).toBeUndefined();
  expect(got.headers['webhook-id']).toBe('msg_2');
});

it('reports a non-2xx answer as a failure without retrying', async () => {
  const result = await allowLocal.deliver({ url: failing.url, token: null, include_messages: false }, payload, 'msg_3');
  expect(result).toEqual({ ok: false, status: 500, reason: 'status 500' });
  expect(failing.received).toHaveLength(1);
});

it('gives up on a hanging receiver after the timeout, once', async () => {
  const started = Date.now();
  const result = await allowLocal.deliver({ url: hanging.url, token: null, include_messages: false }, payload, 'msg_4');
  expect(result).toEqual({ ok: false, reason: 'timed out after 300 ms' });
  expect(Date.now() - started).toBeLessThan(2000);
  expect(hanging.received).toHaveLength(1);
});

it('refuses loopback, private and link-local targets unless allowed, without connecting', async () => {
  const strict = new WebhookDelivery({ logger, timeoutMs: 300 });
  const before = ok.received.length;
  const port = new URL(ok.url).port;
  for (const url of [
    ok.url,
    `http://localhost:${port}/`,
    `http://[::ffff:127.0.0.1]:${port}/`,
    'http://[::1]:9/',
    'http://10.0.0.1:9/',
    'http://169.254.169.254/latest/meta-data',
  ]) {
    const result = await strict.deliver({ url, token: null, include_messages: false }, payload, 'msg_5');
    expect(result.ok).toBe(false);
    expect(!result.ok && result.reason).toMatch(/webhook address refused/);
  }
  expect(ok.received.length).toBe(before);
});

it('reports a refused connection as a failure', async () => {
  const result = await allowLocal.deliver(
    { url: 'http://127.0.0.1:9/', token: null, include_messages: false },
    payload,
    'msg_6',
  );
  expect(result.ok).toBe(false);
});

it('a token Node cannot send as a header (a job queued before the check at the door) is a logged failure, not a crash', async () => {
  const before = ok.received.length;
  const result = await allowLocal.deliver({ url: ok.url, token: 'secret€', include_messages: false }, payload, 'msg_7');
  expect(result.ok).toBe(false);
  expect(!result.ok && result.reason).toMatch(/Invalid character/i);
  expect(ok.received.length).toBe(before);
});
