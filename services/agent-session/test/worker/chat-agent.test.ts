import { createLogger } from '@tollway/service-kit';
import type { AgentContext, AgentInput, AgentStreamEvent } from '../../src/agents/agent.types';
import { AgentEventEmitter } from '../../src/agents/agent-events';
import calculatorAgent from '../../src/agents/calculator.agent';
import chatAgent from '../../src/agents/chat.agent';
import { createGatewayClient } from '../../src/agents/gateway-client';
import { completion, sendJson, sendStream, startTestServer, type Received, type TestServer } from './worker-harness';

type Reply = (res: import('node:http').ServerResponse, request: Received) => void;

let gateway: TestServer;
let replies: Reply[] = [];
const times: number[] = [];
/** The events the agent under test emitted (`ctx.events` of the last context made), in order. */
let emitted: AgentStreamEvent[] = [];
let emitter: AgentEventEmitter;

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

/** A turn's context; `live`: its session has readers (the agent streams its calls then). */
function context(maxModelTries = 3, live = true): AgentContext {
  const sink: AgentStreamEvent[] = [];
  emitted = sink;
  emitter = new AgentEventEmitter((batch) => sink.push(...batch), live);
  return {
    openai: createGatewayClient({ baseURL: `${gateway.url}/v1`, apiKey: 'sk-agent', timeoutMs: 5000 }),
    logger: createLogger({ service: 'agent-test', silent: true }),
    signal: new AbortController().signal,
    settings: { defaultModel: 'tollway/sim-chat', maxModelTries, retryBaseDelayMs: 20, retryMaxDelayMs: 40 },
    events: emitter,
    sessionId: 'session-1',
  };
}

/** The events emitted, once the agent has returned. */
function events(): AgentStreamEvent[] {
  emitter.flush();
  return emitted;
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

describe('a turn no one reads', () => {
  it('calls the model whole (no stream) and forwards its answer as one delta', async () => {
    replies = [(res) => sendJson(res, 200, completion('hi there, all at once', 9))];
    const result = await chatAgent(input(), context(3, false));
    expect(result.messages).toEqual([{ role: 'assistant', content: 'hi there, all at once' }]);
    const body = gateway.received[0]?.json as { stream?: boolean; stream_options?: unknown };
    expect(body.stream).toBe(false);
    expect(body.stream_options).toBeUndefined();
    expect(events()).toEqual([{ type: 'message.delta', message_index: 0, content: 'hi there, all at once' }]);
  });

  it('streams the calls made once a reader came', async () => {
    replies = [(res) => sendJson(res, 200, completion('before', 5)), (res) => sendStream(res, 'after', 5)];
    const ctx = context(3, false);
    await chatAgent(input(), ctx);
    emitter.goLive();
    await chatAgent(input(), ctx);
    const bodies = gateway.received.map((request) => (request.json as { stream?: boolean }).stream);
    expect(bodies).toEqual([false, true]);
  });
});

describe('the default chat agent', () => {
  it('sends the history plus the new message, the default model, and appends the reply with its usage', async () => {
    replies = [(res) => sendStream(res, 'hi there', 11)];
    const result = await chatAgent(input(), context());
    expect(result).toEqual({ messages: [{ role: 'assistant', content: 'hi there' }], usage: { total_tokens: 11 } });
    const sent = gateway.received[0]!;
    expect(sent.url).toBe('/v1/chat/completions');
    expect(sent.headers.authorization).toBe('Bearer sk-agent');
    expect(sent.json).toEqual({
      model: 'tollway/sim-chat',
      user: 'session-1',
      stream: true,
      stream_options: { include_usage: true },
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'earlier' },
        { role: 'assistant', content: 'noted' },
        { role: 'user', content: 'hello' },
      ],
    });
  });

  it('lets user_params choose the model and sampling parameters, ignoring keys it does not know', async () => {
    replies = [(res) => sendStream(res, 'ok')];
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

  it("names the session as the call's user (for the gateway's routing), unless user_params sets one", async () => {
    replies = [(res) => sendStream(res, 'ok'), (res) => sendStream(res, 'ok')];
    await chatAgent(input(), context());
    await chatAgent(input({ user: 'end-user-7' }), context());
    expect(gateway.received.map((request) => (request.json as { user?: string }).user)).toEqual([
      'session-1',
      'end-user-7',
    ]);
  });

  it('fails the turn without a model call when a known user_param has the wrong type', async () => {
    await expect(chatAgent(input({ temperature: 'hot' }), context())).rejects.toThrow(/user_params\.temperature/);
    expect(gateway.received).toHaveLength(0);
  });

  it('passes base64_image as an image content part', async () => {
    replies = [(res) => sendStream(res, 'a cat')];
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
      (res) => sendStream(res, 'after the wait'),
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
      (res) => sendStream(res, 'third time'),
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
    replies = [(res) => sendJson(res, status, body), (res) => sendStream(res, 'must not happen')];
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
      (res) => sendStream(res, 'must not happen'),
    ];
    await expect(chatAgent(input(), context())).rejects.toThrow('Model at capacity');
    expect(gateway.received).toHaveLength(1);
  });
});

describe('the example calculator agent', () => {
  it('runs the tool call and appends the tool-call message, the tool result and the final answer', async () => {
    const toolCall = {
      id: 'call_1',
      type: 'function' as const,
      function: { name: 'calculator', arguments: '{"expression":"(2+3)*4"}' },
    };
    replies = [
      (res) => sendStream(res, null, 9, { toolCalls: [toolCall] }),
      (res) => sendStream(res, 'The answer is 20.', 13),
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
    // Readers see the call form (its arguments in pieces), its result, then the answer, as a second message.
    const seen = events();
    const calls = seen.filter((event) => event.type === 'tool_call.delta');
    expect(calls[0]).toMatchObject({ message_index: 0, index: 0, id: 'call_1', name: 'calculator' });
    expect(calls.map((event) => event.arguments ?? '').join('')).toBe(toolCall.function.arguments);
    expect(seen.filter((event) => event.type === 'tool.result')).toEqual([
      { type: 'tool.result', tool_call_id: 'call_1', content: '20' },
    ]);
    const answer = seen.filter((event) => event.type === 'message.delta');
    expect(answer.every((event) => event.message_index === 1)).toBe(true);
    expect(answer.map((event) => event.content).join('')).toBe('The answer is 20.');
    expect(seen.findIndex((event) => event.type === 'tool.result')).toBeLessThan(
      seen.findIndex((event) => event.type === 'message.delta'),
    );
  });
});

describe('streamed model calls', () => {
  it("forwards the reply's deltas as they come: they concatenate to the content it appends", async () => {
    const text = 'A reply long enough to come in many pieces, with ünïcödé and a\nnew line.';
    replies = [(res) => sendStream(res, text, 21, { reasoning: 'think first' })];
    const result = await chatAgent(input(), context());
    expect(result.messages).toEqual([{ role: 'assistant', content: text }]);
    expect(result.usage).toEqual({ total_tokens: 21 });
    const deltas = events().filter((event) => event.type === 'message.delta');
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.every((event) => event.message_index === 0)).toBe(true);
    expect(deltas.map((event) => event.content ?? '').join('')).toBe(text);
    expect(deltas.map((event) => event.reasoning_content ?? '').join('')).toBe('think first');
  });

  it('never retries a stream cut after its first delta: readers saw it, so the call fails', async () => {
    replies = [(res) => sendStream(res, 'cut short here', 9, { cutAfter: 2 }), (res) => sendStream(res, 'second try')];
    await expect(chatAgent(input(), context(3))).rejects.toThrow();
    expect(gateway.received).toHaveLength(1);
    expect(
      events()
        .map((event) => (event.type === 'message.delta' ? event.content : ''))
        .join(''),
    ).toBe('cut sh');
  });

  it('retries a stream cut before any delta, and forwards only the try that answered', async () => {
    replies = [(res) => sendStream(res, 'lost', 9, { cutAfter: 0 }), (res) => sendStream(res, 'second try')];
    const result = await chatAgent(input(), context(3));
    expect(result.messages[0]!.content).toBe('second try');
    expect(gateway.received).toHaveLength(2);
    expect(
      events()
        .map((event) => (event.type === 'message.delta' ? event.content : ''))
        .join(''),
    ).toBe('second try');
  });

  it('takes a whole JSON completion from a server that does not stream, and forwards its text as one delta', async () => {
    replies = [(res) => sendJson(res, 200, completion('all at once', 8))];
    const result = await chatAgent(input(), context());
    expect(result).toEqual({ messages: [{ role: 'assistant', content: 'all at once' }], usage: { total_tokens: 8 } });
    expect(events()).toEqual([{ type: 'message.delta', message_index: 0, content: 'all at once' }]);
  });

  it("fails with the stream's own error event, as the gateway sends one", async () => {
    replies = [
      (res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(`data: ${JSON.stringify({ error: { message: 'engine went away', type: 'server_error' } })}\n\n`);
      },
    ];
    await expect(chatAgent(input(), context(1))).rejects.toThrow('engine went away');
  });
});
