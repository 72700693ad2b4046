import { request } from 'node:http';
import type { Socket } from 'node:net';
import { rawExchange } from '@tollway/service-kit/testing';
import type { SimServer } from '../src/engines/simulated/sim-server';
import { FakeEngine, MANGLED_STREAM_TEXT } from './helpers/fake-engine';
import { readResponses, type WireResponse } from './helpers/http-wire';
import {
  catalogModels,
  httpModel,
  RecordingAdmission,
  startGateway,
  startSim,
  TEST_KEY,
  type GatewayHarness,
} from './helpers/gateway-harness';

interface Chunk {
  id: string;
  object: string;
  choices: Array<{ index: number; delta: Record<string, unknown>; finish_reason?: string | null }>;
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
}

/**
 * Counts the writes `socket` hands to the operating system: every method of its stream handle that
 * Node's net module writes through (one call, one write or writev system call, or one queued write
 * when the socket buffer is full).
 */
function countWrites(socket: Socket, onWrite: () => void): void {
  const handle = (socket as unknown as { _handle: Record<string, (...args: unknown[]) => unknown> })._handle;
  for (const method of [
    'writev',
    'writeBuffer',
    'writeUtf8String',
    'writeLatin1String',
    'writeAsciiString',
    'writeUcs2String',
  ]) {
    const original = handle[method];
    if (typeof original !== 'function') throw new Error(`the socket handle has no ${method}`);
    handle[method] = function (this: unknown, ...args: unknown[]) {
      onWrite();
      return original.apply(this, args);
    };
  }
}

/** Asserts the spec's six Events rules on a raw SSE body; returns the parsed chunks. */
function expectSixRules(raw: string): Chunk[] {
  // Rule 1: every frame is a `data:` line; rule 6: the last is the literal [DONE].
  const frames = raw.split('\n\n').filter((frame) => frame.length > 0);
  for (const frame of frames) expect(frame.startsWith('data: ')).toBe(true);
  expect(frames.at(-1)).toBe('data: [DONE]');
  expect(raw.endsWith('data: [DONE]\n\n')).toBe(true);
  const chunks = frames.slice(0, -1).map((frame) => JSON.parse(frame.slice(6)) as Chunk);
  for (const chunk of chunks) expect(chunk.object).toBe('chat.completion.chunk');
  // Rule 2: the first chunk opens with the role and has no usage.
  const first = chunks[0] as Chunk;
  expect(first.choices[0]?.delta.role).toBe('assistant');
  expect('usage' in first).toBe(false);
  // Rule 5: the last JSON chunk has empty choices and the totals.
  const last = chunks.at(-1) as Chunk;
  expect(last.choices).toEqual([]);
  expect(last.usage?.total_tokens).toBe((last.usage?.prompt_tokens ?? NaN) + (last.usage?.completion_tokens ?? NaN));
  for (const chunk of chunks.slice(1, -1)) {
    expect(chunk.choices.length).toBeGreaterThan(0);
    if (chunk.choices.some((choice) => choice.finish_reason)) {
      // Rule 3: the chunk carrying finish_reason has no usage.
      expect('usage' in chunk).toBe(false);
    } else {
      // Rule 4: every other chunk carries usage.
      expect(chunk.usage).toEqual({
        prompt_tokens: expect.any(Number),
        completion_tokens: expect.any(Number),
        total_tokens: expect.any(Number),
      });
    }
  }
  return chunks;
}

describe('SSE output follows the six Events rules whatever the engine sends', () => {
  const fake = new FakeEngine();
  let sim: SimServer;
  let reasoner: SimServer;
  let instant: SimServer;
  let perEvent: SimServer;
  let gateway: GatewayHarness;
  const admission = new RecordingAdmission();
  const stream = async (body: Record<string, unknown>) => {
    const res = await fetch(`${gateway.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'Tell me a story.' }], stream: true, ...body }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    return { res, raw: await res.text() };
  };

  beforeAll(async () => {
    await fake.start();
    const plain = await startSim({ time_to_first_token_ms: 1, time_per_output_token_ms: 1 });
    const thinking = await startSim({ reasoning: true });
    const atOnce = await startSim({ time_to_first_token_ms: 0, time_per_output_token_ms: 0, ignore_eos: true });
    const eventByEvent = await startSim(
      { time_to_first_token_ms: 0, time_per_output_token_ms: 0, ignore_eos: true },
      { flushEachEvent: true },
    );
    sim = plain.sim;
    reasoner = thinking.sim;
    instant = atOnce.sim;
    perEvent = eventByEvent.sim;
    gateway = await startGateway(
      catalogModels([
        httpModel('sim/chat', [plain.baseUrl]),
        httpModel('sim/reasoner', [thinking.baseUrl]),
        httpModel('sim/instant', [atOnce.baseUrl]),
        httpModel('sim/per-event', [eventByEvent.baseUrl]),
        {
          ...httpModel('fake/odd', []),
          engine: { kind: 'openai-compatible', replicas: [{ base_url: fake.baseUrl, model: 'odd-stream' }] },
        },
        {
          ...httpModel('fake/mangled', []),
          engine: { kind: 'openai-compatible', replicas: [{ base_url: fake.baseUrl, model: 'mangled-stream' }] },
        },
        {
          ...httpModel('fake/no-continuous', []),
          engine: { kind: 'openai-compatible', continuous_usage_stats: false, replicas: [{ base_url: plain.baseUrl }] },
        },
        {
          id: 'local/instant',
          owned_by: 'test',
          created: 1,
          price_per_million: { input: 1, output: 1 },
          engine: { kind: 'simulated', time_to_first_token_ms: 0, time_per_output_token_ms: 0 },
        },
      ]),
      { admission },
    );
  });

  afterAll(async () => {
    await gateway.close();
    await fake.close();
    await sim.close();
    await reasoner.close();
    await instant.close();
    await perEvent.close();
  });

  /** The usage the relayed stream was settled with, once it was. */
  const settledUsageOf = async (ticket: number) => {
    await admission.allClosed();
    return admission.tickets[ticket]?.settled;
  };

  it.each([
    ['one token per read, over several turns', 'sim/chat'],
    ['the whole stream at once, in one or two reads (one socket write to the client)', 'sim/instant'],
    ['every event an HTTP chunk of its own, written at once (as per-token engines write them)', 'sim/per-event'],
  ])('a relayed stream is whole and billed exactly what the engine reported: %s', async (_name, model) => {
    const before = admission.tickets.length;
    const chunks = expectSixRules((await stream({ model, max_tokens: 16 })).raw);
    const tokens = chunks.filter((chunk) => chunk.choices.some((choice) => choice.delta.content !== undefined));
    expect(tokens.map((chunk) => chunk.choices[0]?.delta.content).filter((text) => text !== '')).toHaveLength(16);
    const totals = chunks.at(-1)?.usage;
    expect(totals?.completion_tokens).toBe(16);
    expect(await settledUsageOf(before)).toEqual([
      { prompt_tokens: totals?.prompt_tokens, completion_tokens: totals?.completion_tokens },
    ]);
    expect(admission.tickets[before]?.released).toBe(0);
  });

  it('a stream that reaches the gateway in one read leaves it in one socket write, headers to [DONE]', async () => {
    // sim/instant writes its whole answer (headers and 16-token stream) in one write, which loopback
    // delivers in one read; the client is on a connection of its own, so only its response is counted.
    let writes = 0;
    gateway.server.once('connection', (socket: Socket) => countWrites(socket, () => writes++));
    const raw = await new Promise<string>((resolve, reject) => {
      const req = request(
        `${gateway.baseUrl}/v1/chat/completions`,
        {
          method: 'POST',
          agent: false,
          headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (part: string) => (text += part));
          res.on('end', () => resolve(text));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(
        JSON.stringify({
          model: 'sim/instant',
          max_tokens: 16,
          stream: true,
          messages: [{ role: 'user', content: 'Hi.' }],
        }),
      );
    });
    expect(expectSixRules(raw).at(-1)?.usage?.completion_tokens).toBe(16);
    expect(writes).toBe(1);
  });

  it.each([
    ['with include_usage', { stream_options: { include_usage: true } }],
    ['without include_usage (usage chunks are sent regardless)', {}],
    ['with include_usage false', { stream_options: { include_usage: false } }],
  ])('simulated engine over HTTP, %s', async (_name, extra) => {
    const { raw, res } = await stream({ model: 'sim/chat', max_tokens: 12, ...extra });
    const chunks = expectSixRules(raw);
    expect(chunks.at(-1)?.usage?.completion_tokens).toBe(12);
    expect(res.headers.get('x-ratelimit-limit-requests')).toBe('100');
  });

  it('n=2: each choice opens and finishes, usage totals cover both', async () => {
    const chunks = expectSixRules((await stream({ model: 'sim/chat', n: 2, max_tokens: 5 })).raw);
    const finishes = chunks.flatMap((chunk) =>
      chunk.choices.filter((choice) => choice.finish_reason).map((choice) => choice.index),
    );
    expect(finishes.sort()).toEqual([0, 1]);
    expect(chunks.at(-1)?.usage?.completion_tokens).toBe(10);
  });

  it('reasoning model: reasoning_content deltas before content', async () => {
    const chunks = expectSixRules((await stream({ model: 'sim/reasoner' })).raw);
    const kinds = chunks.flatMap((chunk) =>
      chunk.choices.map((choice) => (choice.delta.reasoning_content ? 'r' : choice.delta.content ? 'c' : '')),
    );
    const joined = kinds.join('');
    expect(joined).toMatch(/^r+c+$/);
  });

  it('tool call stream ends with finish_reason tool_calls', async () => {
    const chunks = expectSixRules(
      (
        await stream({
          model: 'sim/chat',
          tools: [
            {
              type: 'function',
              function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } },
            },
          ],
          tool_choice: 'required',
        })
      ).raw,
    );
    expect(chunks.some((chunk) => chunk.choices.some((choice) => choice.finish_reason === 'tool_calls'))).toBe(true);
  });

  it('an engine without role chunk or any usage: role chunk and running usage are added, totals counted', async () => {
    const before = admission.tickets.length;
    const chunks = expectSixRules((await stream({ model: 'fake/odd' })).raw);
    const text = chunks.flatMap((chunk) => chunk.choices.map((choice) => choice.delta.content ?? '')).join('');
    expect(text).toBe('Hello there friend');
    expect(chunks.at(-1)?.usage?.completion_tokens).toBe(3);
    await admission.allClosed();
    expect(admission.tickets[before]?.settled).toEqual([{ prompt_tokens: expect.any(Number), completion_tokens: 3 }]);
  });

  it('an engine asked only for include_usage (no per-chunk usage) still gives usage on every chunk', async () => {
    const chunks = expectSixRules((await stream({ model: 'fake/no-continuous', max_tokens: 6 })).raw);
    expect(chunks.at(-1)?.usage?.completion_tokens).toBe(6);
  });

  it('the in-process simulated engine follows the same rules', async () => {
    expectSixRules((await stream({ model: 'local/instant', max_tokens: 4 })).raw);
  });

  describe('on the wire, every way a client may ask', () => {
    /** The raw request head and body of a stream of `model`; `last` closes the connection after its answer. */
    const streamRequest = (model: string, { version = '1.1', last = true } = {}) => {
      const body = JSON.stringify({
        model,
        max_tokens: 16,
        stream: true,
        messages: [{ role: 'user', content: 'Hi.' }],
      });
      return (
        `POST /v1/chat/completions HTTP/${version}\r\nHost: gateway\r\nAuthorization: Bearer ${TEST_KEY}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `${last ? 'Connection: close\r\n' : ''}\r\n${body}`
      );
    };
    const exchange = async (requests: string[]): Promise<WireResponse[]> => {
      const answer = await rawExchange(Number(new URL(gateway.baseUrl).port), [requests.join('')], { waitMs: 10_000 });
      expect(answer.ended).toBe('closed');
      return readResponses(answer.bytes);
    };
    /** Every chunk of a chunked SSE answer is whole events: the relay frames each write as one chunk. */
    const expectEventChunks = (response: WireResponse) => {
      expect(response.headers['transfer-encoding']).toBe('chunked');
      for (const chunk of response.chunks ?? []) expect(chunk).toMatch(/^data: [^]*\n\n$/);
    };

    it('an engine that writes every event on its own: one HTTP chunk per event, sized in bytes', async () => {
      const [response, ...more] = await exchange([streamRequest('sim/per-event')]);
      expect(more).toHaveLength(0);
      expect(response?.status).toBe(200);
      expectEventChunks(response as WireResponse);
      // Role chunk, 16 tokens, finish, usage and [DONE]: far more chunks than one write would make.
      expect(response?.chunks?.length).toBeGreaterThan(10);
      expect(expectSixRules(response?.body ?? '').at(-1)?.usage?.completion_tokens).toBe(16);
    });

    it('characters of several bytes, split between the engine writes, are counted in bytes by each chunk', async () => {
      const [response] = await exchange([streamRequest('fake/mangled')]);
      expect(response?.status).toBe(200);
      expectEventChunks(response as WireResponse);
      expect(response?.chunks?.length).toBeGreaterThan(3);
      const text = expectSixRules(response?.body ?? '')
        .map((chunk) => chunk.choices[0]?.delta.content ?? '')
        .join('');
      expect(text).toBe(MANGLED_STREAM_TEXT);
    });

    it('pipelined requests get whole answers in order, the later ones waiting for the socket', async () => {
      const responses = await exchange([
        // The first answer takes about 50 ms; the others are made meanwhile and wait for the socket.
        streamRequest('fake/mangled', { last: false }),
        streamRequest('sim/per-event', { last: false }),
        streamRequest('sim/per-event'),
      ]);
      expect(responses.map((response) => response.status)).toEqual([200, 200, 200]);
      const streams = responses.map((response) => {
        expectEventChunks(response);
        const chunks = expectSixRules(response.body);
        // Each answer holds its own stream only, and all of it: one id, every token.
        expect(new Set(chunks.map((chunk) => chunk.id)).size).toBe(1);
        return chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').filter((text) => text !== '');
      });
      expect(streams[0]?.join('')).toBe(MANGLED_STREAM_TEXT);
      expect(streams[1]).toHaveLength(16);
      expect(streams[2]).toHaveLength(16);
    });

    it('an HTTP/1.0 client gets the stream unchunked, ended by the close', async () => {
      for (const model of ['sim/per-event', 'fake/mangled']) {
        const [response, ...more] = await exchange([streamRequest(model, { version: '1.0' })]);
        expect(more).toHaveLength(0);
        expect(response?.status).toBe(200);
        expect(response?.chunks).toBeNull();
        expect(response?.headers['transfer-encoding']).toBeUndefined();
        expectSixRules(response?.body ?? '');
      }
    });
  });
});
