import { createServer } from 'node:net';
import type { SimServer } from '../src/engines/simulated/sim-server';
import { FakeEngine } from './helpers/fake-engine';
import {
  catalogModels,
  httpModel,
  RecordingAdmission,
  ssePayloads,
  startGateway,
  startSim,
  TEST_KEY,
  type GatewayHarness,
} from './helpers/gateway-harness';

/** Behaviours of the fake engine used here (see helpers/fake-engine.ts). */
const FAKE_MODELS = [
  'flat',
  'text',
  'nested',
  'record',
  'hang',
  'cut-stream',
  'tool-stream',
  'error-first-stream',
  'error-mid-stream',
  'json-for-stream',
  'silent-stream',
  'status-401',
  'status-402',
  'status-403',
  'status-404',
  'status-413',
  'status-422',
  'status-429',
  'status-429-ms',
  'status-422-nested',
  'error-first-stream-429',
  'odd-finish',
  'reasoning-named',
  'usage-huge',
  'usage-junk',
  'usage-over',
  'usage-details',
  'deep-json',
];

/** A port nothing listens on (bound, then released). */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function until(check: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

// The OpenAI-compatible engine path: passthrough of engine errors, retries, timeouts, aborts.
describe('gateway in front of HTTP engines', () => {
  const fake = new FakeEngine();
  let slowSim: SimServer;
  let fastSim: SimServer;
  let bulkSim: SimServer;
  let gateway: GatewayHarness;
  const admission = new RecordingAdmission();
  const chat = (body: Record<string, unknown>, signal?: AbortSignal) =>
    fetch(`${gateway.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], ...body }),
      signal,
    });

  beforeAll(async () => {
    await fake.start();
    const slow = await startSim({ time_to_first_token_ms: 5, time_per_output_token_ms: 20, default_max_tokens: 400 });
    const fast = await startSim();
    const bulk = await startSim({ ignore_eos: true, max_model_len: 1_000_000 });
    bulkSim = bulk.sim;
    slowSim = slow.sim;
    fastSim = fast.sim;
    const dead = `http://127.0.0.1:${await deadPort()}/v1`;
    gateway = await startGateway(
      catalogModels([
        ...FAKE_MODELS.map((upstream) => fake.catalogEntry(upstream)),
        { ...fake.catalogEntry('hang'), id: 'fake/hang-small', context_length: 64 },
        httpModel('sim/slow', [slow.baseUrl]),
        httpModel('sim/dead-first', [dead, fast.baseUrl]),
        {
          ...httpModel('sim/503-first', []),
          engine: {
            kind: 'openai-compatible',
            replicas: [{ base_url: fake.baseUrl, model: 'always-503' }, { base_url: fast.baseUrl }],
          },
        },
        {
          ...httpModel('sim/429-first', []),
          engine: {
            kind: 'openai-compatible',
            replicas: [{ base_url: fake.baseUrl, model: 'status-429' }, { base_url: fast.baseUrl }],
          },
        },
        httpModel('sim/all-dead', [dead]),
        httpModel('sim/bulk', [bulk.baseUrl], { context_length: 1_000_000 }),
      ]),
      { admission, env: { UPSTREAM_TIMEOUT_MS: '400' } },
    );
  });

  afterAll(async () => {
    await gateway.close();
    await fake.close();
    await slowSim.close();
    await fastSim.close();
    await bulkSim.close();
  });

  describe('usage an engine should never send is not billed or shown', () => {
    // The fake answers 'ok' (one token) to a prompt the gateway counts at 8 tokens; the model's
    // context length is the default, 131,072.
    const billed = (model: string) => admission.tickets.filter((t) => t.request.modelId === model).at(-1)?.settled;

    it.each([
      ['1e308', 'usage-huge', { prompt_tokens: 8, completion_tokens: 1 }],
      ['not counts', 'usage-junk', { prompt_tokens: 8, completion_tokens: 1 }],
      ['counts above the bounds', 'usage-over', { prompt_tokens: 131072, completion_tokens: 10 }],
      ['details not of the contract', 'usage-details', { prompt_tokens: 8, completion_tokens: 1 }],
    ])('JSON with usage %s: billed and shown within the bounds', async (_name, upstream, expected) => {
      const res = await chat({ model: `fake/${upstream}`, max_tokens: 5, n: 2 });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { usage: Record<string, number> };
      const total = expected.prompt_tokens + expected.completion_tokens;
      expect(body.usage).toEqual({ ...expected, total_tokens: total });
      await until(() => (billed(`fake/${upstream}`)?.length ?? 0) > 0);
      expect(billed(`fake/${upstream}`)).toEqual([expected]);
      // Each of the n choices may generate max_tokens: all of them are reserved.
      const ticket = admission.tickets.filter((t) => t.request.modelId === `fake/${upstream}`).at(-1);
      expect(ticket?.request.reservedOutputTokens).toBe(10);
    });

    it.each([
      ['1e308', 'usage-huge', { prompt_tokens: 8, completion_tokens: 1 }],
      ['not counts', 'usage-junk', { prompt_tokens: 8, completion_tokens: 1 }],
      ['counts above the bounds', 'usage-over', { prompt_tokens: 131072, completion_tokens: 10 }],
      ['details not of the contract', 'usage-details', { prompt_tokens: 8, completion_tokens: 1 }],
    ])(
      'a stream with usage %s: counts on every chunk, totals and bill within the bounds',
      async (_name, upstream, expected) => {
        // A token chunk passed through as the engine wrote it keeps the engine's counts, checked
        // to be counts by the passthrough test; the totals and the bill are cut to the bounds.
        const res = await chat({ model: `fake/${upstream}`, max_tokens: 5, n: 2, stream: true });
        expect(res.status).toBe(200);
        const chunks = ssePayloads(await res.text())
          .filter((p) => p !== '[DONE]')
          .map((p) => JSON.parse(p) as { usage?: Record<string, number> });
        for (const chunk of chunks.slice(1, -1)) {
          if (!chunk.usage) continue; // the finish chunk
          for (const count of Object.values(chunk.usage)) expect(Number.isSafeInteger(count) && count >= 0).toBe(true);
        }
        const totals = chunks.at(-1)?.usage;
        expect(totals).toEqual({ ...expected, total_tokens: expected.prompt_tokens + expected.completion_tokens });
        await until(() => (billed(`fake/${upstream}`)?.length ?? 0) > 0);
        expect(billed(`fake/${upstream}`)).toEqual([expected]);
      },
    );
  });

  it('a JSON answer nested deeper than 64 levels is 502 bad_engine_response, not a 500', async () => {
    const res = await chat({ model: 'fake/deep-json' });
    expect(res.status).toBe(502);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('bad_engine_response');
  });

  describe('engine errors pass through with the engine status', () => {
    it('flat JSON unchanged', async () => {
      const res = await chat({ model: 'fake/flat' });
      expect(res.status).toBe(400);
      expect(await res.text()).toBe(
        '{"object":"error","message":"bad thing","type":"BadRequestError","param":"temperature","code":400}',
      );
    });

    it('text/plain unchanged, prefix and all', async () => {
      const res = await chat({ model: 'fake/text' });
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
      expect(await res.text()).toBe('Inference error: top_k must be at least -1');
    });

    it('nested vLLM shape normalised into the flat shape', async () => {
      const res = await chat({ model: 'fake/nested' });
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({
        object: 'error',
        message: 'nested bad',
        type: 'BadRequestError',
        param: 'top_k',
        code: 400,
      });
    });

    it('an error event before any chunk becomes a real status, not a 200 stream', async () => {
      const res = await chat({ model: 'fake/error-first-stream', stream: true });
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({
        object: 'error',
        message: 'prompt too long',
        type: 'BadRequestError',
        param: 'messages',
        code: 400,
      });
    });

    it('releases the admission of a refused request instead of charging it', async () => {
      const before = admission.tickets.length;
      await (await chat({ model: 'fake/flat' })).text();
      await admission.allClosed();
      expect(admission.tickets[before]).toMatchObject({ released: 1, settled: [] });
    });
  });

  describe("engine statuses the API gives another meaning are not passed on as the client's", () => {
    const envelope = async (res: Response) => (await res.json()) as { error: Record<string, unknown> };

    it.each([401, 402, 403, 404])(
      "an engine's %i is a 502 engine_refused in the envelope, the engine's message kept out",
      async (status) => {
        for (const stream of [false, true]) {
          const res = await chat({ model: `fake/status-${status}`, stream });
          expect(res.status).toBe(502);
          const body = await envelope(res);
          expect(body.error).toMatchObject({ type: 'server_error', param: null, code: 'engine_refused' });
          expect(body.error.message).toContain(`status ${status}`);
          expect(JSON.stringify(body)).not.toContain('sk-engine-secret');
        }
      },
    );

    it("an engine's 429 is 429 provider_overloaded with the engine's wait, retry-after or retry-after-ms", async () => {
      for (const stream of [false, true]) {
        const res = await chat({ model: 'fake/status-429', stream });
        expect(res.status).toBe(429);
        expect((await envelope(res)).error).toMatchObject({ code: 'provider_overloaded' });
        expect(res.headers.get('retry-after')).toBe('3');
        expect(res.headers.get('retry-after-ms')).toBe('3000');
        expect(res.headers.get('x-should-retry')).toBe('true');
      }
      const ms = await chat({ model: 'fake/status-429-ms' });
      expect(ms.status).toBe(429);
      expect((await envelope(ms)).error).toMatchObject({ code: 'provider_overloaded' });
      expect(ms.headers.get('retry-after-ms')).toBe('250');
      expect(ms.headers.get('retry-after')).toBe('1');
    });

    it('an error event with code 429 before any chunk is a 429 provider_overloaded too', async () => {
      const res = await chat({ model: 'fake/error-first-stream-429', stream: true });
      expect(res.status).toBe(429);
      expect((await envelope(res)).error).toMatchObject({ code: 'provider_overloaded' });
      expect(res.headers.get('retry-after-ms')).toBe('1000');
    });

    it("an engine's 422 is a 400 in the flat shape with code 400; its 413 a 400 request_too_large", async () => {
      const flat = await chat({ model: 'fake/status-422' });
      expect(flat.status).toBe(400);
      expect(await flat.json()).toEqual({
        object: 'error',
        message: 'engine says 422 (key sk-engine-secret)',
        type: 'EngineError',
        param: null,
        code: 400,
      });
      const nested = await chat({ model: 'fake/status-422-nested' });
      expect(nested.status).toBe(400);
      expect(await nested.json()).toEqual({
        object: 'error',
        message: 'top_k: must be >= -1',
        type: 'ValidationError',
        param: 'top_k',
        code: 400,
      });
      const large = await chat({ model: 'fake/status-413' });
      expect(large.status).toBe(400);
      expect((await envelope(large)).error).toMatchObject({ type: 'invalid_request_error', code: 'request_too_large' });
    });

    it('releases the admission of every such refusal', async () => {
      const before = admission.tickets.length;
      for (const model of ['status-401', 'status-429', 'status-413'])
        await (await chat({ model: `fake/${model}` })).text();
      await admission.allClosed();
      expect(admission.tickets.slice(before)).toEqual([
        expect.objectContaining({ released: 1, settled: [] }),
        expect.objectContaining({ released: 1, settled: [] }),
        expect.objectContaining({ released: 1, settled: [] }),
      ]);
    });
  });

  it("puts an engine's finish_reason outside the spec's four in the spec's terms, JSON and stream", async () => {
    const json = (await (await chat({ model: 'fake/odd-finish' })).json()) as {
      choices: Array<{ finish_reason: string }>;
    };
    expect(json.choices[0]?.finish_reason).toBe('stop');
    const stream = await chat({ model: 'fake/odd-finish', stream: true });
    const reasons = ssePayloads(await stream.text())
      .filter((payload) => payload !== '[DONE]')
      .flatMap((payload) => (JSON.parse(payload) as { choices: Array<{ finish_reason?: string | null }> }).choices)
      .map((choice) => choice.finish_reason)
      .filter((reason) => reason);
    expect(reasons).toEqual(['stop']);
  });

  it("relays a reasoning trace named `reasoning` (vLLM's, Ollama's) as the spec's `reasoning_content`", async () => {
    const json = (await (await chat({ model: 'fake/reasoning-named' })).json()) as {
      choices: Array<{ message: Record<string, unknown> }>;
    };
    expect(json.choices[0]?.message).toEqual({ role: 'assistant', content: 'ok', reasoning_content: 'Let me think.' });
    const stream = await chat({ model: 'fake/reasoning-named', stream: true });
    const deltas = ssePayloads(await stream.text())
      .filter((payload) => payload !== '[DONE]')
      .flatMap((payload) => (JSON.parse(payload) as { choices: Array<{ delta: Record<string, unknown> }> }).choices)
      .map((choice) => choice.delta);
    expect(deltas.filter((delta) => 'reasoning' in delta)).toEqual([]);
    expect(deltas.map((delta) => delta.reasoning_content ?? '').join('')).toBe('step 1. step 2. step 3. ');
  });

  describe('what is forwarded', () => {
    it('only the spec fields, with the engine model name; streams always ask for usage', async () => {
      await (
        await chat({
          model: 'fake/record',
          temperature: 0.5,
          metadata: { a: 1 },
          store: true,
          stream_options: { include_usage: false },
        })
      ).json();
      const plain = fake.requests.at(-1);
      expect(plain?.body).toEqual({ model: 'record', messages: [{ role: 'user', content: 'hi' }], temperature: 0.5 });
      await (await chat({ model: 'fake/record', stream: true, service_tier: 'x' })).text();
      const streamed = fake.requests.at(-1);
      expect(streamed?.body).toEqual({
        model: 'record',
        messages: [{ role: 'user', content: 'hi' }],
        stream: true,
        stream_options: { include_usage: true, continuous_usage_stats: true },
      });
    });

    it('answers with the catalog id even when the engine names the model differently', async () => {
      const res = await chat({ model: 'fake/record' });
      expect(((await res.json()) as { model: string }).model).toBe('fake/record');
    });
  });

  describe('broken streams', () => {
    it('a stream cut after the 200 ends with an error event and no [DONE], and is charged what was relayed', async () => {
      const before = admission.tickets.length;
      const res = await chat({ model: 'fake/cut-stream', stream: true });
      expect(res.status).toBe(200);
      const payloads = ssePayloads(await res.text());
      expect(payloads).not.toContain('[DONE]');
      const last = JSON.parse(payloads.at(-1) as string) as { error: { message: string; type: string } };
      expect(last.error.type).toBe('server_error');
      await admission.allClosed();
      const settled = admission.tickets[before]?.settled ?? [];
      expect(settled).toHaveLength(1);
      expect(settled[0]?.completion_tokens).toBeGreaterThanOrEqual(2);
    });

    it('a tool-call stream without usage is billed the tool call it relayed, not the JSON of its deltas', async () => {
      const before = admission.tickets.length;
      const res = await chat({ model: 'fake/tool-stream', stream: true, max_tokens: 100 });
      const payloads = ssePayloads(await res.text());
      const totals = JSON.parse(payloads.at(-2) as string) as { usage: { completion_tokens: number } };
      await admission.allClosed();
      const settled = admission.tickets[before]?.settled ?? [];
      // Eight pieces, at least a token each; their text (`get{"city":"Paris"}` and a newline) is fewer.
      expect(settled).toEqual([{ prompt_tokens: 8, completion_tokens: 8 }]);
      expect(totals.usage.completion_tokens).toBe(8);
    });

    it('a stream that breaks before its first chunk gets a status: 502 for a non-SSE answer, 504 for silence', async () => {
      const json = await chat({ model: 'fake/json-for-stream', stream: true });
      expect(json.status).toBe(502);
      expect(((await json.json()) as { error: { code: string } }).error.code).toBe('bad_engine_response');
      const silent = await chat({ model: 'fake/silent-stream', stream: true });
      expect(silent.status).toBe(504);
      expect(((await silent.json()) as { error: { code: string } }).error.code).toBe('upstream_timeout');
    });

    it('an engine error event mid-stream is relayed as an error event, no [DONE]', async () => {
      const res = await chat({ model: 'fake/error-mid-stream', stream: true });
      const payloads = ssePayloads(await res.text());
      expect(payloads).not.toContain('[DONE]');
      expect(JSON.parse(payloads.at(-1) as string)).toEqual({
        error: { message: 'engine ran out of memory', type: 'server_error', param: null, code: 'engine_stream_error' },
      });
    });
  });

  describe('replicas', () => {
    it('retries a connect error on another replica', async () => {
      for (let i = 0; i < 6; i++) {
        const res = await chat({ model: 'sim/dead-first', max_tokens: 3 });
        expect(res.status).toBe(200);
        await res.json();
      }
    });

    it('retries a 5xx before the first byte on another replica', async () => {
      const before = fake.requests.filter((r) => r.model === 'always-503').length;
      for (let i = 0; i < 4; i++) {
        const res = await chat({ model: 'sim/503-first', max_tokens: 3 });
        expect(res.status).toBe(200);
        await res.json();
      }
      expect(fake.requests.filter((r) => r.model === 'always-503').length).toBeGreaterThan(before);
    });

    it("retries an overloaded replica's 429 on another replica, streamed or not", async () => {
      const before = fake.requests.filter((r) => r.model === 'status-429').length;
      for (let i = 0; i < 4; i++) {
        const res = await chat({ model: 'sim/429-first', max_tokens: 3, stream: i % 2 === 1 });
        expect(res.status).toBe(200);
        await res.text();
      }
      expect(fake.requests.filter((r) => r.model === 'status-429').length).toBeGreaterThan(before);
    });

    it('502 when no replica can be reached', async () => {
      const res = await chat({ model: 'sim/all-dead' });
      expect(res.status).toBe(502);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('engine_unavailable');
    });

    it('504 with a clear error when the engine does not answer within the upstream timeout', async () => {
      const res = await chat({ model: 'fake/hang' });
      expect(res.status).toBe(504);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('upstream_timeout');
      expect(body.error.message).toContain('400 ms');
    });
  });

  it('a client that does not read holds the engine back: the gateway does not buffer the stream', async () => {
    const completed = bulkSim.stats.completed;
    const aborted = bulkSim.stats.aborted;
    const controller = new AbortController();
    // About 35 MB of SSE, far more than the socket buffers between engine, gateway and client.
    const res = await chat({ model: 'sim/bulk', stream: true, max_tokens: 150_000 }, controller.signal);
    expect(res.status).toBe(200);
    // The engine must stall (no progress for 500 ms) long before it could have written everything.
    let last = -1;
    let still = 0;
    const deadline = Date.now() + 15_000;
    while (still < 5 && bulkSim.stats.completed === completed && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      still = bulkSim.stats.streamedBytes === last ? still + 1 : 0;
      last = bulkSim.stats.streamedBytes;
    }
    expect(bulkSim.stats.completed).toBe(completed);
    expect(still).toBe(5);
    controller.abort();
    await until(() => bulkSim.stats.aborted > aborted);
  });

  describe('client disconnects abort the engine at once', () => {
    it('streamed: the engine sees the abort and the partial usage is settled', async () => {
      const before = admission.tickets.length;
      const abortedBefore = slowSim.stats.aborted;
      const controller = new AbortController();
      const res = await chat({ model: 'sim/slow', stream: true, max_tokens: 400 }, controller.signal);
      const reader = res.body!.getReader();
      let text = '';
      while (ssePayloads(text).length < 4) text += new TextDecoder().decode((await reader.read()).value);
      controller.abort();
      await until(() => slowSim.stats.aborted > abortedBefore);
      await admission.allClosed();
      const settled = admission.tickets[before]?.settled ?? [];
      expect(settled).toHaveLength(1);
      expect(settled[0]?.completion_tokens).toBeGreaterThan(0);
      expect(settled[0]?.completion_tokens).toBeLessThan(400);
    });

    it.each([
      ['a stream', true, 0],
      ['a JSON answer', false, 300],
    ])('%s left before the engine answered: the prompt and what could have been made', async (_name, stream, made) => {
      const before = admission.tickets.length;
      const sent = fake.requests.length;
      const controller = new AbortController();
      const pending = chat({ model: 'fake/hang', stream, max_tokens: 300 }, controller.signal).catch((e: unknown) => e);
      await until(() => fake.requests.length > sent);
      controller.abort();
      await pending;
      await until(() => (admission.tickets[before]?.settled.length ?? 0) > 0);
      expect(admission.tickets[before]?.settled).toEqual([{ prompt_tokens: 8, completion_tokens: made }]);
    });

    it('a JSON answer left before the engine answered, without max_tokens: the reservation cut to what the context leaves', async () => {
      // The default reservation is 1024 × n; a context of 64 leaves the engine 56 tokens a choice.
      const before = admission.tickets.length;
      const sent = fake.requests.length;
      const controller = new AbortController();
      const pending = chat({ model: 'fake/hang-small', n: 2 }, controller.signal).catch((e: unknown) => e);
      await until(() => fake.requests.length > sent);
      controller.abort();
      await pending;
      await until(() => (admission.tickets[before]?.settled.length ?? 0) > 0);
      expect(admission.tickets[before]?.request.reservedOutputTokens).toBe(2048);
      expect(admission.tickets[before]?.settled).toEqual([{ prompt_tokens: 8, completion_tokens: 112 }]);
    });

    it('non-streamed: the engine sees the abort too', async () => {
      const abortedBefore = slowSim.stats.aborted;
      const controller = new AbortController();
      const pending = chat({ model: 'sim/slow', max_tokens: 400 }, controller.signal).catch((e: unknown) => e);
      await until(() => slowSim.load().running > 0);
      controller.abort();
      await pending;
      await until(() => slowSim.stats.aborted > abortedBefore);
      expect(slowSim.load().running).toBe(0);
    });
  });
});
