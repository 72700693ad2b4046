import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The content a client must receive from the `mangled-stream` model: each character whole however
 * the engine split it, every byte that is not UTF-8 as U+FFFD, control characters and a U+FEFF in
 * content kept (the byte order mark the body opens with is not content).
 */
export const MANGLED_STREAM_TEXT = '>€😀a\uFFFDb\uFFFD\uFEFF\u0000\u001b\u2028';

/** What the fake engine received. */
export interface FakeRequest {
  model: string;
  body: Record<string, unknown>;
  /** Set once the gateway closed the connection before the fake finished answering. */
  aborted: boolean;
}

/**
 * A small real HTTP engine whose behaviour is chosen by the request's `model` (so one server
 * plays many catalog entries): engine error styles, broken and odd streams, hangs, 5xx.
 */
export class FakeEngine {
  readonly requests: FakeRequest[] = [];
  /** `endless-stream` answers being written now (each ends when the gateway closes its connection). */
  openStreams = 0;
  private server: Server | null = null;
  baseUrl = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => void this.handle(req, res));
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.baseUrl = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  /** A catalog entry `fake/<upstream>` served by this engine under the upstream model name `upstream`. */
  catalogEntry(upstream: string): Record<string, unknown> {
    return {
      id: `fake/${upstream}`,
      owned_by: 'test',
      created: 1767225600,
      price_per_million: { input: 1, output: 2 },
      engine: { kind: 'openai-compatible', replicas: [{ base_url: this.baseUrl, model: upstream }] },
    };
  }

  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let text = '';
    for await (const part of req) text += String(part);
    if (req.method === 'GET') return json(res, 200, { object: 'list', data: [] });
    const body = JSON.parse(text) as Record<string, unknown>;
    const record: FakeRequest = { model: String(body.model), body, aborted: false };
    this.requests.push(record);
    res.on('close', () => {
      if (!res.writableFinished) record.aborted = true;
    });
    const chunk = (delta: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      `data: ${JSON.stringify({ id: 'fake-1', object: 'chat.completion.chunk', created: 1, model: record.model, choices: [{ index: 0, delta, finish_reason: null, ...extra }] })}\n\n`;
    switch (record.model) {
      case 'flat':
        return raw(
          res,
          400,
          'application/json',
          '{"object":"error","message":"bad thing","type":"BadRequestError","param":"temperature","code":400}',
        );
      case 'text':
        return raw(res, 400, 'text/plain; charset=utf-8', 'Inference error: top_k must be at least -1');
      case 'nested':
        return json(res, 400, { error: { message: 'nested bad', type: 'BadRequestError', param: 'top_k', code: 400 } });
      case 'always-503':
        return json(res, 503, {
          object: 'error',
          message: 'overloaded',
          type: 'ServiceUnavailable',
          param: null,
          code: 503,
        });
      case 'status-401':
      case 'status-402':
      case 'status-403':
      case 'status-404':
      case 'status-413':
      case 'status-422':
      case 'status-429': {
        // An engine (or the API in front of it) refusing with its own status, vLLM's flat body.
        const status = Number(record.model.slice('status-'.length));
        if (status === 429) res.setHeader('retry-after', '3');
        return json(res, status, {
          object: 'error',
          message: `engine says ${status} (key sk-engine-secret)`,
          type: 'EngineError',
          param: null,
          code: status,
        });
      }
      case 'status-429-ms':
        res.setHeader('retry-after-ms', '250');
        return json(res, 429, { error: { message: 'slow down', type: 'rate_limit', code: 'rate_limit_exceeded' } });
      case 'status-422-nested':
        return json(res, 422, { error: { message: 'top_k: must be >= -1', type: 'ValidationError', param: 'top_k' } });
      case 'error-first-stream-429':
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        return void res.end('data: {"error":{"message":"queue full","type":"Overloaded","code":429}}\n\n');
      case 'odd-finish':
        // A finish reason outside the spec's four (TGI's, say), in a stream and in JSON.
        if (body.stream) {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(chunk({ role: 'assistant', content: '' }));
          res.write(chunk({ content: 'ok' }, { finish_reason: 'eos_token' }));
          return void res.end('data: [DONE]\n\n');
        }
        // Named by its catalog id, so the gateway would send these very bytes if the reason were fine.
        return raw(
          res,
          200,
          'application/json',
          JSON.stringify(completion(`fake/${record.model}`)).replace('"stop"', '"eos_token"'),
        );
      case 'reasoning-named': {
        // vLLM (since late 2025) and Ollama name the trace `reasoning`. The stream carries vLLM's
        // continuous usage, so its chunks would be passed through as sent if their name were fine.
        if (!body.stream) {
          const answer = completion(`fake/${record.model}`) as { choices: Array<{ message: object }> };
          answer.choices[0]!.message = { role: 'assistant', content: 'ok', reasoning: 'Let me think.' };
          return json(res, 200, answer);
        }
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const usage = (completion: number) => ({
          usage: { prompt_tokens: 5, completion_tokens: completion, total_tokens: 5 + completion },
        });
        const traced = (delta: Record<string, unknown>, extra: Record<string, unknown>) =>
          `data: ${JSON.stringify({ id: 'fake-1', object: 'chat.completion.chunk', created: 1, model: record.model, choices: [{ index: 0, delta, logprobs: null, finish_reason: null }], ...extra })}\n\n`;
        res.write(traced({ role: 'assistant', content: '', reasoning: '' }, usage(0)));
        for (let i = 1; i <= 3; i++) res.write(traced({ reasoning: `step ${i}. ` }, usage(i)));
        res.write(traced({ content: 'ok' }, usage(4)));
        res.write(chunk({}, { finish_reason: 'stop' }));
        return void res.end('data: [DONE]\n\n');
      }
      case 'usage-huge':
      case 'usage-junk':
      case 'usage-over':
      case 'usage-details': {
        // Usage no engine should send: 1e308; a negative, a fraction and a string; counts far
        // above any request's bounds; or good counts with details no client could parse. JSON, or a stream with it on a token chunk and the totals.
        const usage = BAD_USAGE[record.model];
        if (!body.stream) return json(res, 200, { ...completion(record.model), usage });
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(chunk({ role: 'assistant', content: '' }));
        res.write(
          `data: ${JSON.stringify({ id: 'fake-1', object: 'chat.completion.chunk', created: 1, model: record.model, choices: [{ index: 0, delta: { content: 'ok' }, logprobs: null, finish_reason: null }], usage })}\n\n`,
        );
        res.write(chunk({}, { finish_reason: 'stop' }));
        res.write(
          `data: ${JSON.stringify({ id: 'fake-1', object: 'chat.completion.chunk', created: 1, model: record.model, choices: [], usage })}\n\n`,
        );
        return void res.end('data: [DONE]\n\n');
      }
      case 'deep-json': {
        // 100,000 levels of arrays in a tool call: JSON.parse takes them, JSON.stringify overflows.
        const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
        const body = JSON.stringify(completion(record.model)).replace('"content":"ok"', `"content":"ok","x":${deep}`);
        return raw(res, 200, 'application/json', body);
      }
      case 'hang':
        return; // never answers
      case 'json-for-stream':
        return json(res, 200, completion(record.model)); // ignores stream: true
      case 'silent-stream':
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.flushHeaders();
        return; // headers, then nothing
      case 'record':
        if (body.stream) {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(chunk({ role: 'assistant', content: '' }));
          res.write(chunk({ content: 'ok' }, { finish_reason: 'stop' }));
          return void res.end('data: [DONE]\n\n');
        }
        return json(res, 200, completion(record.model));
      case 'odd-stream':
        // No role chunk, no usage anywhere, content and finish in one chunk.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(chunk({ content: 'Hello' }));
        res.write(chunk({ content: ' there' }));
        res.write(chunk({ content: ' friend' }, { finish_reason: 'stop' }));
        return void res.end('data: [DONE]\n\n');
      case 'tool-stream':
        // A tool call in 8 one-token pieces, and no usage anywhere (the gateway counts it).
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(chunk({ role: 'assistant', content: null }));
        res.write(
          chunk({
            tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'get', arguments: '' } }],
          }),
        );
        for (const piece of ['{"', 'city', '":"', 'Par', 'is', '"}', '\n']) {
          res.write(chunk({ tool_calls: [{ index: 0, function: { arguments: piece } }] }));
        }
        res.write(chunk({}, { finish_reason: 'tool_calls' }));
        return void res.end('data: [DONE]\n\n');
      case 'cut-stream':
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(chunk({ role: 'assistant', content: '' }));
        res.write(chunk({ content: 'Hello' }));
        res.write(chunk({ content: ' there' }));
        setTimeout(() => res.destroy(), 30);
        return;
      case 'error-first-stream':
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        return void res.end(
          'data: {"error":{"message":"prompt too long","type":"BadRequestError","param":"messages","code":400}}\n\n',
        );
      case 'error-mid-stream':
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(chunk({ role: 'assistant', content: '' }));
        res.write(chunk({ content: 'Hel' }));
        return void res.end(
          'data: {"error":{"message":"engine ran out of memory","type":"InternalServerError","code":500}}\n\n',
        );
      case 'slow-stream': {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(chunk({ role: 'assistant', content: '' }));
        const timer = setInterval(() => res.write(chunk({ content: ' word' })), 10);
        res.on('close', () => clearInterval(timer));
        return;
      }
      case 'huge-json': {
        // A completion body of about 256 KiB, sent in pieces without a length.
        res.writeHead(200, { 'content-type': 'application/json' });
        const text = JSON.stringify(completion(record.model)).replace('"ok"', `"${'x'.repeat(256 * 1024)}"`);
        for (let at = 0; at < text.length; at += 16 * 1024) res.write(text.slice(at, at + 16 * 1024));
        return void res.end();
      }
      case 'huge-error':
        return raw(res, 400, 'text/plain', `Inference error: ${'y'.repeat(256 * 1024)}`);
      case 'huge-event': {
        // One event that never ends: data lines keep coming without the blank line.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const timer = setInterval(() => res.write(`data: ${'z'.repeat(16 * 1024)}\n`), 1);
        res.on('close', () => clearInterval(timer));
        return;
      }
      case 'confetti-stream': {
        // A whole stream (20 tokens, usage, [DONE]) with every byte an HTTP chunk of its own, all in
        // one socket write: thousands of chunks in one read, written by hand on the socket.
        const usage = { prompt_tokens: 3, completion_tokens: 20, total_tokens: 23 };
        const events = [
          chunk({ role: 'assistant', content: '' }, {}),
          ...Array.from({ length: 20 }, (_, i) => chunk({ content: ` w${i}` })),
          chunk({}, { finish_reason: 'stop' }),
          `data: ${JSON.stringify({ id: 'fake-1', object: 'chat.completion.chunk', created: 1, model: record.model, choices: [], usage })}\n\n`,
          'data: [DONE]\n\n',
        ].join('');
        const pieces = Array.from(Buffer.from(events), (byte) => `1\r\n${String.fromCharCode(byte)}\r\n`).join('');
        res.socket?.end(
          'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n' +
            `${pieces}0\r\n\r\n`,
          'latin1',
        );
        return;
      }
      case 'mangled-stream': {
        // A byte order mark split over the first two writes, characters split between socket writes
        // (each write its own read at the gateway), bytes that are not UTF-8, control characters,
        // U+FEFF and U+2028 in content; then a proper end.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const event = (content: string) => Buffer.from(chunk({ content }));
        const euro = event('€');
        const emoji = event('😀');
        const separator = event('\uFEFF\u0000\u001b\u2028');
        // "a", 0xff (never UTF-8), "b", 0xc3 (a lead byte whose next byte is the closing quote).
        const [head, tail] = chunk({ content: '\u0001' }).split('\\u0001') as [string, string];
        const notUtf8 = Buffer.concat([Buffer.from(head), Buffer.from([0x61, 0xff, 0x62, 0xc3]), Buffer.from(tail)]);
        const at = (bytes: Buffer, char: string, offset: number) => bytes.indexOf(Buffer.from(char)) + offset;
        const writes = [
          Buffer.from([0xef]),
          Buffer.concat([Buffer.from([0xbb, 0xbf]), Buffer.from(chunk({ role: 'assistant', content: '>' }))]),
          euro.subarray(0, at(euro, '€', 1)),
          euro.subarray(at(euro, '€', 1)),
          emoji.subarray(0, at(emoji, '😀', 1)),
          emoji.subarray(at(emoji, '😀', 1), at(emoji, '😀', 3)),
          emoji.subarray(at(emoji, '😀', 3)),
          notUtf8,
          separator.subarray(0, at(separator, '\u2028', 1)),
          separator.subarray(at(separator, '\u2028', 1)),
          chunk({}, { finish_reason: 'stop' }),
          'data: [DONE]\n\n',
        ];
        for (const piece of writes) {
          if (res.destroyed) return;
          res.write(piece);
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        return void res.end();
      }
      case 'endless-stream': {
        // Regular chunks, forever.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(chunk({ role: 'assistant', content: '' }));
        const timer = setInterval(() => res.write(chunk({ content: 'w'.repeat(4096) })), 1);
        this.openStreams += 1;
        res.on('close', () => {
          clearInterval(timer);
          this.openStreams -= 1;
        });
        return;
      }
      default:
        return json(res, 404, {
          object: 'error',
          message: `no model ${record.model}`,
          type: 'NotFoundError',
          param: null,
          code: 404,
        });
    }
  }
}

/** The usage the `usage-*` models send. */
const BAD_USAGE: Record<string, unknown> = {
  'usage-huge': { prompt_tokens: 1e308, completion_tokens: 1e308, total_tokens: 1e308 },
  'usage-junk': { prompt_tokens: -5, completion_tokens: 1.5, total_tokens: 'lots' },
  'usage-over': { prompt_tokens: 2 ** 40, completion_tokens: 2 ** 40, total_tokens: 2 ** 41 },
  'usage-details': {
    prompt_tokens: 8,
    completion_tokens: 1,
    total_tokens: 9,
    prompt_tokens_details: 'cached',
    completion_tokens_details: { reasoning_tokens: 'lots' },
  },
};

function completion(model: string): Record<string, unknown> {
  return {
    id: 'fake-1',
    object: 'chat.completion',
    created: 1,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, logprobs: null, finish_reason: 'stop' }],
    usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 },
  };
}

function json(res: ServerResponse, status: number, value: unknown): void {
  raw(res, status, 'application/json', JSON.stringify(value));
}

function raw(res: ServerResponse, status: number, contentType: string, body: string): void {
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
