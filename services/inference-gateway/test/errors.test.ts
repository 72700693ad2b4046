import { randomUUID } from 'node:crypto';
import type { SimServer } from '../src/engines/simulated/sim-server';
import {
  catalogModels,
  httpModel,
  startGateway,
  startSim,
  TEST_KEY,
  type GatewayHarness,
} from './helpers/gateway-harness';

// Every row of the spec's Errors table that the gateway itself answers, over real HTTP.
describe('gateway error table', () => {
  let sim: SimServer;
  let gateway: GatewayHarness;
  const auth = { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' };
  const chat = (body: unknown, headers: Record<string, string> = auth) =>
    fetch(`${gateway.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers,
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  const hi = [{ role: 'user', content: 'hi' }];

  beforeAll(async () => {
    const started = await startSim({ max_model_len: 64 });
    sim = started.sim;
    gateway = await startGateway(
      catalogModels([
        httpModel('tollway/sim-chat', [started.baseUrl]),
        httpModel('tollway/sim-narrow', [started.baseUrl], { narrowed: true }),
        httpModel('tollway/sim-prod', [started.baseUrl], { production: true }),
      ]),
      { env: { MAX_BODY_BYTES: '2048' } },
    );
  });

  afterAll(async () => {
    await gateway.close();
    await sim.close();
  });

  describe('401', () => {
    it.each([
      ['missing', {}],
      ['malformed', { authorization: 'Token abc' }],
      ['unknown', { authorization: 'Bearer not-a-key' }],
      ['empty bearer', { authorization: 'Bearer ' }],
    ])('%s key: envelope without a code field', async (_name, headers) => {
      for (const path of ['/v1/models', '/v1/models/tollway/sim-chat']) {
        const res = await fetch(`${gateway.baseUrl}${path}`, { headers });
        expect(res.status).toBe(401);
        const body = (await res.json()) as { error: Record<string, unknown> };
        expect(body.error.type).toBe('invalid_request_error');
        expect(body.error.message).toMatch(/invalid api key/i);
        expect('code' in body.error).toBe(false);
      }
      const res = await chat(
        { model: 'tollway/sim-chat', messages: hi },
        { ...headers, 'content-type': 'application/json' },
      );
      expect(res.status).toBe(401);
    });
  });

  describe('400 envelope rows', () => {
    it('invalid_json for a broken body, for no body at all and for JSON that is not an object', async () => {
      for (const body of ['{"model": "tollway/sim-chat", ', '', '[1,2]', '"text"', 'null']) {
        const res = await chat(body);
        expect(res.status).toBe(400);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe('invalid_json');
      }
    });

    it('model_required when model is missing, null or empty', async () => {
      for (const body of [{ messages: hi }, { model: null, messages: hi }, { model: '', messages: hi }, {}]) {
        const res = await chat(body);
        expect(res.status).toBe(400);
        const json = (await res.json()) as { error: { code: string; type: string } };
        expect(json.error).toMatchObject({ code: 'model_required', type: 'invalid_request_error' });
      }
    });

    it('request_too_large over the configured body limit', async () => {
      const res = await chat({ model: 'tollway/sim-chat', messages: [{ role: 'user', content: 'x'.repeat(4000) }] });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('request_too_large');
    });
  });

  describe('404', () => {
    it('model_not_found quotes the id with param null (retrieve and chat)', async () => {
      const res = await fetch(`${gateway.baseUrl}/v1/models/acme/ghost`, { headers: auth });
      expect(res.status).toBe(404);
      const body = (await res.json()) as { error: { code: string; param: unknown; message: string; type: string } };
      expect(body.error).toMatchObject({ code: 'model_not_found', param: null, type: 'invalid_request_error' });
      expect(body.error.message).toContain('acme/ghost');
      const viaChat = await chat({ model: 'acme/ghost', messages: hi });
      expect(viaChat.status).toBe(404);
      expect(((await viaChat.json()) as { error: { message: string } }).error.message).toContain('acme/ghost');
    });

    it('quotes any id a request may carry whole (256 characters), and cuts a longer one', async () => {
      const longest = `acme/${'g'.repeat(251)}`;
      for (const [model, quoted] of [
        [longest, `'${longest}'`],
        [`${longest}xyz`, `'${longest}…'`],
      ] as const) {
        const res = await chat({ model, messages: hi });
        expect(res.status).toBe(404);
        expect(((await res.json()) as { error: { message: string } }).error.message).toContain(quoted);
      }
    });

    it.each(['/v1/completions', '/v1/embeddings', '/v1/responses', '/v1/batches', '/v1/anything/else', '/v1'])(
      'POST and GET %s are 404 with the envelope, with or without a key',
      async (path) => {
        for (const init of [{ method: 'POST', headers: auth, body: '{}' }, { method: 'GET' }]) {
          const res = await fetch(`${gateway.baseUrl}${path}`, init);
          expect(res.status).toBe(404);
          const body = (await res.json()) as { error: { type: string; param: unknown } };
          expect(body.error).toMatchObject({ type: 'invalid_request_error', param: null });
        }
      },
    );
  });

  describe('400 per-parameter failures in the flat engine shape', () => {
    it.each([
      ['temperature', { temperature: 2.5 }],
      ['top_p', { top_p: 1.5 }],
      ['presence_penalty', { presence_penalty: -3 }],
      ['frequency_penalty', { frequency_penalty: 2.1 }],
      ['max_tokens', { max_tokens: 0 }],
      ['max_completion_tokens', { max_completion_tokens: 0 }],
      ['messages', { messages: [] }],
      ['messages[0].role', { messages: [{ role: 'robot', content: 'hi' }] }],
      ['stream', { stream: 'yes' }],
    ])('%s out of the generic bounds', async (param, fields) => {
      const res = await chat({ model: 'tollway/sim-chat', messages: hi, ...fields });
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({
        object: 'error',
        message: expect.any(String),
        type: 'BadRequestError',
        param,
        code: 400,
      });
    });

    it.each([
      ['tollway/sim-narrow', 'n', { n: 2 }],
      ['tollway/sim-narrow', 'presence_penalty', { presence_penalty: 0.5 }],
      ['tollway/sim-narrow', 'frequency_penalty', { frequency_penalty: -0.1 }],
      ['tollway/sim-prod', 'top_p', { top_p: 0.9 }],
    ])('%s narrows %s', async (model, param, fields) => {
      const res = await chat({ model, messages: hi, ...fields });
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({
        object: 'error',
        message: expect.any(String),
        type: 'BadRequestError',
        param,
        code: 400,
      });
    });

    it('accepts what the narrowing allows, and the same values on other models', async () => {
      const ok = [
        ['tollway/sim-narrow', { n: 1, presence_penalty: 0, frequency_penalty: 0 }],
        ['tollway/sim-prod', { top_p: 0.97 }],
        ['tollway/sim-chat', { n: 2, presence_penalty: 0.5, top_p: 0.5 }],
      ] as const;
      for (const [model, fields] of ok) {
        const res = await chat({ model, messages: hi, max_tokens: 3, ...fields });
        expect(res.status).toBe(200);
        const body = (await res.json()) as { choices: unknown[] };
        expect(body.choices).toHaveLength((fields as { n?: number }).n ?? 1);
      }
    });

    it('passes the engine’s own refusal through with its status (context length at the simulated engine)', async () => {
      const res = await chat({
        model: 'tollway/sim-chat',
        messages: [{ role: 'user', content: 'long '.repeat(80) }],
        max_tokens: 10,
      });
      expect(res.status).toBe(400);
      const body = (await res.json()) as { object: string; code: number; message: string };
      expect(body).toMatchObject({ object: 'error', code: 400, type: 'BadRequestError' });
      expect(body.message).toContain('maximum context length');
    });
  });

  // Every answer of POST /v1/chat/completions names its request once in `x-request-id`: the
  // client's own id when it is acceptable, else a fresh UUID. The chat path writes the id with the
  // status line (not set ahead), so each way an answer leaves is checked: JSON, SSE, the envelope,
  // the flat parameter error and an engine's refusal passed through.
  describe('x-request-id on every chat answer', () => {
    const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
    const answers: [string, unknown, Record<string, string>, number][] = [
      ['a JSON completion', { model: 'tollway/sim-chat', messages: hi, max_tokens: 3 }, {}, 200],
      ['a stream', { model: 'tollway/sim-chat', messages: hi, max_tokens: 3, stream: true }, {}, 200],
      ['the 401 envelope', { model: 'tollway/sim-chat', messages: hi }, { authorization: 'Bearer not-a-key' }, 401],
      ['the 404 envelope', { model: 'tollway/nope', messages: hi }, {}, 404],
      ['a body that is not JSON', '{"model":', {}, 400],
      ['the flat parameter error', { model: 'tollway/sim-chat', messages: hi, temperature: 9 }, {}, 400],
      [
        'an engine refusal passed through',
        { model: 'tollway/sim-chat', messages: [{ role: 'user', content: 'long '.repeat(80) }], max_tokens: 10 },
        {},
        400,
      ],
    ];

    it.each(answers)('%s carries the client’s id, once', async (_name, body, headers, status) => {
      const id = `client-${randomUUID()}`;
      const res = await chat(body, { ...auth, 'x-request-id': id, ...headers });
      expect(res.status).toBe(status);
      expect(res.headers.get('x-request-id')).toBe(id); // a second header would read "id, id"
      await res.arrayBuffer();
    });

    it.each(answers)(
      '%s gets a fresh UUID when the client sends none or one not acceptable',
      async (_n, body, h, st) => {
        const seen = new Set<string>();
        for (const incoming of [undefined, 'has spaces in it', 'x'.repeat(129), 'semi;colon']) {
          const res = await chat(body, {
            ...auth,
            ...(incoming === undefined ? {} : { 'x-request-id': incoming }),
            ...h,
          });
          expect(res.status).toBe(st);
          const id = res.headers.get('x-request-id') ?? '';
          expect(id).toMatch(UUID);
          seen.add(id);
          await res.arrayBuffer();
        }
        expect(seen.size).toBe(4);
      },
    );
  });

  it('serves healthz, readyz and the OpenAPI document without a key', async () => {
    expect((await fetch(`${gateway.baseUrl}/healthz`)).status).toBe(200);
    const ready = await fetch(`${gateway.baseUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ok', redis: true, models: { 'tollway/sim-chat': true } });
    const doc = (await (await fetch(`${gateway.baseUrl}/openapi.json`)).json()) as {
      openapi: string;
      info: { version: string };
    };
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('2026-09-17');
  });
});
