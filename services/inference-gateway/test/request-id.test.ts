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

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

// Every answer of POST /v1/chat/completions names its request once in `x-request-id`: the client's
// own id when it is acceptable, else a fresh UUID. The chat path writes the id with the status line
// (not set ahead), so each way an answer leaves is checked: JSON, SSE, the error envelope, the flat
// parameter error and an engine's refusal passed through.
describe('x-request-id on chat completions', () => {
  let sim: SimServer;
  let gateway: GatewayHarness;
  const hi = [{ role: 'user', content: 'hi' }];

  beforeAll(async () => {
    const started = await startSim({ max_model_len: 64 });
    sim = started.sim;
    gateway = await startGateway(catalogModels([httpModel('tollway/sim-chat', [started.baseUrl])]));
  });

  afterAll(async () => {
    await gateway.close();
    await sim.close();
  });

  const chat = (body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${gateway.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });

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
    const res = await chat(body, { 'x-request-id': id, ...headers });
    expect(res.status).toBe(status);
    expect(res.headers.get('x-request-id')).toBe(id); // a second header would read "id, id"
    await res.arrayBuffer();
  });

  it.each(answers)('%s gets a fresh UUID when the client sends none or one not acceptable', async (_n, body, h, st) => {
    const seen = new Set<string>();
    for (const incoming of [undefined, 'has spaces in it', 'x'.repeat(129), 'semi;colon']) {
      const res = await chat(body, { ...(incoming === undefined ? {} : { 'x-request-id': incoming }), ...h });
      expect(res.status).toBe(st);
      const id = res.headers.get('x-request-id') ?? '';
      expect(id).toMatch(UUID);
      seen.add(id);
      await res.arrayBuffer();
    }
    expect(seen.size).toBe(4);
  });
});
