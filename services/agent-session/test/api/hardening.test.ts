import { gzipSync } from 'node:zlib';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { rawExchange } from '@tollway/service-kit/testing';
import { deleteKeys, serve, startReplica, testPrefix, type ApiReplica } from './api-harness';

// Hostile input against the session API over a real listening server (issue 10): a 4xx in the
// error envelope or a clean close, and the service keeps serving. Bounds: README "Limits".
const prefix = testPrefix();
let api: ApiReplica;
let server: Awaited<ReturnType<typeof serve>>;
let sessionId: string;

beforeAll(async () => {
  api = await startReplica(prefix, { allowCustomIds: true });
  server = await serve(api.app);
  sessionId = (await request(api.app).post('/sessions').send({})).body.session_id as string;
});

afterAll(async () => {
  await server.close();
  await api.close();
  await deleteKeys(prefix);
});

afterEach(async () => {
  const res = await fetch(`${server.url}/sessions/${sessionId}`);
  expect(res.status).toBe(200);
});

const send = (path: string, body: unknown, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
  fetch(`${server.url}${path}`, {
    method: 'POST',
    headers,
    body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body),
  });

async function expectError(res: Response, status: number, code: string, param?: string | null): Promise<void> {
  expect(res.status).toBe(status);
  const body = (await res.json()) as { error: Record<string, unknown> };
  expect(body.error).toMatchObject({ code, type: expect.any(String), message: expect.any(String) });
  if (param !== undefined) expect(body.error.param).toBe(param);
}

describe('webhook fields are checked when the message is sent', () => {
  it.each([
    ['a token that is not a valid header value (the issue reproduction)', { token: 'secret€' }, 'webhook.token'],
    ['a token with a control character', { token: 'a\r\nX-Injected: 1' }, 'webhook.token'],
    ['a token over 4096 characters', { token: 't'.repeat(4097) }, 'webhook.token'],
    ['a URL over 2048 characters', { url: `http://example.com/${'p'.repeat(2048)}` }, 'webhook.url'],
    ['a URL that is not http(s)', { url: 'file:///etc/passwd' }, 'webhook.url'],
  ])('%s: 400 invalid_request naming the field, and nothing starts', async (_name, fields, param) => {
    const res = await send(`/sessions/${sessionId}/messages`, {
      content: 'hi',
      webhook: { url: 'http://127.0.0.1:9/hook', ...fields },
    });
    await expectError(res, 400, 'invalid_request', param);
    const session = (await (await fetch(`${server.url}/sessions/${sessionId}`)).json()) as { status: string };
    expect(session.status).toBe('idle');
  });
});

describe('bounds of the bodies', () => {
  it('user_params nested 10 000 levels deep (the issue reproduction) is 400 invalid_json', async () => {
    const deep = `{"content":"hi","user_params":{"a":${'['.repeat(10_000)}${']'.repeat(10_000)}}}`;
    await expectError(await send(`/sessions/${sessionId}/messages`, deep), 400, 'invalid_json');
  });

  it('user_params over 64 KiB as JSON is 400 on user_params', async () => {
    const res = await send(`/sessions/${sessionId}/messages`, {
      content: 'hi',
      user_params: { blob: 'x'.repeat(70_000) },
    });
    await expectError(res, 400, 'invalid_request', 'user_params');
  });

  it('a state of more than 1000 messages is 400 on state', async () => {
    const state = Array.from({ length: 1001 }, () => ({ role: 'user', content: 'x' }));
    await expectError(await send('/sessions', { state }), 400, 'invalid_request', 'state');
  });

  it('more than 128 tool calls, or a name over 256 characters, is 400 naming the field', async () => {
    const calls = Array.from({ length: 129 }, (_, i) => ({ id: `c${i}` }));
    await expectError(
      await send(`/sessions/${sessionId}/messages`, { content: 'hi', tool_calls: calls }),
      400,
      'invalid_request',
      'tool_calls',
    );
    await expectError(
      await send(`/sessions/${sessionId}/messages`, { content: 'hi', name: 'n'.repeat(257) }),
      400,
      'invalid_request',
      'name',
    );
  });

  it('a JSON null body is 400, not an empty message', async () => {
    await expectError(await send(`/sessions/${sessionId}/messages`, 'null'), 400, 'invalid_request');
    await expectError(await send('/sessions', 'null'), 400, 'invalid_request');
  });
});

describe('decoding', () => {
  it.each(['/sessions/%', '/sessions/%zz', '/sessions/%ED%A0%80', '/sessions/%2/messages'])(
    'GET %s is 404 session_not_found',
    async (path) => {
      await expectError(await fetch(`${server.url}${path}?wait=true&timeout=0.1`), 404, 'session_not_found');
    },
  );

  it('PUT /sessions/% is 400 invalid_session_id', async () => {
    const res = await fetch(`${server.url}/sessions/%`, { method: 'PUT', body: '{}' });
    await expectError(res, 400, 'invalid_session_id');
  });

  it('gzip that is not gzip, an unknown encoding and invalid UTF-8 are 400 invalid_json', async () => {
    await expectError(await send('/sessions', '{}', { 'content-encoding': 'gzip' }), 400, 'invalid_json');
    await expectError(await send('/sessions', '{}', { 'content-encoding': 'br' }), 400, 'invalid_json');
    await expectError(await send('/sessions', '{}', { 'content-encoding': 'zstd' }), 400, 'invalid_json');
    await expectError(
      await send('/sessions', Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d])),
      400,
      'invalid_json',
    );
    expect((await send('/sessions', gzipSync('{}'), { 'content-encoding': 'gzip' })).status).toBe(201);
  });

  it('a decompression bomb is 413 request_too_large on its decoded size', async () => {
    const bomb = gzipSync(Buffer.alloc(2 * 1024 * 1024, 0x20));
    await expectError(await send('/sessions', bomb, { 'content-encoding': 'gzip' }), 413, 'request_too_large');
  });

  it('CONNECT gets 405 in the envelope and TRACE a 405 or 404 in the envelope, not a dropped socket', async () => {
    const port = (server.server.address() as AddressInfo).port;
    const connect = await rawExchange(port, ['CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n']);
    expect(connect.status).toBe(405);
    const trace = await rawExchange(port, ['TRACE /sessions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n']);
    expect(trace.status).toBe(405);
    expect(JSON.parse(trace.body)).toMatchObject({ error: { code: 'method_not_allowed' } });
    const unknown = await rawExchange(port, ['TRACE /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n']);
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.body)).toMatchObject({ error: { code: 'not_found' } });
  });
});

describe('methods a known path does not serve', () => {
  it.each([
    ['PATCH', '/sessions/{id}', 'GET, HEAD, PUT, DELETE'],
    ['POST', '/sessions/{id}', 'GET, HEAD, PUT, DELETE'],
    ['DELETE', '/sessions', 'GET, HEAD, POST'],
    ['PUT', '/sessions/', 'GET, HEAD, POST'],
    ['PUT', '/sessions/{id}/messages', 'GET, HEAD, POST'],
    ['DELETE', '/sessions/{id}/messages', 'GET, HEAD, POST'],
    ['POST', '/health', 'GET, HEAD'],
    ['DELETE', '/openapi.json', 'GET, HEAD'],
  ])('%s %s is 405 method_not_allowed with Allow, and changes nothing', async (method, path, allow) => {
    const res = await fetch(`${server.url}${path.replace('{id}', sessionId)}`, {
      method,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ content: 'hi' }),
    });
    expect(res.headers.get('allow')).toBe(allow);
    await expectError(res, 405, 'method_not_allowed', null);
    const history = (await (await fetch(`${server.url}/sessions/${sessionId}/messages`)).json()) as unknown[];
    expect(history).toEqual([]);
  });

  it('OPTIONS on a known path is 204 with Allow and no body; elsewhere 404', async () => {
    for (const [path, allow] of [
      [`/sessions/${sessionId}`, 'GET, HEAD, PUT, DELETE'],
      ['/sessions', 'GET, HEAD, POST'],
      [`/sessions/${sessionId}/messages`, 'GET, HEAD, POST'],
      ['/healthz', 'GET, HEAD'],
    ] as const) {
      const res = await fetch(`${server.url}${path}`, { method: 'OPTIONS' });
      expect(res.status).toBe(204);
      expect(res.headers.get('allow')).toBe(allow);
      expect(await res.text()).toBe('');
    }
    await expectError(await fetch(`${server.url}/elsewhere`, { method: 'OPTIONS' }), 404, 'not_found');
  });

  it('matches paths without regard to case, as express routes them', async () => {
    const res = await fetch(`${server.url}/HEALTH`, { method: 'PATCH' });
    expect(res.headers.get('allow')).toBe('GET, HEAD');
    await expectError(res, 405, 'method_not_allowed', null);
    const options = await fetch(`${server.url}/Sessions/${sessionId}`, { method: 'OPTIONS' });
    expect([options.status, options.headers.get('allow')]).toEqual([204, 'GET, HEAD, PUT, DELETE']);
  });

  it('a wrong method on a path deeper than any route stays 404', async () => {
    await expectError(
      await fetch(`${server.url}/sessions/${sessionId}/messages/1`, { method: 'PATCH' }),
      404,
      'not_found',
    );
  });
});

describe('bad bytes after a request on the same connection', () => {
  // Found by `pnpm fuzz --seed 59` (case sessions:477): a DELETE pipelined behind itself with
  // "HTTP/2.0" in its request line was applied, but the client read a 400 for it.
  const statusLines = (text: string) => text.match(/HTTP\/1\.1 \d{3}/g) ?? [];
  const fresh = async () => (await request(api.app).post('/sessions').send({})).body.session_id as string;

  it('a DELETE followed by garbage is answered 204, then 400, and the session is gone', async () => {
    const port = (server.server.address() as AddressInfo).port;
    const id = await fresh();
    const exchange = await rawExchange(port, [
      `DELETE /sessions/${id} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\nNOT-HTTP at all\r\n\r\n`,
    ]);
    expect(statusLines(exchange.text)).toEqual(['HTTP/1.1 204', 'HTTP/1.1 400']);
    expect((await fetch(`${server.url}/sessions/${id}`)).status).toBe(404);
  });

  it('the fuzz case: a DELETE in "HTTP/2.0" sent twice in one write gets its 204, the last thing sent', async () => {
    const port = (server.server.address() as AddressInfo).port;
    const id = await fresh();
    const one = `DELETE /sessions/${id} HTTP/2.0\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`;
    const exchange = await rawExchange(port, [one + one]);
    expect(statusLines(exchange.text)).toEqual(['HTTP/1.1 204']);
    expect(exchange.ended).toBe('closed');
    expect((await fetch(`${server.url}/sessions/${id}`)).status).toBe(404);
  });
});
