import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  sendMessageStreaming,
  SessionEventsError,
  streamSessionEvents,
  type ReceivedSessionEvent,
} from './session-events-client';

// The client against a real HTTP server that plays the session service: it cuts streams, refuses,
// and checks what each reconnection asks for.
const session_id = '0b6c3c3e-5d7a-4f0e-9a53-2f4d7a1c9e11';
const turn_id = 'turn-1';
const started = { type: 'turn.started', session_id, turn_id };
const delta = (content: string) => ({ type: 'message.delta', session_id, turn_id, message_index: 0, content });
const completed = {
  type: 'turn.completed',
  session_id,
  turn_id,
  response: { session_id, status: 'idle', response: { role: 'assistant', content: 'abc' }, error: null },
  trace_metrics: { trace_id: null, total_duration: 0.1, total_tokens: 3, has_error: false },
};
const frame = (id: string, event: { type: string }) =>
  `id: ${id}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;
let handlers: Handler[] = [];
const seen: Array<{
  method: string;
  url: string;
  lastEventId: string | undefined;
  auth: string | undefined;
  body: string;
}> = [];
let server: http.Server;
let baseUrl: string;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      seen.push({
        method: req.method!,
        url: req.url!,
        lastEventId: req.headers['last-event-id'] as string | undefined,
        auth: req.headers.authorization,
        body,
      });
      const handler = handlers.shift();
      if (handler) handler(req, res, body);
      else res.writeHead(500).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

beforeEach(() => {
  handlers = [];
  seen.length = 0;
});

const sse = (res: ServerResponse) => res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
/** Writes `text`, then cuts the connection once it has gone. */
const cutAfter = (res: ServerResponse, text: string) => {
  sse(res);
  res.write(text, () => setTimeout(() => res.socket?.destroy(), 20));
};

async function collect(events: AsyncIterable<ReceivedSessionEvent>): Promise<ReceivedSessionEvent[]> {
  const out: ReceivedSessionEvent[] = [];
  for await (const event of events) out.push(event);
  return out;
}

describe('streamSessionEvents', () => {
  it('resumes a cut stream with Last-Event-ID, so each event comes once, and ends with the turn', async () => {
    handlers = [
      (_req, res) =>
        cutAfter(res, `retry: 10\nid: 1-0\n\n${frame('2-0', started)}${frame('3-0', delta('a'))}id: 4-0\nda`),
      (_req, res) => cutAfter(res, ''),
      (_req, res) => {
        sse(res);
        res.end(`${frame('4-0', delta('bc'))}${frame('5-0', completed)}`);
      },
    ];
    const got = await collect(streamSessionEvents({ baseUrl, sessionId: session_id, apiKey: 'k' }));
    expect(got.map(({ id, event }) => [id, event.type])).toEqual([
      ['2-0', 'turn.started'],
      ['3-0', 'message.delta'],
      ['4-0', 'message.delta'],
      ['5-0', 'turn.completed'],
    ]);
    expect(seen.map((request) => [request.url, request.lastEventId, request.auth])).toEqual([
      [`/sessions/${session_id}/events`, undefined, 'Bearer k'],
      [`/sessions/${session_id}/events`, '3-0', 'Bearer k'],
      [`/sessions/${session_id}/events`, '3-0', 'Bearer k'],
    ]);
  });

  it('follows across turns with follow, until turn.cancelled', async () => {
    handlers = [
      (_req, res) => {
        sse(res);
        const cancelled = {
          type: 'turn.cancelled',
          session_id,
          turn_id: null,
          error: 'turn cancelled: session deleted',
        };
        res.end(`${frame('1-0', completed)}${frame('2-0', started)}${frame('3-0', cancelled)}`);
      },
    ];
    const got = await collect(
      streamSessionEvents({ baseUrl, sessionId: session_id, follow: true, lastEventId: '0-1' }),
    );
    expect(got.map(({ event }) => event.type)).toEqual(['turn.completed', 'turn.started', 'turn.cancelled']);
    expect(seen[0]).toMatchObject({ url: `/sessions/${session_id}/events?follow=true`, lastEventId: '0-1' });
  });

  it('throws a refusal with its status and envelope, without trying again', async () => {
    const envelope = {
      error: {
        message: 'Session x not found.',
        type: 'invalid_request_error',
        param: 'session_id',
        code: 'session_not_found',
      },
    };
    handlers = [
      (_req, res) => res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify(envelope)),
    ];
    const failure = collect(streamSessionEvents({ baseUrl, sessionId: session_id }));
    await expect(failure).rejects.toBeInstanceOf(SessionEventsError);
    await expect(failure).rejects.toMatchObject({ status: 404, body: envelope, message: 'Session x not found.' });
    expect(seen).toHaveLength(1);
  });

  it('tries a 503 again, and gives up after maxReconnects cuts in a row', async () => {
    handlers = [
      (_req, res) => res.writeHead(503).end('{}'),
      (_req, res) => {
        sse(res);
        res.end(frame('1-0', completed));
      },
    ];
    const ok = await collect(streamSessionEvents({ baseUrl, sessionId: session_id, reconnectDelayMs: 5 }));
    expect(ok).toHaveLength(1);
    handlers = Array.from(
      { length: 10 },
      () => (_req: IncomingMessage, res: ServerResponse) => cutAfter(res, ': hi\n\n'),
    );
    await expect(
      collect(streamSessionEvents({ baseUrl, sessionId: session_id, maxReconnects: 2, reconnectDelayMs: 5 })),
    ).rejects.toThrow(/broke 3 times in a row/);
  });

  it('skips event types it does not know, and stops when its signal aborts', async () => {
    const abort = new AbortController();
    handlers = [
      (_req, res) => {
        sse(res);
        res.write(`event: future.thing\ndata: {}\n\n${frame('1-0', started)}`);
      },
    ];
    const got: string[] = [];
    await expect(
      (async () => {
        for await (const { event } of streamSessionEvents({ baseUrl, sessionId: session_id, signal: abort.signal })) {
          got.push(event.type);
          abort.abort();
        }
      })(),
    ).rejects.toThrow();
    expect(got).toEqual(['turn.started']);
  });
});

describe('sendMessageStreaming', () => {
  it('sends the message once; a cut stream resumes through GET /events', async () => {
    handlers = [
      (_req, res) => cutAfter(res, `retry: 10\nid: 7-0\n\n${frame('8-0', started)}`),
      (_req, res) => {
        sse(res);
        res.end(`${frame('9-0', delta('abc'))}${frame('10-0', completed)}`);
      },
    ];
    const got = await collect(sendMessageStreaming({ baseUrl, sessionId: session_id, message: { content: 'hi' } }));
    expect(got.map(({ event }) => event.type)).toEqual(['turn.started', 'message.delta', 'turn.completed']);
    expect(seen.map(({ method, url, lastEventId }) => [method, url, lastEventId])).toEqual([
      ['POST', `/sessions/${session_id}/messages`, undefined],
      ['GET', `/sessions/${session_id}/events`, '8-0'],
    ]);
    expect(JSON.parse(seen[0]!.body)).toEqual({ content: 'hi' });
  });

  it('throws a refused send (409) at once: sending again could run the turn twice', async () => {
    handlers = [
      (_req, res) => res.writeHead(409, { 'content-type': 'application/json' }).end('{"error":{"message":"busy"}}'),
    ];
    await expect(collect(sendMessageStreaming({ baseUrl, sessionId: session_id, message: {} }))).rejects.toMatchObject({
      status: 409,
    });
    expect(seen).toHaveLength(1);
  });

  it('throws when the service answers a send with JSON (it does not stream)', async () => {
    handlers = [(_req, res) => res.writeHead(202, { 'content-type': 'application/json' }).end('{}')];
    await expect(collect(sendMessageStreaming({ baseUrl, sessionId: session_id, message: {} }))).rejects.toThrow(
      /did not answer with an event stream/,
    );
  });
});
