import { SessionErrorResponse } from '@tollway/contracts';
import { Redis } from 'ioredis';
import { streamKeys } from '../../src/store/event-log-keys';
import { answerChat, sendStream, startTestServer, waitFor } from '../worker/worker-harness';
import {
  auth,
  deltaText,
  KEYS,
  orgAuthenticator,
  send,
  sleep,
  startStreamPlatform,
  StreamReader,
  type StreamPlatform,
} from './stream-harness';

jest.setTimeout(60_000);

const REPLY = 'Streams are how agents show their work: token by token, as it is written. ✓';
let platform: StreamPlatform;
let url: string;
let redis: Redis;

beforeAll(async () => {
  platform = await startStreamPlatform({ events: { heartbeatMs: 200 } });
  url = platform.replicas[0]!.url;
  redis = new Redis('redis://127.0.0.1:6379');
});

afterAll(async () => {
  await platform.close();
  await redis.quit();
});

beforeEach(() => {
  platform.reply = (request, res) => answerChat(request, res, REPLY, 17, { paceMs: 2 });
});

describe('GET /sessions/{id}/events', () => {
  it("gives a turn's events in order: started, deltas that concatenate to the response, completed", async () => {
    const sessionId = await platform.createSession();
    const reader = await StreamReader.open(`${url}/sessions/${sessionId}/events`);
    expect(reader.response.status).toBe(200);
    expect(reader.response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(reader.response.headers.get('cache-control')).toBe('no-cache, no-transform');
    expect((await send(url, sessionId, 'stream me')).status).toBe(202);
    const events = await reader.rest();

    expect(events[0]!.event.type).toBe('turn.started');
    const last = events.at(-1)!.event;
    expect(last.type).toBe('turn.completed');
    if (last.type !== 'turn.completed') return;
    expect(last.response).toEqual({
      session_id: sessionId,
      status: 'idle',
      response: { role: 'assistant', content: REPLY },
      error: null,
    });
    expect(last.trace_metrics).toMatchObject({ trace_id: null, total_tokens: 17, has_error: false });
    expect(deltaText(events)).toBe(REPLY);
    // The session reads as the event says, and every event is the turn's, ids strictly rising.
    const session = await (await fetch(`${url}/sessions/${sessionId}`)).json();
    expect(session).toEqual(last.response);
    expect(new Set(events.map(({ event }) => 'turn_id' in event && event.turn_id)).size).toBe(1);
    const ids = events.map(({ id }) => id!);
    expect([...ids].sort(compareIds)).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
    // Batched: far fewer deltas than the gateway's chunks (one per three characters).
    const deltas = events.filter(({ event }) => event.type === 'message.delta').length;
    expect(deltas).toBeLessThan(REPLY.length / 3);
  });

  it('follows the session across turns with follow=true, and ends with turn.cancelled when it is deleted', async () => {
    const sessionId = await platform.createSession();
    const reader = await StreamReader.open(`${url}/sessions/${sessionId}/events?follow=true`);
    await send(url, sessionId, 'one');
    const first = await reader.until('turn.completed');
    await send(url, sessionId, 'two');
    const second = await reader.until('turn.completed');
    expect(first.event).not.toEqual(second.event);
    expect((await fetch(`${url}/sessions/${sessionId}`, { method: 'DELETE' })).status).toBe(204);
    const rest = await reader.rest();
    expect(rest.at(-1)!.event).toEqual({
      type: 'turn.cancelled',
      session_id: sessionId,
      turn_id: null,
      error: 'turn cancelled: session deleted',
    });
    expect(rest.filter(({ event }) => event.type === 'turn.started')).toHaveLength(2);
  });

  it('sends a heartbeat comment while nothing happens', async () => {
    const sessionId = await platform.createSession();
    const response = await fetch(`${url}/sessions/${sessionId}/events`);
    const body = response.body!.getReader();
    let text = '';
    while (!text.includes(': keep-alive\n\n')) text += new TextDecoder().decode((await body.read()).value);
    // Before it: retry, and the id-only frame of where the stream starts.
    expect(text).toMatch(/^retry: 1000\nid: \d+-\d+\n\n/);
    await body.cancel();
  });

  it('answers HEAD with the head alone, and OPTIONS with the methods', async () => {
    const sessionId = await platform.createSession();
    const head = await fetch(`${url}/sessions/${sessionId}/events`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const options = await fetch(`${url}/sessions/${sessionId}/events`, { method: 'OPTIONS' });
    expect(options.status).toBe(204);
    expect(options.headers.get('allow')).toBe('GET, HEAD');
    const post = await fetch(`${url}/sessions/${sessionId}/events`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(await post.json()).toMatchObject({ error: { code: 'method_not_allowed' } });
  });

  it('is 404 in the error shape for an unknown, malformed or deleted session', async () => {
    const deleted = await platform.createSession();
    await fetch(`${url}/sessions/${deleted}`, { method: 'DELETE' });
    for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid', '%zz', deleted]) {
      const response = await fetch(`${url}/sessions/${id}/events`);
      expect(response.status).toBe(404);
      expect(SessionErrorResponse.parse(await response.json()).error.code).toBe('session_not_found');
    }
  });

  it('refuses a bad follow, and a Last-Event-ID or last_event_id that is not an event id, with 400', async () => {
    const sessionId = await platform.createSession();
    const cases: Array<[string, Record<string, string>, string]> = [
      ['?follow=yes', {}, 'follow'],
      ['?follow=1&follow=0', {}, 'follow'],
      ['', { 'last-event-id': 'abc' }, 'Last-Event-ID'],
      ['', { 'last-event-id': '1-2-3' }, 'Last-Event-ID'],
      ['', { 'last-event-id': '18446744073709551616-0' }, 'Last-Event-ID'],
      ['', { 'last-event-id': `${'9'.repeat(21)}-0` }, 'Last-Event-ID'],
      ['?last_event_id=-1-0', {}, 'last_event_id'],
      ['?last_event_id=1-0&last_event_id=2-0', {}, 'last_event_id'],
    ];
    for (const [query, headers, param] of cases) {
      const response = await fetch(`${url}/sessions/${sessionId}/events${query}`, { headers });
      expect([query, response.status]).toEqual([query, 400]);
      expect(SessionErrorResponse.parse(await response.json()).error).toMatchObject({ code: 'invalid_request', param });
    }
  });

  it('tells a client resuming from an id the log does not hold that events may be lost, then goes on', async () => {
    const sessionId = await platform.createSession();
    // An id far in the future, and an id of the log's first position that was never written.
    for (const id of ['18446744073709551615-18446744073709551615', '1-5']) {
      const reader = await StreamReader.open(`${url}/sessions/${sessionId}/events?last_event_id=${id}`);
      await send(url, sessionId, 'after a gap');
      const events = await reader.rest();
      expect(events[0]!.event).toEqual({ type: 'stream.truncated', session_id: sessionId, last_event_id: id });
      expect(events[0]!.id).toBeNull();
      expect(events.at(-1)!.event.type).toBe('turn.completed');
    }
  });

  it('writes nothing to Redis for a turn no one reads', async () => {
    const sessionId = await platform.createSession();
    expect((await send(url, sessionId, 'unread')).status).toBe(202);
    const done = await fetch(`${url}/sessions/${sessionId}?wait=true&timeout=10`);
    expect(((await done.json()) as { status: string }).status).toBe('idle');
    const keys = streamKeys(platform.prefix);
    expect(await redis.exists(keys.events(sessionId), keys.watch(sessionId))).toBe(0);
  });
});

describe('a reader that comes mid-turn', () => {
  it('gets the turn from its start: turn.started at once, the text of the call no one was reading when it ends, exactly', async () => {
    const sessionId = await platform.createSession();
    const long = 'x'.repeat(50) + REPLY + 'y'.repeat(50);
    platform.reply = (request, res) => answerChat(request, res, long, 9, { paceMs: 10, pieceChars: 2 });
    await send(url, sessionId, 'go');
    await sleep(200);
    const reader = await StreamReader.open(`${url}/sessions/${sessionId}/events`);
    // The worker hears of the reader and writes what it holds (the turn's start) at once; the
    // model call, made whole since no one read when it began, comes in one delta when it ends.
    expect((await reader.next())?.event.type).toBe('turn.started');
    const now = (await (await fetch(`${url}/sessions/${sessionId}`)).json()) as { status: string };
    expect(now.status).toBe('running');
    const events = await reader.rest();
    const deltas = events.filter(({ event }) => event.type === 'message.delta');
    expect(deltas).toHaveLength(1);
    expect(deltaText(events)).toBe(long);
    expect(events.at(-1)!.event.type).toBe('turn.completed');
    // Its model call was made whole: no one read when it began.
    expect((platform.gateway.received.at(-1)?.json as { stream?: boolean }).stream).toBe(false);
  });

  it('that joins a turn another reader streams reads it from its start too (its own catch-up, then the shared read)', async () => {
    const sessionId = await platform.createSession();
    const long = 'z'.repeat(60) + REPLY;
    platform.reply = (request, res) => answerChat(request, res, long, 9, { paceMs: 10, pieceChars: 2 });
    const early = await StreamReader.open(`${url}/sessions/${sessionId}/events`);
    await send(url, sessionId, 'go');
    await early.until('message.delta');
    await sleep(300);
    const late = await StreamReader.open(`${url}/sessions/${sessionId}/events`);
    const [all, joined] = await Promise.all([early.rest(), late.rest()]);
    expect(joined).toEqual(all);
    expect(deltaText(joined)).toBe(long);
  });
});

describe('POST /sessions/{id}/messages with Accept: text/event-stream', () => {
  it("answers with the turn's stream, from turn.started to turn.completed, with Location", async () => {
    const sessionId = await platform.createSession();
    const reader = await StreamReader.open(`${url}/sessions/${sessionId}/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ content: 'stream the answer' }),
    });
    expect(reader.response.status).toBe(200);
    expect(reader.response.headers.get('location')).toBe(`/sessions/${sessionId}`);
    const events = await reader.rest();
    expect(events.map(({ event }) => event.type)).toEqual([
      'turn.started',
      ...events.slice(1, -1).map(() => 'message.delta'),
      'turn.completed',
    ]);
    expect(deltaText(events)).toBe(REPLY);
  });

  it.each([['application/json'], ['*/*'], [''], ['application/json, text/event-stream'], ['text/event-stream;q=0']])(
    'keeps the 202 for Accept %j',
    async (accept) => {
      const sessionId = await platform.createSession();
      const response = await fetch(`${url}/sessions/${sessionId}/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(accept ? { accept } : {}) },
        body: JSON.stringify({ content: 'plain' }),
      });
      expect(response.status).toBe(202);
      expect(await response.json()).toEqual({ session_id: sessionId, status: 'running' });
      await fetch(`${url}/sessions/${sessionId}?wait=true&timeout=10`);
    },
  );

  it('refuses as a plain send does, in the error shape: 404, 409, 400', async () => {
    const headers = { 'content-type': 'application/json', accept: 'text/event-stream' };
    const missing = await fetch(`${url}/sessions/00000000-0000-4000-8000-000000000000/messages`, {
      method: 'POST',
      headers,
      body: '{"content":"x"}',
    });
    expect(missing.status).toBe(404);
    const sessionId = await platform.createSession();
    platform.reply = (request, res) => answerChat(request, res, REPLY, 9, { paceMs: 20 });
    await send(url, sessionId, 'first');
    const busy = await fetch(`${url}/sessions/${sessionId}/messages`, { method: 'POST', headers, body: '{}' });
    expect(busy.status).toBe(409);
    expect(SessionErrorResponse.parse(await busy.json()).error.code).toBe('session_busy');
    const bad = await fetch(`${url}/sessions/${sessionId}/messages`, { method: 'POST', headers, body: '{"role":7}' });
    expect(bad.status).toBe(400);
    await fetch(`${url}/sessions/${sessionId}?wait=true&timeout=10`);
  });
});

describe('a failing turn', () => {
  it('ends with turn.failed carrying the session as it reads, and trace_metrics with has_error', async () => {
    const sessionId = await platform.createSession();
    platform.reply = (_request, res) =>
      res.writeHead(400, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          error: { message: 'bad sampling', type: 'invalid_request_error', param: null, code: null },
        }),
      );
    const reader = await StreamReader.open(`${url}/sessions/${sessionId}/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: '{"content":"fail"}',
    });
    const events = await reader.rest();
    const last = events.at(-1)!.event;
    expect(last).toMatchObject({
      type: 'turn.failed',
      response: { session_id: sessionId, status: 'error', response: null, error: 'bad sampling' },
      trace_metrics: { has_error: true, total_tokens: 0 },
    });
  });
});

describe('organizations', () => {
  let scoped: StreamPlatform;

  beforeAll(async () => {
    scoped = await startStreamPlatform({
      replicaOptions: { authenticator: orgAuthenticator, allowCustomIds: true },
      events: { maxStreamsPerOrg: 3 },
    });
    scoped.reply = (_request, res) => sendStream(res, REPLY, 9);
  });

  afterAll(() => scoped.close());

  it("never shows one organization another's session: 404, as on every endpoint; no key is 401", async () => {
    const base = scoped.replicas[0]!.url;
    const sessionId = await scoped.createSession(KEYS.a);
    const other = await fetch(`${base}/sessions/${sessionId}/events`, { headers: auth(KEYS.b) });
    expect(other.status).toBe(404);
    const sendOther = await fetch(`${base}/sessions/${sessionId}/messages`, {
      method: 'POST',
      headers: { ...auth(KEYS.b), accept: 'text/event-stream', 'content-type': 'application/json' },
      body: '{}',
    });
    expect(sendOther.status).toBe(404);
    expect((await fetch(`${base}/sessions/${sessionId}/events`)).status).toBe(401);
    const own = await StreamReader.open(`${base}/sessions/${sessionId}/events`, { headers: auth(KEYS.a) });
    expect(own.response.status).toBe(200);
    own.close();
  });

  it("never shows a session's events to another organization that makes a session of the same id after its deletion", async () => {
    const base = scoped.replicas[0]!.url;
    const id = '7d8f3a2e-1b4c-4e5f-9a6b-0c1d2e3f4a5b';
    const put = (key: string) => fetch(`${base}/sessions/${id}`, { method: 'PUT', headers: auth(key) });
    expect((await put(KEYS.a)).status).toBe(201);
    const theirs = await StreamReader.open(`${base}/sessions/${id}/events?follow=true`, { headers: auth(KEYS.a) });
    await send(base, id, 'secret of org a', KEYS.a);
    const { event: ended } = await theirs.until('turn.completed');
    expect((await fetch(`${base}/sessions/${id}`, { method: 'DELETE', headers: auth(KEYS.a) })).status).toBe(204);
    await theirs.rest();
    // The log of the deleted session is kept a while for its readers; another organization takes the id.
    expect((await put(KEYS.b)).status).toBe(201);
    const mine = await StreamReader.open(`${base}/sessions/${id}/events?last_event_id=0-0`, { headers: auth(KEYS.b) });
    await send(base, id, 'mine', KEYS.b);
    const events = await mine.rest();
    const turns = new Set(events.map(({ event }) => ('turn_id' in event ? event.turn_id : null)));
    expect(turns.size).toBe(1);
    expect(turns.has(ended.type === 'turn.completed' ? ended.turn_id : '')).toBe(false);
    expect(events.map(({ event }) => event.type)).not.toContain('turn.cancelled');
    expect(events.at(-1)!.event.type).toBe('turn.completed');
  });

  it("caps one organization's open streams on a process (429), and leaves another's untouched", async () => {
    const base = scoped.replicas[0]!.url;
    const a = await scoped.createSession(KEYS.a);
    const b = await scoped.createSession(KEYS.b);
    const open = await Promise.all(
      [0, 1, 2].map(() => StreamReader.open(`${base}/sessions/${a}/events`, { headers: auth(KEYS.a) })),
    );
    expect(open.map((reader) => reader.response.status)).toEqual([200, 200, 200]);
    const refused = await fetch(`${base}/sessions/${a}/events`, { headers: auth(KEYS.a) });
    expect(refused.status).toBe(429);
    expect(SessionErrorResponse.parse(await refused.json()).error.code).toBe('too_many_streams');
    // Another organization streams meanwhile, and gets its turn.
    const theirs = await StreamReader.open(`${base}/sessions/${b}/events`, { headers: auth(KEYS.b) });
    expect(theirs.response.status).toBe(200);
    await send(base, b, 'mine', KEYS.b);
    expect(deltaText(await theirs.rest())).toBe(REPLY);
    // A stream that ends gives its slot back.
    open[0]!.close();
    const again = await waitFor(async () => {
      const reader = await StreamReader.open(`${base}/sessions/${a}/events`, { headers: auth(KEYS.a) });
      if (reader.response.status === 200) return reader;
      await reader.response.body?.cancel();
      return false;
    });
    for (const reader of [...open, again]) reader.close();
  });
});

describe('a deletion mid-stream', () => {
  it('ends the stream with turn.cancelled, and the turn webhook says the same of the same turn', async () => {
    const hooks: Array<{ id: string; body: unknown }> = [];
    const receiver = await startTestServer((request, res) => {
      hooks.push({ id: String(request.headers['webhook-id']), body: request.json });
      res.writeHead(204).end();
    });
    try {
      const sessionId = await platform.createSession();
      platform.reply = (request, res) => answerChat(request, res, 'w'.repeat(400), 9, { paceMs: 10 });
      const reader = await StreamReader.open(`${url}/sessions/${sessionId}/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ content: 'long', webhook: { url: receiver.url } }),
      });
      const started = await reader.until('message.delta');
      expect((await fetch(`${url}/sessions/${sessionId}`, { method: 'DELETE' })).status).toBe(204);
      const events = await reader.rest();
      const last = events.at(-1)!.event;
      expect(last).toEqual({
        type: 'turn.cancelled',
        session_id: sessionId,
        turn_id: started.event.type === 'message.delta' ? started.event.turn_id : '',
        error: 'turn cancelled: session deleted',
      });
      await waitFor(() => hooks.length === 1, 10_000);
      expect(hooks[0]).toEqual({
        id: `msg_${last.type === 'turn.cancelled' ? last.turn_id : ''}`,
        body: expect.objectContaining({
          session_id: sessionId,
          status: 'error',
          error: last.type === 'turn.cancelled' ? last.error : '',
        }),
      });
      // Its stream is gone with it: a client that comes back gets 404.
      const again = await fetch(`${url}/sessions/${sessionId}/events`, {
        headers: { 'last-event-id': events.at(-1)!.id! },
      });
      expect(again.status).toBe(404);
    } finally {
      await receiver.close();
    }
  });
});

function compareIds(a: string, b: string): number {
  const [am, as] = a.split('-').map(BigInt) as [bigint, bigint];
  const [bm, bs] = b.split('-').map(BigInt) as [bigint, bigint];
  return am === bm ? Number(as - bs) : am < bm ? -1 : 1;
}
