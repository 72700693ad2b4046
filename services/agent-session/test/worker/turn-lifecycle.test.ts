import request from 'supertest';
import { Webhook } from 'standardwebhooks';
import { WebhookPayload } from '@tollway/contracts';
import type { RunningWorker } from '../../src/worker/start-worker';
import { readWorkerStats } from '../../src/worker/worker-registry';
import { TURN_CANCELLED_ERROR } from '../../src/webhooks/webhook-payload';
import { deleteKeys, startReplica, testPrefix, type ApiReplica } from '../api/api-harness';
import {
  builtInAgent,
  completion,
  fixtureAgent,
  processAlive,
  sendJson,
  sleep,
  startTestServer,
  startTestWorker,
  waitFor,
  type TestServer,
} from './worker-harness';

const SECRET = 'whsec_' + Buffer.from('a-test-signing-secret-32-bytes!!').toString('base64');
const prefix = testPrefix();
let api: ApiReplica;
let receiver: TestServer;

beforeAll(async () => {
  api = await startReplica(prefix);
  receiver = await startTestServer((_req, res) => sendJson(res, 200, { ok: true }));
});

afterAll(async () => {
  await receiver.close();
  await api.close();
  await deleteKeys(prefix);
});

async function newSession(): Promise<string> {
  return (await request(api.app).post('/sessions').send({})).body.session_id as string;
}

/** Whether any hash of the turn queue (its jobs) holds `text`. */
async function queueHolds(text: string): Promise<boolean> {
  const names = await api.redis.keys(`${prefix}bull:*`);
  for (const name of names) {
    if ((await api.redis.type(name)) !== 'hash') continue;
    if (JSON.stringify(await api.redis.hgetall(name)).includes(text)) return true;
  }
  return false;
}

function callbacksFor(sessionId: string) {
  return receiver.received.filter((r) => (r.json as { session_id?: string } | null)?.session_id === sessionId);
}

describe('with the echo agent', () => {
  let worker: RunningWorker;
  beforeAll(async () => {
    worker = await startTestWorker(prefix, {
      AGENT_MODULE: builtInAgent('echo'),
      WEBHOOK_SIGNING_SECRET: SECRET,
      TRACING_ENABLED: 'true',
    });
  });
  afterAll(() => worker.close());

  it('runs a turn to idle, appends the reply, and delivers one signed webhook with messages and trace metrics', async () => {
    const id = await newSession();
    const sent = await request(api.app)
      .post(`/sessions/${id}/messages`)
      .send({ content: 'hello', webhook: { url: `${receiver.url}/hook`, token: 'tok-1', include_messages: true } });
    expect(sent.status).toBe(202);

    const done = await request(api.app).get(`/sessions/${id}?wait=true&timeout=5`);
    expect(done.body).toEqual({
      session_id: id,
      status: 'idle',
      response: { role: 'assistant', content: 'hello' },
      error: null,
    });
    const history = await request(api.app).get(`/sessions/${id}/messages`);
    expect(history.body).toEqual([
      { role: 'user', content: 'hello' },
      { role: 'assistant', content: 'hello' },
    ]);

    const [callback] = await waitFor(() => callbacksFor(id).length === 1 && callbacksFor(id));
    expect(callback!.headers.authorization).toBe('Bearer tok-1');
    expect(callback!.headers['content-type']).toBe('application/json');
    const payload = WebhookPayload.parse(callback!.json);
    expect(payload).toMatchObject({
      session_id: id,
      status: 'idle',
      response: { role: 'assistant', content: 'hello' },
      error: null,
      messages: history.body,
    });
    expect(payload.trace_metrics).toMatchObject({ total_tokens: 0, has_error: false });
    // TRACING_ENABLED without an OpenTelemetry exporter: trace_metrics, but no trace to name.
    expect(payload.trace_metrics!.trace_id).toBeNull();
    const headers = {
      'webhook-id': String(callback!.headers['webhook-id']),
      'webhook-timestamp': String(callback!.headers['webhook-timestamp']),
      'webhook-signature': String(callback!.headers['webhook-signature']),
    };
    expect(headers['webhook-id']).toMatch(/^msg_/);
    expect(new Webhook(SECRET).verify(callback!.body, headers)).toEqual(callback!.json);
    expect(() => new Webhook(SECRET).verify(callback!.body.replace('hello', 'HELLO'), headers)).toThrow();
    // The completed job goes with its message and its webhook's token: nothing of them stays in the queue.
    await waitFor(async () => !(await queueHolds('tok-1')), 3000);
  });

  it('gives every delivery its own event id, and no Authorization or messages unless asked', async () => {
    const ids = [await newSession(), await newSession()];
    for (const id of ids) {
      await request(api.app)
        .post(`/sessions/${id}/messages`)
        .send({ content: 'x', webhook: { url: `${receiver.url}/hook` } });
    }
    const callbacks = await waitFor(() => {
      const found = ids.flatMap((id) => callbacksFor(id));
      return found.length === 2 && found;
    });
    expect(new Set(callbacks.map((c) => c.headers['webhook-id'])).size).toBe(2);
    for (const callback of callbacks) {
      expect(callback.headers.authorization).toBeUndefined();
      expect((callback.json as WebhookPayload).messages).toBeNull();
    }
  });

  it('registers its concurrency and leases in the worker registry', async () => {
    const stats = await readWorkerStats(api.redis, prefix);
    expect(stats.maxWorkers).toBe(2);
    expect(stats.runningWorkers).toBe(0);
  });
});

describe('with an agent that raises', () => {
  let worker: RunningWorker;
  beforeAll(async () => {
    worker = await startTestWorker(prefix, { AGENT_MODULE: fixtureAgent('failing') });
  });
  afterAll(() => worker.close());

  it('ends the turn in error with the message, keeps the user message, and still accepts the next message', async () => {
    const id = await newSession();
    await request(api.app)
      .post(`/sessions/${id}/messages`)
      .send({ content: 'do it', webhook: { url: `${receiver.url}/hook`, include_messages: true } });
    const done = await request(api.app).get(`/sessions/${id}?wait=true&timeout=5`);
    expect(done.body).toEqual({ session_id: id, status: 'error', response: null, error: 'the tool exploded' });
    const history = await request(api.app).get(`/sessions/${id}/messages`);
    expect(history.body).toEqual([{ role: 'user', content: 'do it' }]);
    const [callback] = await waitFor(() => callbacksFor(id).length === 1 && callbacksFor(id));
    expect(callback!.json).toEqual({
      session_id: id,
      status: 'error',
      response: null,
      error: 'the tool exploded',
      messages: [{ role: 'user', content: 'do it' }],
      trace_metrics: null,
    });
    expect((await request(api.app).post(`/sessions/${id}/messages`).send({ content: 'again' })).status).toBe(202);
    expect((await request(api.app).get(`/sessions/${id}?wait=true&timeout=5`)).body.status).toBe('error');
  });
});

describe('with an agent that fails when asked', () => {
  let worker: RunningWorker;
  beforeAll(async () => {
    worker = await startTestWorker(prefix, { AGENT_MODULE: fixtureAgent('fails-when-asked') });
  });
  afterAll(() => worker.close());

  it("a failed turn keeps the last successful turn's response; running hides it; the next success replaces it", async () => {
    const id = await newSession();
    const send = (content: string) => request(api.app).post(`/sessions/${id}/messages`).send({ content });
    const first = { role: 'assistant', content: 'echo: one' };
    expect((await send('one')).status).toBe(202);
    expect((await request(api.app).get(`/sessions/${id}?wait=true&timeout=5`)).body).toEqual({
      session_id: id,
      status: 'idle',
      response: first,
      error: null,
    });
    expect((await send('fail')).status).toBe(202);
    // The long-poll answers from the turn's event, a later GET from the store: both keep it.
    expect((await request(api.app).get(`/sessions/${id}?wait=true&timeout=5`)).body).toEqual({
      session_id: id,
      status: 'error',
      response: first,
      error: 'asked to fail',
    });
    expect((await request(api.app).get(`/sessions/${id}`)).body).toMatchObject({ status: 'error', response: first });
    expect((await send('two')).status).toBe(202);
    expect((await request(api.app).get(`/sessions/${id}?wait=true&timeout=5`)).body).toMatchObject({
      status: 'idle',
      response: { role: 'assistant', content: 'echo: two' },
      error: null,
    });
  });

  it('a session whose only turn failed still has a null response', async () => {
    const id = await newSession();
    await request(api.app).post(`/sessions/${id}/messages`).send({ content: 'fail' });
    expect((await request(api.app).get(`/sessions/${id}?wait=true&timeout=5`)).body).toEqual({
      session_id: id,
      status: 'error',
      response: null,
      error: 'asked to fail',
    });
  });
});

describe('with an agent that calls a slow gateway twice', () => {
  let worker: RunningWorker;
  let gateway: TestServer;
  beforeAll(async () => {
    gateway = await startTestServer((_req, res) => {
      setTimeout(() => sendJson(res, 200, completion('slow reply')), 600);
    });
    worker = await startTestWorker(prefix, { AGENT_MODULE: fixtureAgent('two-calls'), GATEWAY_BASE_URL: gateway.url });
  });
  afterAll(async () => {
    await worker.close();
    await gateway.close();
  });

  const callsFrom = (pid: number) => gateway.received.filter((r) => (r.json as { user?: string }).user === String(pid));
  /** The process id of the agent that asked the gateway about `content`. */
  const pidAsking = (content: string) =>
    (
      gateway.received.find(
        (r) => (r.json as { messages: Array<{ content: string }> }).messages[0]?.content === content,
      )?.json as { user?: string } | undefined
    )?.user;

  it('DELETE while running kills the agent process at once: no further model call, only the cancellation callback', async () => {
    const id = await newSession();
    await request(api.app)
      .post(`/sessions/${id}/messages`)
      .send({ content: 'delete me', webhook: { url: `${receiver.url}/hook` } });
    const pid = Number(await waitFor(() => pidAsking('delete me')));
    expect(processAlive(pid)).toBe(true);

    expect((await request(api.app).delete(`/sessions/${id}`)).status).toBe(204);
    await waitFor(() => !processAlive(pid), 2000, 5);
    const [callback] = await waitFor(() => callbacksFor(id).length === 1 && callbacksFor(id));
    expect(callback!.json).toMatchObject({
      session_id: id,
      status: 'error',
      error: TURN_CANCELLED_ERROR,
      response: null,
    });

    await sleep(900);
    expect(callsFrom(pid)).toHaveLength(1);
    expect(callbacksFor(id)).toHaveLength(1);
    expect((await request(api.app).get(`/sessions/${id}`)).status).toBe(404);
  });

  it('kill -9 of the agent process mid-turn ends the turn in error, and the turn is not run again', async () => {
    const id = await newSession();
    await request(api.app).post(`/sessions/${id}/messages`).send({ content: 'kill me' });
    const pid = Number(await waitFor(() => pidAsking('kill me')));
    process.kill(pid, 'SIGKILL');

    const done = await request(api.app).get(`/sessions/${id}?wait=true&timeout=10`);
    expect(done.body.status).toBe('error');
    expect(done.body.error).toBe('turn failed: the agent process exited unexpectedly (signal SIGKILL)');
    await sleep(900);
    expect(callsFrom(pid)).toHaveLength(1);
    expect(gateway.received.filter((r) => r.body.includes('kill me'))).toHaveLength(1);
    expect((await request(api.app).get(`/sessions/${id}/messages`)).body).toEqual([
      { role: 'user', content: 'kill me' },
    ]);

    // The pool replaced the killed process: the next turn runs to completion.
    await request(api.app).post(`/sessions/${id}/messages`).send({ content: 'again' });
    const next = await request(api.app).get(`/sessions/${id}?wait=true&timeout=10`);
    expect(next.body).toMatchObject({ status: 'idle', response: { role: 'assistant', content: 'slow reply' } });
  });
});

describe('with the default chat agent and a fake gateway', () => {
  it('sends the stored history plus the new message, with its image part and user_params, and stores the reply', async () => {
    const gateway = await startTestServer((_req, res) => sendJson(res, 200, completion('a cat', 12)));
    const worker = await startTestWorker(prefix, {
      GATEWAY_BASE_URL: `${gateway.url}/v1`,
      AGENT_DEFAULT_MODEL: 'acme/default',
    });
    try {
      const created = await request(api.app)
        .post('/sessions')
        .send({
          state: [
            { role: 'user', content: 'hi' },
            { role: 'assistant', content: 'hello' },
          ],
        });
      const id = created.body.session_id as string;
      const image = 'iVBORw0KGgoAAAANSUhEUg==';
      await request(api.app)
        .post(`/sessions/${id}/messages`)
        .send({ content: 'what is this?', base64_image: image, user_params: { temperature: 0.3 } });
      const done = await request(api.app).get(`/sessions/${id}?wait=true&timeout=10`);
      expect(done.body).toMatchObject({ status: 'idle', response: { role: 'assistant', content: 'a cat' } });
      expect(gateway.received).toHaveLength(1);
      expect(gateway.received[0]!.headers.authorization).toBe('Bearer sk-test');
      expect(gateway.received[0]!.json).toMatchObject({
        model: 'acme/default',
        temperature: 0.3,
        messages: [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: 'hello' },
          {
            role: 'user',
            content: [
              { type: 'text', text: 'what is this?' },
              { type: 'image_url', image_url: { url: `data:image/png;base64,${image}` } },
            ],
          },
        ],
      });
      const history = await request(api.app).get(`/sessions/${id}/messages`);
      expect(history.body.at(-1)).toEqual({ role: 'assistant', content: 'a cat' });
      expect(history.body).toHaveLength(4);
    } finally {
      await worker.close();
      await gateway.close();
    }
  });
});

describe('limits and start-up', () => {
  it('kills a turn that outlives TURN_TIMEOUT_MS and ends it in error', async () => {
    const gateway = await startTestServer((_req, res) => setTimeout(() => sendJson(res, 200, completion('late')), 600));
    const worker = await startTestWorker(prefix, {
      AGENT_MODULE: fixtureAgent('two-calls'),
      GATEWAY_BASE_URL: gateway.url,
      TURN_TIMEOUT_MS: '300',
    });
    try {
      const id = await newSession();
      await request(api.app).post(`/sessions/${id}/messages`).send({ content: 'work' });
      const done = await request(api.app).get(`/sessions/${id}?wait=true&timeout=5`);
      expect(done.body).toMatchObject({ status: 'error', error: 'turn timed out after 300 ms' });
    } finally {
      await worker.close();
      await gateway.close();
    }
  });

  it('on shutdown lets the running turn finish and hands a turn that had not started back to the queue', async () => {
    const gateway = await startTestServer((_req, res) => setTimeout(() => sendJson(res, 200, completion('done')), 300));
    const env = { AGENT_MODULE: fixtureAgent('two-calls'), GATEWAY_BASE_URL: gateway.url, WORKER_CONCURRENCY: '1' };
    const first = await startTestWorker(prefix, env);
    let second: RunningWorker | null = null;
    try {
      const [a, b] = [await newSession(), await newSession()];
      await request(api.app).post(`/sessions/${a}/messages`).send({ content: 'first' });
      await waitFor(() => gateway.received.length === 1);
      await request(api.app).post(`/sessions/${b}/messages`).send({ content: 'second' });
      await sleep(200);
      await first.close();
      expect((await request(api.app).get(`/sessions/${a}`)).body).toMatchObject({ status: 'idle' });
      expect((await request(api.app).get(`/sessions/${b}`)).body).toMatchObject({ status: 'running' });
      expect(gateway.received).toHaveLength(2);

      second = await startTestWorker(prefix, env);
      const done = await request(api.app).get(`/sessions/${b}?wait=true&timeout=10`);
      expect(done.body).toMatchObject({ status: 'idle', response: { role: 'assistant', content: 'done' } });
    } finally {
      await second?.close();
      await gateway.close();
    }
  });

  it('on shutdown gives running turns WORKER_SHUTDOWN_GRACE_MS, then ends those still running in error', async () => {
    const env = { AGENT_MODULE: fixtureAgent('slow'), WORKER_CONCURRENCY: '2' };
    const patient = await startTestWorker(prefix, { ...env, WORKER_SHUTDOWN_GRACE_MS: '5000' });
    const [short, long] = [await newSession(), await newSession()];
    const send = (id: string, delayMs: number) =>
      request(api.app)
        .post(`/sessions/${id}/messages`)
        .send({ content: 'x', user_params: { delay_ms: delayMs } });
    await send(short, 1500);
    await waitFor(async () => (await api.scheduler.counts()).active === 1);
    await patient.close();
    expect((await request(api.app).get(`/sessions/${short}`)).body).toMatchObject({ status: 'idle' });

    const hasty = await startTestWorker(prefix, { ...env, WORKER_SHUTDOWN_GRACE_MS: '200' });
    await send(long, 10_000);
    await waitFor(async () => (await api.scheduler.counts()).active === 1);
    const closedAt = Date.now();
    await hasty.close();
    expect(Date.now() - closedAt).toBeLessThan(5000);
    expect((await request(api.app).get(`/sessions/${long}`)).body).toMatchObject({ status: 'error' });
  });

  it('refuses to start when the agent module cannot be loaded', async () => {
    await expect(startTestWorker(prefix, { AGENT_MODULE: fixtureAgent('does-not-exist') })).rejects.toThrow(
      /cannot load agent module/,
    );
  });
});
