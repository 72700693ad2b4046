import { answerOf, CHAT_CASE } from './case-fixtures';
import { HOSTILE_ENGINE_JSON, HOSTILE_ENGINE_STREAM } from './endpoints';
import { FAITHFUL_MODEL, LYING_MODEL, REFUSING_MODEL } from './hostile-engine';
import type { FuzzCase } from './fuzz-case';
import { judgeAnswer } from './oracles';
import type { Outcome } from './raw-http';

const base = CHAT_CASE;
const answer = answerOf;
const rules = (c: FuzzCase, outcome: Outcome) => judgeAnswer(c, outcome).map((p) => p.rule);
const COMPLETION = {
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 1,
  model: 'tollway/sim-chat',
  choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, logprobs: null, finish_reason: 'stop' }],
  usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
};
const envelope = { error: { message: 'm', type: 'invalid_request_error', param: null, code: 'invalid_json' } };

describe('judgeAnswer', () => {
  it('accepts a 2xx and a 4xx in the envelope', () => {
    expect(rules(base, answer(200, COMPLETION))).toEqual([]);
    expect(rules(base, answer(400, envelope))).toEqual([]);
  });

  it('flags a 5xx, a hang, and a 4xx outside the error shape', () => {
    expect(rules(base, answer(500, envelope))).toEqual(['status']);
    expect(rules(base, { kind: 'hang', ms: 10_000, status: null, bodyBytes: 0 })).toEqual(['hang']);
    expect(rules(base, answer(400, ''))).toEqual(['shape']);
    expect(rules(base, answer(400, '<html>bad</html>', 'text/html'))).toEqual(['shape']);
    expect(rules(base, answer(400, { message: 'flat but not the engine shape' }))).toEqual(['shape']);
  });

  it("takes the engine's flat shape and text/plain prefix on the chat endpoint only", () => {
    const flat = { object: 'error', message: 'n must be 1', type: 'BadRequestError', param: 'n', code: 400 };
    expect(rules(base, answer(400, flat))).toEqual([]);
    expect(rules(base, answer(400, 'Inference error: n must be 1', 'text/plain; charset=utf-8'))).toEqual([]);
    const models = { ...base, method: 'GET', target: '/v1/models/x' };
    expect(rules(models, answer(400, flat))).toEqual(['shape']);
  });

  it('wants no code on a gateway 401 and a string code on every session error', () => {
    expect(rules(base, answer(401, envelope))).toEqual(['shape']);
    expect(
      rules(base, answer(401, { error: { message: 'Invalid API key', type: 'invalid_request_error', param: null } })),
    ).toEqual([]);
    const session = { ...base, service: 'sessions' as const, target: '/sessions' };
    expect(rules(session, answer(404, { error: { message: 'm', type: 't', param: null, code: 'not_found' } }))).toEqual(
      [],
    );
    expect(rules(session, answer(404, { error: { message: 'm', type: 't', param: null } }))).toEqual(['shape']);
  });

  it('flags a 2xx for a request that must be refused, and takes a clean close', () => {
    expect(rules({ ...base, mustRefuse: true }, answer(200, COMPLETION))).toEqual(['refusal']);
    expect(rules({ ...base, mustRefuse: true }, { kind: 'closed', ms: 1, reason: 'end' })).toEqual([]);
  });

  it("wants an answer's x-request-id sent once, safe, and the client's own when that was acceptable", () => {
    const withId = (id: string, repeated: string[] = []): Outcome => {
      const outcome = answer(200, COMPLETION);
      if (outcome.kind !== 'response') throw new Error('unreachable');
      return { ...outcome, headers: { ...outcome.headers, 'x-request-id': id }, repeatedHeaders: repeated };
    };
    const uuid = '0b6f3c1e-3a4d-4b8e-9f10-2c3d4e5f6a7b';
    const sending = (value: string | Uint8Array): FuzzCase => ({ ...base, headers: [['X-Request-Id', value]] });
    expect(rules(base, answer(200, COMPLETION))).toEqual([]); // no id at all (node's own refusals)
    expect(rules(base, withId(uuid))).toEqual([]);
    expect(rules(sending('client.id:1'), withId('client.id:1'))).toEqual([]);
    expect(rules(sending('client.id:1'), withId(uuid))).toEqual(['request-id']); // not echoed
    expect(rules(sending('has space'), withId(uuid))).toEqual([]);
    expect(rules(sending('has space'), withId('has space'))).toEqual(['request-id']); // reflected
    expect(rules(sending(new Uint8Array([0x61, 0x0a])), withId('a, b'))).toEqual(['request-id']);
    expect(rules(base, withId(uuid, ['x-request-id']))).toEqual(['request-id']); // twice
  });
});

describe('judgeAnswer on event streams', () => {
  const head = '{"id":"c","object":"chat.completion.chunk","created":1,"model":"a/b",';
  const role = `${head}"choices":[{"index":0,"delta":{"role":"assistant"}}]}`;
  const totals = `${head}"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1}}`;
  const error = '{"error":{"message":"m","type":"server_error","param":null,"code":"engine_stream_error"}}';
  const stream = (...payloads: string[]) =>
    answer(200, payloads.map((payload) => `data: ${payload}\n\n`).join(''), 'text/event-stream; charset=utf-8');
  const hostile = { ...base, endpoint: HOSTILE_ENGINE_STREAM };

  it('checks the six Events rules on a stream read whole', () => {
    expect(rules(base, stream(role, totals, '[DONE]'))).toEqual([]);
    expect(rules(base, stream(totals, '[DONE]'))).toEqual(['events']);
    expect(rules(base, stream(role, error))).toEqual(['events']);
  });

  it("lets a misbehaving engine's stream end in an error event, not the faithful engine's", () => {
    expect(judgeAnswer(hostile, stream(role, error), 'hostile/cut')).toEqual([]);
    expect(judgeAnswer(hostile, stream(role, error), FAITHFUL_MODEL).map((p) => p.rule)).toEqual(['events']);
  });

  it('leaves a stream longer than the client kept alone', () => {
    expect(rules(base, answer(200, `data: ${totals}\n\n`, 'text/event-stream', 1_000_000))).toEqual([]);
  });
});

describe('judgeAnswer on a 200 chat completion', () => {
  it('wants a ChatCompletionResponse on the chat path, read whole', () => {
    expect(rules(base, answer(200, COMPLETION))).toEqual([]);
    expect(rules(base, answer(200, { ...COMPLETION, created: 'now' }))).toEqual(['shape']);
    expect(rules(base, answer(200, { ...COMPLETION, choices: [{ index: 0, message: { role: 'user' } }] }))).toEqual([
      'shape',
    ]);
    expect(rules(base, answer(200, '{"id":'))).toEqual(['shape']);
  });

  it('leaves other paths and answers cut short alone', () => {
    expect(rules({ ...base, target: '/v1/models' }, answer(200, { object: 'list', data: [] }))).toEqual([]);
    expect(rules(base, answer(200, '{"id":', 'application/json', 1_000_000))).toEqual([]);
  });
});

describe("judgeAnswer on the lying engine's answers", () => {
  const hostile = { ...base, endpoint: HOSTILE_ENGINE_JSON };
  const judge = (usage: unknown) =>
    judgeAnswer(hostile, answerOf(200, { ...COMPLETION, usage }), LYING_MODEL).map((p) => p.rule);

  it('wants counts within the bounds, adding up, whatever the engine said', () => {
    expect(judge({ prompt_tokens: 8, completion_tokens: 2, total_tokens: 10 })).toEqual([]);
    expect(judge({ prompt_tokens: 1e308, completion_tokens: 1, total_tokens: 1e308 })).toContain('billing');
    expect(judge({ prompt_tokens: -5, completion_tokens: 1, total_tokens: -4 })).toContain('billing');
    expect(judge({ prompt_tokens: 2 ** 40, completion_tokens: 1, total_tokens: 2 ** 40 + 1 })).toContain('billing');
    expect(judge({ prompt_tokens: 8, completion_tokens: 2, total_tokens: 11 })).toContain('billing');
    // Only the lying engine's answers are judged so: its usage is the one the gateway must replace.
    const faithful = judgeAnswer(
      hostile,
      answerOf(200, { ...COMPLETION, usage: { prompt_tokens: -5 } }),
      FAITHFUL_MODEL,
    );
    expect(faithful.map((p) => p.rule)).not.toContain('billing');
  });
});

describe('judgeAnswer on an engine refusal', () => {
  const hostile = { ...base, endpoint: HOSTILE_ENGINE_JSON };
  const refused = (status: number, body: unknown, headers: Record<string, string> = {}): Outcome => {
    const answer = answerOf(status, body);
    return answer.kind === 'response' ? { ...answer, headers: { ...answer.headers, ...headers } } : answer;
  };
  const overloaded = {
    error: { message: 'm', type: 'invalid_request_error', param: null, code: 'provider_overloaded' },
  };
  const judge = (outcome: Outcome) => judgeAnswer(hostile, outcome, REFUSING_MODEL).map((p) => p.rule);

  it('wants a usable wait on a 429 and no word of the engine message', () => {
    expect(judge(refused(429, overloaded, { 'retry-after-ms': '60000' }))).toEqual([]);
    expect(judge(refused(429, overloaded, { 'retry-after-ms': '9'.repeat(40) }))).toEqual(['shape']);
    expect(judge(refused(429, overloaded))).toEqual(['shape']);
    const leaked = {
      error: {
        message: 'Incorrect API key provided: sk-engine-x',
        type: 'server_error',
        param: null,
        code: 'engine_refused',
      },
    };
    expect(judge(refused(502, leaked))).toEqual(['shape']);
    expect(judgeAnswer(hostile, refused(429, overloaded), 'hostile/cut')).toEqual([]);
  });
});
