import { gzipSync } from 'node:zlib';
import { once } from 'node:events';
import { connect, type AddressInfo } from 'node:net';
import { rawExchange } from '@tollway/service-kit/testing';
import { FakeEngine, MANGLED_STREAM_TEXT } from './helpers/fake-engine';
import { catalogModels, ssePayloads, startGateway, TEST_KEY, type GatewayHarness } from './helpers/gateway-harness';
import { waitFor } from './helpers/wait-for';

// Hostile input against a real gateway (issue 10): every answer is a 4xx in the spec's shape or a
// clean close, and the gateway keeps serving. Bounds are in src/README.md and the contracts.
describe('gateway hardening', () => {
  let gateway: GatewayHarness;
  let engine: FakeEngine;
  let port: number;
  const auth = { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' };
  const hi = [{ role: 'user', content: 'hi' }];
  const chat = (body: unknown, headers: Record<string, string> = auth) =>
    fetch(`${gateway.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers,
      body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body),
    });
  const sim = (id: string, extra: Record<string, unknown> = {}) => ({
    id,
    owned_by: 'test',
    created: 1767225600,
    price_per_million: { input: 1, output: 1 },
    engine: { kind: 'simulated', time_to_first_token_ms: 0, time_per_output_token_ms: 0, max_model_len: 2048 },
    ...extra,
  });

  beforeAll(async () => {
    engine = new FakeEngine();
    await engine.start();
    gateway = await startGateway(
      catalogModels([
        sim('tollway/sim-chat'),
        sim('tollway/sim-few', { max_n: 4, context_length: 1000 }),
        engine.catalogEntry('huge-json'),
        engine.catalogEntry('huge-error'),
        engine.catalogEntry('huge-event'),
        engine.catalogEntry('endless-stream'),
        engine.catalogEntry('cut-stream'),
        engine.catalogEntry('confetti-stream'),
        engine.catalogEntry('mangled-stream'),
      ]),
      {
        env: {
          MAX_ENGINE_RESPONSE_BYTES: '65536',
          MAX_ENGINE_EVENT_BYTES: '65536',
          MAX_ENGINE_STREAM_BYTES: '1048576',
          HTTP_REQUEST_TIMEOUT_MS: '1000',
        },
      },
    );
    port = (gateway.server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    await gateway.close();
    await engine.close();
  });

  afterEach(async () => {
    // Whatever the case did, the gateway still answers.
    const res = await chat({ model: 'tollway/sim-chat', messages: hi, max_tokens: 4 });
    expect(res.status).toBe(200);
  });

  const expectFlat = async (res: Response, param: string | null) => {
    expect(res.status).toBe(400);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ object: 'error', type: 'BadRequestError', code: 400, param });
  };
  const expectEnvelope = async (res: Response, status: number, code: string) => {
    expect(res.status).toBe(status);
    const body = (await res.json()) as { error: Record<string, unknown> };
    expect(body.error).toMatchObject({ code, type: expect.any(String), message: expect.any(String) });
  };

  describe('the issue reproductions', () => {
    it('n = 100 000 000 is a 400 on n, before any work', async () => {
      await expectFlat(await chat({ model: 'tollway/sim-chat', n: 100_000_000, messages: hi }), 'n');
    });

    it('n = 2^31 on a stream is a 400 on n', async () => {
      await expectFlat(await chat({ model: 'tollway/sim-chat', n: 2147483648, stream: true, messages: hi }), 'n');
    });
  });

  describe('bounds of the request', () => {
    const many = <T>(count: number, make: (i: number) => T): T[] => Array.from({ length: count }, (_, i) => make(i));
    it.each([
      ['n over the wire bound', { n: 129 }, 'n'],
      ['n over the model max_n', { model: 'tollway/sim-few', n: 5 }, 'n'],
      ['top_logprobs over 20', { logprobs: true, top_logprobs: 21 }, 'top_logprobs'],
      [
        'logit_bias over 300 entries',
        { logit_bias: Object.fromEntries(many(301, (i) => [String(i), 1] as const)) },
        'logit_bias',
      ],
      [
        // Counted before each entry is checked: 300,000 entries used to be checked one by one first.
        'logit_bias over 300 entries, one of them over 100',
        { logit_bias: Object.fromEntries(many(301, (i) => [String(i), i === 0 ? 101 : 1] as const)) },
        'logit_bias',
      ],
      ['a logit_bias value over 100', { logit_bias: { '42': 101 } }, 'logit_bias.42'],
      [
        // Counted before each key is checked: 300,000 keys used to be copied one by one first (0.8 s).
        'stream_options over 16 entries, include_usage not a boolean',
        {
          stream: true,
          stream_options: { include_usage: 'yes', ...Object.fromEntries(many(16, (i) => [`k${i}`, i] as const)) },
        },
        'stream_options',
      ],
      ['stop over 16 entries', { stop: many(17, (i) => `s${i}`) }, 'stop'],
      [
        'content parts over 1024',
        { messages: [hi[0], { role: 'user', content: many(1025, () => ({ type: 'text', text: 'x' })) }] },
        'messages[1].content',
      ],
      [
        'tool calls over 128',
        { messages: [{ role: 'assistant', tool_calls: many(129, () => ({ type: 'function' })) }, hi[0]] },
        'messages[0].tool_calls',
      ],
      ['tools over 128', { tools: many(129, (i) => ({ type: 'function', function: { name: `f${i}` } })) }, 'tools'],
      [
        'tool schemas over 256 KiB',
        { tools: [{ type: 'function', function: { name: 'f', description: 'd'.repeat(300_000) } }] },
        'tools',
      ],
      ['messages over 2048', { messages: many(2049, () => ({ role: 'user', content: 'x' })) }, 'messages'],
      ['max_tokens over the context length', { model: 'tollway/sim-few', max_tokens: 1001 }, 'max_tokens'],
      [
        'max_completion_tokens over the context length',
        { model: 'tollway/sim-few', max_completion_tokens: 5000 },
        'max_completion_tokens',
      ],
      ['prompt + max_tokens over the context length', { model: 'tollway/sim-few', max_tokens: 999 }, 'messages'],
      ['seed past 2^53', { seed: 2 ** 53 }, 'seed'],
      [
        'a name over 256 characters',
        { messages: [{ role: 'user', content: 'hi', name: 'n'.repeat(257) }] },
        'messages[0].name',
      ],
      ['user over 256 characters', { user: 'u'.repeat(257) }, 'user'],
      ['top_k below -1', { top_k: -2 }, 'top_k'],
    ])('%s: 400 in the engine shape', async (_name, extra, param) => {
      const res = await chat({ model: 'tollway/sim-chat', messages: hi, ...extra });
      await expectFlat(res, param);
    });
  });

  describe('decoding', () => {
    it.each(['/v1/models/%', '/v1/models/%zz', '/v1/models/tollway%2', '/v1/models/a/%E0%A4%A'])(
      'GET %s is 404 model_not_found, and 401 without a key',
      async (path) => {
        await expectEnvelope(await fetch(`${gateway.baseUrl}${path}`, { headers: auth }), 404, 'model_not_found');
        const res = await fetch(`${gateway.baseUrl}${path}`);
        expect(res.status).toBe(401);
      },
    );

    it('a body nested 10 000 levels deep is 400 invalid_json', async () => {
      const deep = `{"model":"tollway/sim-chat","messages":[{"role":"user","content":"hi"}],"response_format":${'['.repeat(10_000)}${']'.repeat(10_000)}}`;
      await expectEnvelope(await chat(deep), 400, 'invalid_json');
    });

    it('invalid UTF-8 is 400 invalid_json', async () => {
      const bytes = Buffer.concat([
        Buffer.from('{"model":"tollway/sim-chat","messages":[{"role":"user","content":"'),
        Buffer.from([0xc3, 0x28, 0xff]),
        Buffer.from('"}]}'),
      ]);
      await expectEnvelope(await chat(bytes), 400, 'invalid_json');
    });

    it('gzip that is not gzip is 400 invalid_json; real gzip is served', async () => {
      const body = JSON.stringify({ model: 'tollway/sim-chat', messages: hi, max_tokens: 4 });
      await expectEnvelope(await chat(body, { ...auth, 'content-encoding': 'gzip' }), 400, 'invalid_json');
      expect((await chat(gzipSync(body), { ...auth, 'content-encoding': 'gzip' })).status).toBe(200);
    });

    it('an unsupported Content-Encoding is 400 invalid_json', async () => {
      await expectEnvelope(await chat('{}', { ...auth, 'content-encoding': 'compress' }), 400, 'invalid_json');
    });

    it('a decompression bomb is 400 request_too_large: the limit applies to the decoded size', async () => {
      const bomb = gzipSync(Buffer.alloc(gateway.config.maxBodyBytes + 1024, 0x20));
      expect(bomb.length).toBeLessThan(64 * 1024);
      await expectEnvelope(await chat(bomb, { ...auth, 'content-encoding': 'gzip' }), 400, 'request_too_large');
    });

    it('a chunked body that stops, and a body shorter than its Content-Length, end in a close', async () => {
      const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_KEY}\r\n`;
      const chunked = await rawExchange(port, [`${head}Transfer-Encoding: chunked\r\n\r\n10\r\n{"model":"tollwa\r\n`], {
        waitMs: 5000,
      });
      expect(chunked.ended).toBe('closed');
      const short = await rawExchange(port, [`${head}Content-Length: 500\r\n\r\n{"model":`], { waitMs: 5000 });
      expect(short.ended).toBe('closed');
    });

    it('a completion followed by garbage on its connection keeps its answer; the 400 comes after it', async () => {
      // HTTP/1.1 answers in order: a 400 written when the parser failed would read as the answer
      // to the completion, which was served (and billed).
      const statusLines = (text: string) => text.match(/HTTP\/1\.1 \d{3}/g) ?? [];
      for (const stream of [false, true]) {
        const body = JSON.stringify({ model: 'tollway/sim-chat', messages: hi, max_tokens: 4, stream });
        const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_KEY}\r\n`;
        const exchange = await rawExchange(port, [
          `${head}Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}NOT-HTTP\r\n\r\n`,
        ]);
        expect(statusLines(exchange.text)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 400']);
        const answer = exchange.text.slice(0, exchange.text.indexOf('HTTP/1.1 400'));
        expect(answer).toContain(stream ? 'data: [DONE]' : '"finish_reason"');
        expect(exchange.ended).toBe('closed');
      }
    });

    it('a client that pipelines streams and leaves frees every one of them, those queued behind the first too', async () => {
      // Found by `pnpm fuzz --seed 71` (case gateway:8896): the answers waiting behind the first
      // never got a 'close', so their engine streams ran on after the client had gone.
      const body = JSON.stringify({ model: 'fake/endless-stream', messages: hi, stream: true });
      const one =
        `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_KEY}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
      const socket = connect(port, '127.0.0.1');
      await once(socket, 'connect');
      socket.write(one.repeat(3));
      await once(socket, 'data');
      await waitFor(() => engine.openStreams === 3);
      socket.destroy();
      await waitFor(() => engine.openStreams === 0, 3000);
    });

    it('CONNECT gets 405 and TRACE gets 404, each with a body', async () => {
      const connect = await rawExchange(port, ['CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n']);
      expect(connect.status).toBe(405);
      const trace = await rawExchange(port, ['TRACE /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n']);
      expect(trace.status).toBe(404);
      expect(JSON.parse(trace.body)).toMatchObject({ error: { code: 'model_not_found' } });
    });
  });

  describe('engine answers past the limits', () => {
    it('a JSON response larger than MAX_ENGINE_RESPONSE_BYTES is 502 bad_engine_response', async () => {
      await expectEnvelope(await chat({ model: 'fake/huge-json', messages: hi }), 502, 'bad_engine_response');
    });

    it('an engine that cuts its connection during a JSON answer is 502, not 500', async () => {
      await expectEnvelope(await chat({ model: 'fake/cut-stream', messages: hi }), 502, 'bad_engine_response');
    });

    it('a JSON null body is 400 invalid_json (a body that is not an object)', async () => {
      await expectEnvelope(await chat('null'), 400, 'invalid_json');
    });

    it('an error body larger than the limit is 502, not buffered', async () => {
      await expectEnvelope(await chat({ model: 'fake/huge-error', messages: hi }), 502, 'bad_engine_response');
    });

    it('an SSE event larger than MAX_ENGINE_EVENT_BYTES before the first chunk is 502', async () => {
      await expectEnvelope(
        await chat({ model: 'fake/huge-event', messages: hi, stream: true }),
        502,
        'bad_engine_response',
      );
    });

    /** A whole relayed stream of `model`: a 200 ending in [DONE], its chunks and their content joined. */
    async function completeStream(model: string) {
      const res = await chat({ model, messages: hi, stream: true });
      expect(res.status).toBe(200);
      const payloads = ssePayloads(await res.text());
      expect(payloads.at(-1)).toBe('[DONE]');
      const chunks = payloads
        .slice(0, -1)
        .map((payload) => JSON.parse(payload) as { choices: Array<{ delta?: { content?: string } }>; usage?: unknown });
      return { chunks, text: chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? '').join('') };
    }

    it('a stream sent one byte per HTTP chunk (thousands in one read) is relayed whole and in order', async () => {
      const { chunks, text } = await completeStream('fake/confetti-stream');
      expect(text).toBe(Array.from({ length: 20 }, (_, i) => ` w${i}`).join(''));
      expect(chunks.at(-1)?.usage).toEqual({ prompt_tokens: 3, completion_tokens: 20, total_tokens: 23 });
    });

    it('characters split between reads, bytes that are not UTF-8 and control characters are relayed, not fatal', async () => {
      const { text } = await completeStream('fake/mangled-stream');
      expect(text).toBe(MANGLED_STREAM_TEXT);
    });

    it('a stream longer than MAX_ENGINE_STREAM_BYTES ends with an error event and no [DONE]', async () => {
      const res = await chat({ model: 'fake/endless-stream', messages: hi, stream: true });
      expect(res.status).toBe(200);
      const payloads = ssePayloads(await res.text());
      expect(payloads).not.toContain('[DONE]');
      const last = JSON.parse(payloads.at(-1) as string) as { error: { code: string; message: string } };
      expect(last.error.code).toBe('engine_stream_error');
      expect(last.error.message).toMatch(/1048576 bytes/);
    });
  });
});
