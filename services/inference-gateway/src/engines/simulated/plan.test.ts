import type { CreateChatCompletionRequest } from '@tollway/contracts';
import { countTextTokens } from '../../tokenizer/count-tokens';
import { planCompletion } from './plan';
import { renderCompletion, renderStep, tokenSteps } from './render';

const base: CreateChatCompletionRequest = { model: 'm/x', messages: [{ role: 'user', content: 'Describe the sea.' }] };
const options = { defaultMaxTokens: 64, reasoning: false };

/**
 * The plan of `n` answers of 20 tokens whose tool call and JSON answer must follow `schema`,
 * checked to take under a second (hostile schemas held the event loop for seconds).
 */
function planForcedToolCall(schema: unknown, n: number) {
  const started = performance.now();
  const answer = planCompletion(
    {
      ...base,
      max_tokens: 20,
      n,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema } },
      tools: [{ type: 'function', function: { name: 'f', parameters: schema } }],
      tool_choice: 'required',
    } as never,
    options,
  );
  expect(performance.now() - started).toBeLessThan(1000);
  return answer;
}

describe('simulated completion plan', () => {
  it('is deterministic for a prompt and seed, and changes with either', () => {
    const text = (request: CreateChatCompletionRequest) =>
      planCompletion(request, options).choices[0]?.contentPieces.join('');
    expect(text({ ...base, seed: 7 })).toBe(text({ ...base, seed: 7 }));
    expect(text({ ...base, seed: 7 })).not.toBe(text({ ...base, seed: 8 }));
    expect(text(base)).not.toBe(text({ ...base, messages: [{ role: 'user', content: 'Describe the land.' }] }));
  });

  it('counts one token per piece, as the tokenizer does', () => {
    const plan = planCompletion(base, options);
    const choice = plan.choices[0]!;
    expect(countTextTokens(choice.contentPieces.join(''))).toBe(choice.completionTokens);
    expect(choice.finishReason).toBe('stop');
  });

  it('stops at max_tokens with finish_reason length', () => {
    const plan = planCompletion({ ...base, max_completion_tokens: 3 }, options);
    expect(plan.choices[0]).toMatchObject({ finishReason: 'length', completionTokens: 3 });
  });

  it('cuts before a stop string with finish_reason stop', () => {
    const full = planCompletion(base, options).choices[0]!.contentPieces.join('');
    const stop = full.split(' ').slice(3, 4).join(' ');
    const plan = planCompletion({ ...base, stop: [` ${stop}`] }, options);
    const text = plan.choices[0]!.contentPieces.join('');
    expect(text).toBe(full.slice(0, full.indexOf(` ${stop}`)));
    expect(plan.choices[0]!.finishReason).toBe('stop');
  });

  it('writes up to max_tokens when told to ignore the end of sentences', () => {
    const plan = planCompletion({ ...base, max_tokens: 300 }, { ...options, ignoreEos: true });
    expect(plan.choices[0]).toMatchObject({ completionTokens: 300, finishReason: 'length' });
    expect(countTextTokens(plan.choices[0]!.contentPieces.join(''))).toBe(300);
  });

  it('gives n different choices', () => {
    const plan = planCompletion({ ...base, n: 3 }, options);
    expect(plan.choices.map((choice) => choice.index)).toEqual([0, 1, 2]);
    expect(new Set(plan.choices.map((choice) => choice.contentPieces.join(''))).size).toBe(3);
    expect(plan.completionTokens).toBe(plan.choices.reduce((sum, choice) => sum + choice.completionTokens, 0));
  });

  it('answers valid JSON for response_format json_object and json_schema', () => {
    const object = planCompletion({ ...base, response_format: { type: 'json_object' } }, options);
    expect(JSON.parse(object.choices[0]!.contentPieces.join(''))).toEqual({ answer: expect.any(String) });
    const schema = {
      type: 'object',
      properties: {
        name: { type: 'string' },
        age: { type: 'integer' },
        tags: { type: 'array', items: { type: 'string' } },
        ok: { type: 'boolean' },
      },
    };
    const typed = planCompletion(
      { ...base, response_format: { type: 'json_schema', json_schema: { name: 's', schema } } },
      options,
    );
    const value = JSON.parse(typed.choices[0]!.contentPieces.join('')) as Record<string, unknown>;
    expect(value).toEqual({
      name: expect.any(String),
      age: expect.any(Number),
      tags: [expect.any(String), expect.any(String)],
      ok: expect.any(Boolean),
    });
  });

  it('calls a tool when required, forced by name, or named in the prompt; not for none or unrelated prompts', () => {
    const tools = [
      {
        type: 'function',
        function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
      },
      { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } },
    ];
    const call = (request: Partial<CreateChatCompletionRequest>) =>
      planCompletion({ ...base, tools, ...request }, options).choices[0]!;
    expect(call({ tool_choice: 'required' }).toolCall?.name).toBe('get_weather');
    expect(call({ tool_choice: 'required' }).finishReason).toBe('tool_calls');
    expect(call({ tool_choice: { type: 'function', function: { name: 'get_time' } } }).toolCall?.name).toBe('get_time');
    expect(call({ messages: [{ role: 'user', content: 'please use get_time' }] }).toolCall?.name).toBe('get_time');
    expect(call({}).toolCall).toBeNull();
    expect(call({ tool_choice: 'none', messages: [{ role: 'user', content: 'use get_time' }] }).toolCall).toBeNull();
    const args = call({ tool_choice: 'required' }).toolCall!.argumentPieces.join('');
    expect(JSON.parse(args)).toEqual({ city: expect.any(String) });
  });

  it("answers in text once the named tool's result follows the user's message, so an agent loop ends", () => {
    const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }];
    const asked = { role: 'user', content: 'What does get_weather say for Paris?' };
    const called = {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }],
    };
    const result = { role: 'tool', content: '18 C', tool_call_id: 'call_1' };
    const plan = (messages: unknown[], extra = {}) =>
      planCompletion({ ...base, tools, messages, ...extra } as never, options).choices[0]!;
    expect(plan([asked]).toolCall?.name).toBe('get_weather');
    const answer = plan([asked, called, result]);
    expect(answer.toolCall).toBeNull();
    expect(answer.finishReason).toBe('stop');
    // A new question names the tool again: a new call.
    expect(
      plan([asked, called, result, { role: 'user', content: 'And get_weather for Rome?' }]).toolCall,
    ).not.toBeNull();
    // Required stays required.
    expect(plan([asked, called, result], { tool_choice: 'required' }).toolCall).not.toBeNull();
  });

  // A guard against a stall, not a benchmark: unbounded, these took 4.9 s and 20 s of one core.
  it.each([
    ['arrays nested six deep around 5000 properties', 'nested'],
    ['a property name of 100 000 letters', 'long'],
  ])('samples a schema of %s within its budget, in well under a second', (_name, kind) => {
    const properties: Record<string, unknown> = {};
    for (let i = 0; i < 5000; i++) properties[`p${i}`] = { type: 'string' };
    let schema: unknown = { type: 'object', properties };
    for (let depth = 0; depth < 6; depth++) schema = { type: 'array', items: schema };
    if (kind === 'long') schema = { type: 'object', properties: { ['x'.repeat(100_000)]: { type: 'string' } } };
    const answer = planForcedToolCall(schema, 4);
    for (const choice of answer.choices) {
      expect(choice.toolCall!.argumentPieces.length).toBeLessThanOrEqual(20);
      expect(choice.finishReason).toBe('length');
    }
  });

  // Object.entries made an entry per character of such a string first: 12 s and 600 MB.
  it.each([
    ['an object (as an empty object)', { type: 'object', properties: 'x'.repeat(3_000_000) }, /^\{\}$/],
    ['a schema without a type (as a string)', { properties: 'x'.repeat(3_000_000) }, /^"\w+"$/],
  ])('samples %s whose properties are a 3 MB string at once', (_name, schema, expected) => {
    const answer = planForcedToolCall(schema, 1);
    expect(answer.choices[0]!.toolCall!.argumentPieces.join('')).toMatch(expected);
  });

  it('gives logprobs with top_logprobs alternatives', () => {
    const plan = planCompletion({ ...base, logprobs: true, top_logprobs: 2, max_tokens: 4 }, options);
    const logprobs = plan.choices[0]!.logprobs!;
    expect(logprobs).toHaveLength(4);
    expect(logprobs[0]).toMatchObject({ token: plan.choices[0]!.contentPieces[0], logprob: expect.any(Number) });
    expect(logprobs[0]!.top_logprobs).toHaveLength(2);
  });

  it('reasoning models reason first and count reasoning tokens', () => {
    const plan = planCompletion(base, { ...options, reasoning: true });
    const completion = renderCompletion(plan, 'id', 1);
    expect(completion.choices[0]?.message.reasoning_content?.length).toBeGreaterThan(0);
    expect(completion.usage?.completion_tokens_details?.reasoning_tokens).toBe(plan.choices[0]!.reasoningPieces.length);
    expect(completion.usage?.completion_tokens).toBe(
      plan.choices[0]!.reasoningPieces.length + plan.choices[0]!.contentPieces.length,
    );
  });

  it('renders streams as vLLM does: role chunk, one token per chunk, finish on the last token, usage chunk', () => {
    const plan = planCompletion({ ...base, max_tokens: 3 }, options);
    const streamOptions = { includeUsage: true, continuousUsage: false };
    const steps = Array.from({ length: tokenSteps(plan) + 2 }, (_, step) =>
      renderStep(plan, step, 'id', 1, streamOptions),
    );
    expect(steps[0]?.[0]?.choices[0]?.delta).toEqual({ role: 'assistant', content: '' });
    expect(steps[3]?.[0]?.choices[0]?.finish_reason).toBe('length');
    expect(steps[4]?.[0]).toMatchObject({ choices: [], usage: { completion_tokens: 3 } });
    const continuous = renderStep(plan, 2, 'id', 1, { includeUsage: true, continuousUsage: true });
    expect(continuous[0]?.usage).toMatchObject({ completion_tokens: 2 });
  });
});
