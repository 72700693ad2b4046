import { createLogger } from '@tollway/service-kit';
import type { AgentContext, AgentInput } from '../../src/agents/agent.types';
import calculatorAgent from '../../src/agents/calculator.agent';
import chatAgent from '../../src/agents/chat.agent';
import { createGatewayClient } from '../../src/agents/gateway-client';
import { completion, sendJson, startTestServer, type Received, type TestServer } from './worker-harness';

type Reply = (res: import('node:http').ServerResponse, request: Received) => void;

let gateway: TestServer;
let replies: Reply[] = [];
const times: number[] = [];

beforeAll(async () => {
  gateway = await startTestServer((request, res, index) => {
    times[index] = Date.now();
    const reply = replies.shift();
    if (reply) reply(res, request);
    else sendJson(res, 500, { error: { message: 'no reply scripted', type: 'server_error', param: null, code: null } });
  });
});

afterAll(() => gateway.close());

beforeEach(() => {
  gateway.received.length = 0;
  times.length = 0;
  replies = [];
});

function context(maxModelTries = 3): AgentContext {
  return {
    openai: createGatewayClient({ baseURL: `${gateway.url}/v1`, apiKey: 'sk-agent', timeoutMs: 5000 }),
    logger: createLogger({ service: 'agent-test', silent: true }),
    signal: new AbortController().signal,
    settings: { defaultModel: 'tollway/sim-chat', maxModelTries, retryBaseDelayMs: 20, retryMaxDelayMs: 40 },
  };
}

const input = (userParams: Record<string, unknown> | null = null): AgentInput => ({
  history: [
    { role: 'system', content: 'be brief' },
    { role: 'user', content: 'earlier' },
    { role: 'assistant', content: 'noted' },
  ],
  message: { role: 'user', content: 'hello' },
  userParams,
});

const envelope = (message: string, code: string, type = 'invalid_request_error') => ({
  error: { message, type, param: null, code },
});

describe('the default chat agent', () => {
  it('sends the history plus the new message, the default model, and appends the reply with its usage', async () => {
    replies = [(res) => sendJson(res, 200, completion('hi there', 11))];
    const result = await chatAgent(input(), context());
    expect(result).toEqual({ messages: [{ role: 'assistant', content: 'hi there' }], usage: { total_tokens: 11 } });
    const sent = gateway.received[0]!;
    expect(sent.url).toBe('/v1/chat/completions');
    expect(sent.headers.authorization).toBe('Bearer sk-agent');
    expect(sent.json).toEqual({
      model: 'tollway/sim-chat',
      stream: false,
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'earlier' },
        { role: 'assistant', content: 'noted' },
        { role: 'user', content: 'hello' },
      ],
    });
  });

  it('lets user_params choose the model and sampling parameters, ignoring keys it does not know', async () => {
    replies = [(res) => sendJson(res, 200, completion('ok'))];
    await chatAgent(
      input({ model: 'acme/big', temperature: 0.2, top_p: 0.9, max_tokens: 5, stop: ['x'], trace: 'yes' }),
      context(),
    );
    expect(gateway.received[0]!.json).toMatchObject({
      model: 'acme/big',
      temperature: 0.2,
      top_p: 0.9,
      max_tokens: 5,
      stop: ['x'],
    });
    expect(gateway.received[0]!.json).not.toHaveProperty('trace');
  });

  it('fails the turn without a model call when a known user_param has the wrong type', async () => {
    await expect(chatAgent(input({ temperature: 'hot' }), context())).rejects.toThrow(/user_params\.temperature/);
    expect(gateway.received).toHaveLength(0);
  });

  it('passes base64_image as an image content part', async () => {
    replies = [(res) => sendJson(res, 200, completion('a cat'))];
    const png = 'iVBORw0KGgoAAAANSUhEUg==';
    await chatAgent(
      { history: [], message: { role: 'user', content: 'what is this?', base64_image: png }, userParams: null },
      context(),
    );
    expect((gateway.received[0]!.json as { messages: unknown[] }).messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'what is this?' },
          { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } },
        ],
      },
    ]);
  });

  it('retries a 429 after retry-after-ms, preferred over retry-after', async () => {
    replies = [
      (res) =>
        sendJson(res, 429, envelope('Rate limit reached for requests', 'rate_limit_exceeded', 'requests'), {
          'retry-after-ms': '150',
          'retry-after': '10',
        }),
      (res) => sendJson(res, 200, completion('after the wait')),
    ];
    const result = await chatAgent(input(), context());
    expect(result.messages[0]!.content).toBe('after the wait');
    expect(gateway.received).toHaveLength(2);
    const waited = times[1]! - times[0]!;
    expect(waited).toBeGreaterThanOrEqual(140);
    expect(waited).toBeLessThan(2000);
  });

  it('retries 5xx with back-off and succeeds', async () => {
    replies = [
      (res) => sendJson(res, 503, envelope('overloaded', 'unavailable', 'server_error')),
      (res) => sendJson(res, 500, { error: 'boom' }),
      (res) => sendJson(res, 200, completion('third time')),
    ];
    const result = await chatAgent(input(), context(3));
    expect(result.messages[0]!.content).toBe('third time');
    expect(gateway.received).toHaveLength(3);
  });

  it('gives up after the bounded number of tries with the gateway message', async () => {
    replies = [0, 1, 2, 3].map(
      () => (res) => sendJson(res, 502, envelope('engine unreachable', 'bad_gateway', 'server_error')),
    );
    await expect(chatAgent(input(), context(3))).rejects.toThrow('engine unreachable');
    expect(gateway.received).toHaveLength(3);
  });

  it('never retries 400: the engine flat error message fails the turn', async () => {
    replies = [
      (res) =>
        sendJson(res, 400, {
          object: 'error',
          message: 'top_p must be in [0.95, 1.0]',
          type: 'BadRequestError',
          param: 'top_p',
          code: 400,
        }),
    ];
    await expect(chatAgent(input({ top_p: 0.5 }), context())).rejects.toThrow(/^top_p must be in \[0\.95, 1\.0\]$/);
    expect(gateway.received).toHaveLength(1);
  });

  it('never retries a text/plain 400 and reports its text', async () => {
    replies = [
      (res) => {
        res.writeHead(400, { 'content-type': 'text/plain' });
        res.end('InferenceError: bad sampling parameters');
      },
    ];
    await expect(chatAgent(input(), context())).rejects.toThrow('InferenceError: bad sampling parameters');
    expect(gateway.received).toHaveLength(1);
  });

  it.each([
    [401, { error: { message: 'Invalid API key provided', type: 'invalid_request_error', param: null } }],
    [402, envelope('You exceeded your current quota', 'insufficient_quota')],
    [404, envelope('The model `acme/none` does not exist', 'model_not_found')],
  ])('never retries %i', async (status, body) => {
    replies = [(res) => sendJson(res, status, body), (res) => sendJson(res, 200, completion('must not happen'))];
    await expect(chatAgent(input(), context())).rejects.toThrow((body as { error: { message: string } }).error.message);
    expect(gateway.received).toHaveLength(1);
  });

  it('never retries a response carrying x-should-retry: false', async () => {
    replies = [
      (res) =>
        sendJson(res, 429, envelope('Model at capacity', 'provider_overloaded'), {
          'x-should-retry': 'false',
          'retry-after-ms': '10',
        }),
      (res) => sendJson(res, 200, completion('must not happen')),
    ];
    await expect(chatAgent(input(), context())).rejects.toThrow('Model at capacity');
    expect(gateway.received).toHaveLength(1);
  });
});

describe('the example calculator agent', () => {
  it('runs the tool call and appends the tool-call message, the tool result and the final answer', async () => {
    const toolCall = {
      id: 'call_1',
      type: 'function',
      function: { name: 'calculator', arguments: '{"expression":"(2+3)*4"}' },
    };
    replies = [
      (res) => sendJson(res, 200, completion(null, 9, [toolCall])),
      (res) => sendJson(res, 200, completion('The answer is 20.', 13)),
    ];
    const result = await calculatorAgent(input(), context());
    expect(result).toEqual({
      messages: [
        { role: 'assistant', content: null, tool_calls: [toolCall] },
        { role: 'tool', content: '20', tool_call_id: 'call_1' },
        { role: 'assistant', content: 'The answer is 20.' },
      ],
      usage: { total_tokens: 22 },
    });
    const first = gateway.received[0]!.json as { tools: Array<{ function: { name: string } }> };
    expect(first.tools[0]!.function.name).toBe('calculator');
    const second = gateway.received[1]!.json as { messages: unknown[] };
    expect(second.messages.slice(-2)).toEqual([
      { role: 'assistant', content: null, tool_calls: [toolCall] },
      { role: 'tool', content: '20', tool_call_id: 'call_1' },
    ]);
  });
});
