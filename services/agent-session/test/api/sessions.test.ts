import request from 'supertest';
import { HealthResponse, SessionErrorResponse, SessionResponse } from '@tollway/contracts';
import { deleteKeys, startReplica, testPrefix, type ApiReplica } from './api-harness';

const prefix = testPrefix();
let api: ApiReplica;
let customIds: ApiReplica;
let tiny: ApiReplica;

beforeAll(async () => {
  api = await startReplica(prefix);
  customIds = await startReplica(`${prefix}custom:`, { allowCustomIds: true, maxSessions: 2 });
  tiny = await startReplica(`${prefix}tiny:`, { maxSessions: 1 });
});

afterAll(async () => {
  await Promise.all([api.close(), customIds.close(), tiny.close()]);
  await deleteKeys(prefix);
});

function expectError(body: unknown, code: string): void {
  const parsed = SessionErrorResponse.parse(body);
  expect(parsed.error.code).toBe(code);
}

describe('POST /sessions', () => {
  it('creates an idle session with no body: 201, Location, SessionResponse', async () => {
    const res = await request(api.app).post('/sessions');
    expect(res.status).toBe(201);
    const body = SessionResponse.parse(res.body);
    expect(body).toEqual({ session_id: body.session_id, status: 'idle', response: null, error: null });
    expect(res.headers.location).toBe(`/sessions/${body.session_id}`);
    const messages = await request(api.app).get(`/sessions/${body.session_id}/messages`);
    expect(messages.body).toEqual([]);
  });

  it('accepts {} and preloads the history from state', async () => {
    expect((await request(api.app).post('/sessions').send({})).status).toBe(201);
    const state = [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello' },
    ];
    const res = await request(api.app).post('/sessions').send({ state });
    expect(res.status).toBe(201);
    const messages = await request(api.app).get(`${res.headers.location}/messages`);
    expect(messages.status).toBe(200);
    expect(messages.body).toEqual(state);
  });

  it.each([
    ['a state item with role system', { state: [{ role: 'system', content: 'x' }] }, 'state[0].role'],
    ['a state item with null content', { state: [{ role: 'user', content: null }] }, 'state[0].content'],
    ['state that is not an array', { state: 'hello' }, 'state'],
    ['a body that is an array', [], null],
  ])('refuses %s with 400', async (_name, body, param) => {
    const res = await request(api.app)
      .post('/sessions')
      .send(body as object);
    expect(res.status).toBe(400);
    expectError(res.body, 'invalid_request');
    expect(res.body.error.param).toBe(param);
  });

  it('refuses broken JSON and a non-JSON body with 400 invalid_json', async () => {
    const broken = await request(api.app).post('/sessions').set('content-type', 'application/json').send('{"state": [');
    expect(broken.status).toBe(400);
    expectError(broken.body, 'invalid_json');
    const text = await request(api.app).post('/sessions').set('content-type', 'text/plain').send('hello');
    expect(text.status).toBe(400);
    expectError(text.body, 'invalid_json');
  });

  it('answers 413 to a body over the limit', async () => {
    const huge = { state: [{ role: 'user', content: 'x'.repeat(2 * 1024 * 1024) }] };
    const res = await request(api.app).post('/sessions').send(huge);
    expect(res.status).toBe(413);
    expectError(res.body, 'request_too_large');
  });

  it('answers 503 service_unavailable, not 500, when Redis is unreachable; /health still 200 ok', async () => {
    const cut = await startReplica(`${prefix}cut:`);
    await request(cut.app).post('/sessions');
    const counted = await request(cut.app).get('/health');
    expect(counted.body).toMatchObject({ status: 'ok', total_sessions: 1 });
    expect(counted.headers['x-health-stale']).toBeUndefined();
    await cut.redis.quit();
    try {
      const res = await request(cut.app).post('/sessions');
      expect(res.status).toBe(503);
      expectError(res.body, 'service_unavailable');
      expect((await request(cut.app).get('/readyz')).status).toBe(503);
      // The spec's HealthResponse.status is "always ok when the server is reachable".
      const health = await request(cut.app).get('/health');
      expect(health.status).toBe(200);
      expect(HealthResponse.parse(health.body)).toEqual(counted.body);
      expect(health.headers['x-health-stale']).toBe('true');
    } finally {
      await cut.close().catch(() => undefined);
    }
  });

  it('answers 503 at the session cap', async () => {
    expect((await request(tiny.app).post('/sessions')).status).toBe(201);
    const res = await request(tiny.app).post('/sessions');
    expect(res.status).toBe(503);
    expectError(res.body, 'session_limit_reached');
  });
});

describe('PUT /sessions/{id}', () => {
  const id = '6f1c9a52-3a55-4d7a-9d0e-0a5f1b2c3d4e';

  it('is 405 without --allow-custom-ids, and PUT is not among the methods the path allows', async () => {
    const res = await request(api.app).put(`/sessions/${id}`);
    expect(res.status).toBe(405);
    expectError(res.body, 'custom_ids_disabled');
    expect(res.headers.allow).toBe('GET, HEAD, DELETE');
    const options = await request(api.app).options(`/sessions/${id}`);
    expect([options.status, options.headers.allow]).toEqual([204, 'GET, HEAD, DELETE']);
    expect((await request(api.app).patch(`/sessions/${id}`)).headers.allow).toBe('GET, HEAD, DELETE');
  });

  it('creates with the chosen id, then 409 for the same id, 400 for a non-UUID, 503 at the cap', async () => {
    const created = await request(customIds.app)
      .put(`/sessions/${id}`)
      .send({ state: [{ role: 'user', content: 'x' }] });
    expect(created.status).toBe(201);
    expect(created.headers.location).toBe(`/sessions/${id}`);
    expect(SessionResponse.parse(created.body).session_id).toBe(id);

    const again = await request(customIds.app).put(`/sessions/${id}`);
    expect(again.status).toBe(409);
    expectError(again.body, 'session_exists');

    const bad = await request(customIds.app).put('/sessions/not-a-uuid');
    expect(bad.status).toBe(400);
    expectError(bad.body, 'invalid_session_id');

    expect((await request(customIds.app).put('/sessions/6f1c9a52-3a55-4d7a-9d0e-0a5f1b2c3d4f')).status).toBe(201);
    const full = await request(customIds.app).put('/sessions/6f1c9a52-3a55-4d7a-9d0e-0a5f1b2c3d50');
    expect(full.status).toBe(503);
    expectError(full.body, 'session_limit_reached');
  });

  it('validates the body like POST', async () => {
    const res = await request(customIds.app)
      .put('/sessions/1f1c9a52-3a55-4d7a-9d0e-0a5f1b2c3d4e')
      .send({ state: [{ role: 'tool', content: 'x' }] });
    expect(res.status).toBe(400);
    expect(res.body.error.param).toBe('state[0].role');
  });
});

describe('GET /sessions, GET and DELETE /sessions/{id}', () => {
  it('lists sessions with their message counts and status', async () => {
    const res = await request(api.app)
      .post('/sessions')
      .send({ state: [{ role: 'user', content: 'a' }] });
    const id = res.body.session_id as string;
    const list = await request(api.app).get('/sessions');
    expect(list.status).toBe(200);
    expect(list.body).toContainEqual({ session_id: id, total_messages: 1, status: 'idle' });
  });

  it('reads a session, deletes it (204, empty), then 404 everywhere', async () => {
    const id = (await request(api.app).post('/sessions')).body.session_id as string;
    expect((await request(api.app).get(`/sessions/${id}`)).body).toEqual({
      session_id: id,
      status: 'idle',
      response: null,
      error: null,
    });
    const deleted = await request(api.app).delete(`/sessions/${id}`);
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    for (const res of [
      await request(api.app).get(`/sessions/${id}`),
      await request(api.app).delete(`/sessions/${id}`),
      await request(api.app).get(`/sessions/${id}/messages`),
      await request(api.app).post(`/sessions/${id}/messages`).send({ content: 'x' }),
    ]) {
      expect(res.status).toBe(404);
      expectError(res.body, 'session_not_found');
    }
    expect((await request(api.app).get('/sessions')).body).not.toContainEqual(
      expect.objectContaining({ session_id: id }),
    );
  });

  it('answers 404 for ids that are not UUIDs and for unknown routes, in the error shape', async () => {
    expect((await request(api.app).get('/sessions/nope')).status).toBe(404);
    expect((await request(api.app).delete('/sessions/nope')).status).toBe(404);
    const route = await request(api.app).get('/nowhere');
    expect(route.status).toBe(404);
    expectError(route.body, 'not_found');
  });
});
