import request from 'supertest';
import { AgentTurnJob, MessageResponse } from '@tollway/contracts';
import { sessionKeys } from '../../src/store/session-keys';
import { deleteKeys, startReplica, testPrefix, type ApiReplica } from './api-harness';

const prefix = testPrefix();
let api: ApiReplica;

beforeAll(async () => {
  api = await startReplica(prefix);
});

afterAll(async () => {
  await api.close();
  await deleteKeys(prefix);
});

/** The turns waiting in the queue of the sessions made without auth, as `<session id>:<turn id>`. */
async function queued(replica: ApiReplica, keyPrefix: string): Promise<string[]> {
  const entries = await replica.redis.lrange(sessionKeys(keyPrefix).queue(null), 0, -1);
  return entries.map((entry) => entry.slice(0, entry.indexOf('|')));
}

/** The id of the turn `id` runs (null when it runs none). */
async function runningTurn(replica: ApiReplica, id: string): Promise<string> {
  return (await replica.store.get(id, null))?.turnId ?? '';
}

async function newSession(state?: Array<{ role: string; content: string }>): Promise<string> {
  return (
    await request(api.app)
      .post('/sessions')
      .send(state ? { state } : {})
  ).body.session_id as string;
}

describe('POST /sessions/{id}/messages', () => {
  it('accepts: 202, Location, running, the message in the history and its turn queued with its job', async () => {
    const id = await newSession([{ role: 'user', content: 'earlier' }]);
    const body = {
      content: 'hello',
      user_params: { model: 'm' },
      webhook: { url: 'http://127.0.0.1:9/hook', token: 't' },
    };
    const res = await request(api.app).post(`/sessions/${id}/messages`).send(body);
    expect(res.status).toBe(202);
    expect(res.headers.location).toBe(`/sessions/${id}`);
    expect(MessageResponse.parse(res.body)).toEqual({ session_id: id, status: 'running' });

    const session = await request(api.app).get(`/sessions/${id}`);
    expect(session.body).toEqual({ session_id: id, status: 'running', response: null, error: null });
    const history = await request(api.app).get(`/sessions/${id}/messages`);
    expect(history.body).toEqual([
      { role: 'user', content: 'earlier' },
      { role: 'user', content: 'hello' },
    ]);

    const turnId = await runningTurn(api, id);
    expect(await queued(api, prefix)).toContain(`${id}:${turnId}`);
    const payload = AgentTurnJob.parse(
      JSON.parse((await api.redis.hget(sessionKeys(prefix).session(id), 'job')) ?? ''),
    );
    expect(payload).toMatchObject({ session_id: id, turn_id: turnId, org_id: null });
    // The content is in the history only, not again in the job.
    expect(payload.message).toMatchObject({
      content: null,
      role: 'user',
      user_params: { model: 'm' },
      webhook: { url: 'http://127.0.0.1:9/hook', token: 't', include_messages: false },
    });
  });

  it('keeps tool fields and base64_image in the history', async () => {
    const id = await newSession();
    const message = {
      role: 'tool',
      content: '42',
      tool_call_id: 'call_1',
      name: 'calculator',
    };
    expect((await request(api.app).post(`/sessions/${id}/messages`).send(message)).status).toBe(202);
    expect((await request(api.app).get(`/sessions/${id}/messages`)).body).toEqual([message]);
    const withImage = await newSession();
    const image = { role: 'user', content: 'what is this?', base64_image: 'iVBORw0KGgo=' };
    expect((await request(api.app).post(`/sessions/${withImage}/messages`).send(image)).status).toBe(202);
    expect((await request(api.app).get(`/sessions/${withImage}/messages`)).body).toEqual([image]);
  });

  it('answers 409 to a send while running and changes nothing', async () => {
    const id = await newSession();
    expect((await request(api.app).post(`/sessions/${id}/messages`).send({ content: 'one' })).status).toBe(202);
    const res = await request(api.app).post(`/sessions/${id}/messages`).send({ content: 'two' });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('session_busy');
    expect((await request(api.app).get(`/sessions/${id}/messages`)).body).toEqual([{ role: 'user', content: 'one' }]);
  });

  it('gives exactly one 202 among many concurrent sends to an idle session', async () => {
    const id = await newSession();
    const results = await Promise.all(
      Array.from({ length: 25 }, (_, i) =>
        request(api.app)
          .post(`/sessions/${id}/messages`)
          .send({ content: `m${i}` }),
      ),
    );
    const statuses = results.map((res) => res.status).sort();
    expect(statuses.filter((s) => s === 202)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(24);
    expect((await request(api.app).get(`/sessions/${id}/messages`)).body).toHaveLength(1);
    expect((await queued(api, prefix)).filter((entry) => entry.startsWith(`${id}:`))).toHaveLength(1);
  });

  it.each([
    ['content of the wrong type', { content: 5 }, 'content'],
    ['an unknown role', { role: 'robot', content: 'x' }, 'role'],
    ['user_params that is not an object', { content: 'x', user_params: [1] }, 'user_params'],
    ['a webhook url that is not http(s)', { content: 'x', webhook: { url: 'ftp://example.test/x' } }, 'webhook.url'],
    ['a webhook without url', { content: 'x', webhook: { token: 'x' } }, 'webhook.url'],
    [
      'include_messages that is not boolean',
      { content: 'x', webhook: { url: 'http://a.test', include_messages: 'yes' } },
      'webhook.include_messages',
    ],
    ['tool_calls that is not an array', { role: 'assistant', content: null, tool_calls: 'x' }, 'tool_calls'],
  ])('refuses %s with 400 and leaves the session idle', async (_name, body, param) => {
    const id = await newSession();
    const res = await request(api.app).post(`/sessions/${id}/messages`).send(body);
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', param });
    expect((await request(api.app).get(`/sessions/${id}`)).body.status).toBe('idle');
  });

  it('refuses broken JSON with 400', async () => {
    const id = await newSession();
    const res = await request(api.app)
      .post(`/sessions/${id}/messages`)
      .set('content-type', 'application/json')
      .send('{"content":');
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_json');
  });
});

describe('the history limit (--max-history-bytes)', () => {
  const limitPrefix = testPrefix();
  let small: ApiReplica;
  beforeAll(async () => {
    small = await startReplica(limitPrefix, { maxHistoryBytes: 4096 });
  });
  afterAll(async () => {
    await small.close();
    await deleteKeys(limitPrefix);
  });
  const tooLarge = (body: { error?: { code?: string; message?: string } }) => {
    expect(body.error?.code).toBe('history_too_large');
    expect(body.error?.message).toContain('4096 bytes');
  };

  it('refuses a create whose state is over the limit with 413, and makes no session', async () => {
    const res = await request(small.app)
      .post('/sessions')
      .send({ state: [{ role: 'user', content: 'x'.repeat(5000) }] });
    expect(res.status).toBe(413);
    tooLarge(res.body);
    expect(await small.store.count()).toBe(0);
  });

  it('refuses a send that would take the history past the limit with 413, changing nothing', async () => {
    const state = [{ role: 'user', content: 'x'.repeat(1500) }];
    const id = (await request(small.app).post('/sessions').send({ state })).body.session_id as string;
    const first = await request(small.app)
      .post(`/sessions/${id}/messages`)
      .send({ content: 'y'.repeat(1500) });
    expect(first.status).toBe(202);
    // The turn ends (no worker here) as a failed turn: its message stays and still counts.
    expect(await small.store.finishTurn(id, await runningTurn(small, id), { kind: 'error', error: 'x' })).toBe(
      'applied',
    );
    const second = await request(small.app)
      .post(`/sessions/${id}/messages`)
      .send({ content: 'z'.repeat(1500) });
    expect(second.status).toBe(413);
    tooLarge(second.body);
    const history = (await request(small.app).get(`/sessions/${id}/messages`)).body as unknown[];
    expect(history).toHaveLength(2);
    expect((await request(small.app).get(`/sessions/${id}`)).body.status).toBe('error');
    // A small message still fits.
    expect((await request(small.app).post(`/sessions/${id}/messages`).send({ content: 'ok' })).status).toBe(202);
  });
});

describe('transitions driven by the end of a turn', () => {
  async function startTurn(): Promise<{ id: string; turnId: string }> {
    const id = await newSession([{ role: 'user', content: 'before' }]);
    expect((await request(api.app).post(`/sessions/${id}/messages`).send({ content: 'q' })).status).toBe(202);
    return { id, turnId: await runningTurn(api, id) };
  }

  it('running → idle on success: response populated, messages appended', async () => {
    const { id, turnId } = await startTurn();
    const reply = { role: 'assistant' as const, content: 'a' };
    const toolCall = { role: 'assistant' as const, content: null, tool_calls: [{ id: 'c1', type: 'function' }] };
    const toolResult = { role: 'tool' as const, content: '1', tool_call_id: 'c1' };
    expect(
      await api.store.finishTurn(id, turnId, {
        kind: 'success',
        append: [toolCall, toolResult, reply],
        response: reply,
      }),
    ).toBe('applied');
    expect((await request(api.app).get(`/sessions/${id}`)).body).toEqual({
      session_id: id,
      status: 'idle',
      response: reply,
      error: null,
    });
    expect((await request(api.app).get(`/sessions/${id}/messages`)).body).toEqual([
      { role: 'user', content: 'before' },
      { role: 'user', content: 'q' },
      toolCall,
      toolResult,
      reply,
    ]);
    expect(await api.store.finishTurn(id, turnId, { kind: 'error', error: 'late' })).toBe('stale');
  });

  it('running → error on failure: error set, the user message stays, nothing else appended; error → running accepted', async () => {
    const { id, turnId } = await startTurn();
    expect(await api.store.finishTurn(id, turnId, { kind: 'error', error: 'agent exploded' })).toBe('applied');
    expect((await request(api.app).get(`/sessions/${id}`)).body).toEqual({
      session_id: id,
      status: 'error',
      response: null,
      error: 'agent exploded',
    });
    expect((await request(api.app).get(`/sessions/${id}/messages`)).body).toEqual([
      { role: 'user', content: 'before' },
      { role: 'user', content: 'q' },
    ]);
    const late = { role: 'assistant' as const, content: 'late' };
    expect(await api.store.finishTurn(id, turnId, { kind: 'success', append: [late], response: late })).toBe('stale');
    expect((await request(api.app).post(`/sessions/${id}/messages`).send({ content: 'retry' })).status).toBe(202);
    const errored = await startTurn();
    await api.store.finishTurn(errored.id, errored.turnId, { kind: 'error', error: 'x' });
    expect((await request(api.app).delete(`/sessions/${errored.id}`)).status).toBe(204);
    expect((await request(api.app).get(`/sessions/${errored.id}`)).status).toBe(404);
    expect((await request(api.app).get(`/sessions/${id}`)).body).toEqual({
      session_id: id,
      status: 'running',
      response: null,
      error: null,
    });
  });

  it('any → removed by DELETE while running: the cancellation is published and a late result is discarded', async () => {
    // A replica of its own, so the turn a worker claims here is this test's.
    const ownPrefix = testPrefix();
    const own = await startReplica(ownPrefix);
    const listener = own.subscriber.duplicate();
    try {
      const id = (await request(own.app).post('/sessions')).body.session_id as string;
      expect((await request(own.app).post(`/sessions/${id}/messages`).send({ content: 'q' })).status).toBe(202);
      const [claimed] = await own.scheduler.claim(1, 10_000);
      expect(claimed?.sessionId).toBe(id);
      const cancelled = new Promise<string>((resolve) =>
        listener.on('message', (_channel, message: string) => resolve(message)),
      );
      await listener.subscribe(`${ownPrefix}turn-cancel`);
      expect((await request(own.app).delete(`/sessions/${id}`)).status).toBe(204);
      expect(JSON.parse(await cancelled)).toEqual({ session_id: id, turn_id: claimed!.turnId });
      const late = { role: 'assistant' as const, content: 'late' };
      expect(
        await own.scheduler.finish(claimed!, { kind: 'success', append: [late], response: late }, 0, 10_000),
      ).toMatchObject({ result: 'stale', stillLeased: true });
      expect((await request(own.app).get(`/sessions/${id}`)).status).toBe(404);
      expect(await own.scheduler.counts()).toEqual({ waiting: 0, active: 0 });
    } finally {
      await listener.quit();
      await own.close();
      await deleteKeys(ownPrefix);
    }
  });

  it('any → removed by DELETE while its turn waits: the turn leaves the queue and never runs', async () => {
    const { id, turnId } = await startTurn();
    expect(await queued(api, prefix)).toContain(`${id}:${turnId}`);
    expect((await request(api.app).delete(`/sessions/${id}`)).status).toBe(204);
    expect(await queued(api, prefix)).not.toContain(`${id}:${turnId}`);
    expect(await api.redis.hget(sessionKeys(prefix).session(id), 'job')).toBeNull();
  });
});
