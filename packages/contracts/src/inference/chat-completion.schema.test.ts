import { issuePaths, withFields } from '../__fixtures__/issues';
import {
  ChatCompletionChunk,
  ChatCompletionResponse,
  CreateChatCompletionRequest,
  FINISH_REASONS,
  REQUEST_MESSAGE_ROLES,
  RequestMessage,
} from './chat-completion.schema';

const minimal = { model: 'tollway/sim-chat', messages: [{ role: 'user', content: 'Hello' }] };

const everyField = {
  model: 'tollway/sim-chat',
  messages: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: [{ type: 'text', text: 'Weather?' }], name: 'ada' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'w' } }] },
    { role: 'tool', content: 'sunny', tool_call_id: 'call_1' },
  ],
  max_tokens: 16,
  max_completion_tokens: 16,
  temperature: 0.7,
  top_p: 0.9,
  top_k: 40,
  n: 1,
  stop: ['\n\n'],
  stream: true,
  stream_options: { include_usage: true },
  presence_penalty: 0.5,
  frequency_penalty: -0.5,
  seed: 42,
  logprobs: true,
  top_logprobs: 2,
  logit_bias: { '50256': -100 },
  response_format: { type: 'json_object' },
  reasoning_effort: 'low',
  tools: [{ type: 'function', function: { name: 'w', parameters: {} } }],
  tool_choice: 'auto',
  user: 'user-1',
};

const NULLABLE_FIELDS = [
  'max_tokens',
  'max_completion_tokens',
  'temperature',
  'top_p',
  'top_k',
  'n',
  'stop',
  'stream',
  'stream_options',
  'presence_penalty',
  'frequency_penalty',
  'seed',
  'logprobs',
  'top_logprobs',
  'logit_bias',
  'response_format',
  'reasoning_effort',
  'tool_choice',
];

describe('CreateChatCompletionRequest', () => {
  it.each([
    ['the minimal body', minimal],
    ['every field of the spec table', everyField],
    ['null content', withFields(minimal, { messages: [{ role: 'assistant', content: null }] })],
    ['no content at all', withFields(minimal, { messages: [{ role: 'assistant' }] })],
    ['array content', withFields(minimal, { messages: [{ role: 'user', content: [] }] })],
    ['stop as one string', withFields(minimal, { stop: 'END' })],
    ['tool_choice as an object', withFields(minimal, { tool_choice: { type: 'function', function: { name: 'w' } } })],
    ['every nullable field null', withFields(minimal, Object.fromEntries(NULLABLE_FIELDS.map((f) => [f, null])))],
  ])('accepts %s', (_name, body) => {
    expect(issuePaths(CreateChatCompletionRequest, body)).toEqual([]);
  });

  it.each(REQUEST_MESSAGE_ROLES.map((role) => [role]))('accepts the %s role', (role) => {
    expect(issuePaths(RequestMessage, { role, content: 'x' })).toEqual([]);
  });

  // Generic wire bounds: each bound is accepted exactly, and refused just past it.
  it.each([
    ['temperature', 0, true],
    ['temperature', 2, true],
    ['temperature', -0.01, false],
    ['temperature', 2.01, false],
    ['top_p', 0, true],
    ['top_p', 1, true],
    ['top_p', -0.01, false],
    ['top_p', 1.01, false],
    ['presence_penalty', -2, true],
    ['presence_penalty', 2, true],
    ['presence_penalty', -2.01, false],
    ['presence_penalty', 2.01, false],
    ['frequency_penalty', -2, true],
    ['frequency_penalty', 2, true],
    ['frequency_penalty', -2.01, false],
    ['frequency_penalty', 2.01, false],
    ['max_tokens', 1, true],
    ['max_tokens', 0, false],
    ['max_completion_tokens', 1, true],
    ['max_completion_tokens', 0, false],
  ])('%s = %p: accepted %p', (field, value, ok) => {
    expect(issuePaths(CreateChatCompletionRequest, withFields(minimal, { [field]: value }))).toEqual(ok ? [] : [field]);
  });

  it.each([
    ['model missing', { model: undefined }, 'model'],
    ['messages missing', { messages: undefined }, 'messages'],
    ['messages empty', { messages: [] }, 'messages'],
    ['role missing', { messages: [{ content: 'x' }] }, 'messages.0.role'],
    ['unknown role', { messages: [{ role: 'robot', content: 'x' }] }, 'messages.0.role'],
    ['model not a string', { model: 5 }, 'model'],
    ['messages not an array', { messages: 'Hello' }, 'messages'],
    ['content a number', { messages: [{ role: 'user', content: 5 }] }, 'messages.0.content'],
    [
      'tool_call_id a number',
      { messages: [{ role: 'tool', content: 'x', tool_call_id: 1 }] },
      'messages.0.tool_call_id',
    ],
    ['max_tokens fractional', { max_tokens: 1.5 }, 'max_tokens'],
    ['temperature a string', { temperature: '1' }, 'temperature'],
    ['top_k fractional', { top_k: 1.5 }, 'top_k'],
    ['n fractional', { n: 1.5 }, 'n'],
    ['stream a string', { stream: 'yes' }, 'stream'],
    [
      'stream_options.include_usage a string',
      { stream_options: { include_usage: 'yes' } },
      'stream_options.include_usage',
    ],
    ['stop a number', { stop: 5 }, 'stop'],
    ['stop with a number inside', { stop: ['a', 5] }, 'stop'],
    ['seed fractional', { seed: 0.5 }, 'seed'],
    ['logprobs a string', { logprobs: 'true' }, 'logprobs'],
    ['logit_bias with a string value', { logit_bias: { '1': 'high' } }, 'logit_bias.1'],
    ['response_format a string', { response_format: 'json' }, 'response_format'],
    ['tools not an array', { tools: { type: 'function' } }, 'tools'],
    ['tools null (not nullable in the spec)', { tools: null }, 'tools'],
    ['tool_choice a number', { tool_choice: 1 }, 'tool_choice'],
    ['user a number', { user: 7 }, 'user'],
  ])('refuses %s at its path', (_name, patch, path) => {
    expect(issuePaths(CreateChatCompletionRequest, withFields(minimal, patch))).toEqual([path]);
  });

  it('strips fields outside the spec table so they are never forwarded', () => {
    const parsed = CreateChatCompletionRequest.parse({
      ...minimal,
      best_of: 3,
      messages: [{ role: 'user', content: 'x', extra: 1 }],
    });
    expect(parsed).not.toHaveProperty('best_of');
    expect(parsed.messages[0]).not.toHaveProperty('extra');
  });

  it('keeps extra stream_options properties (their structure is not shown by the spec)', () => {
    const parsed = CreateChatCompletionRequest.parse({
      ...minimal,
      stream_options: { include_usage: true, continuous_usage_stats: true },
    });
    expect(parsed.stream_options).toEqual({ include_usage: true, continuous_usage_stats: true });
  });

  it('refuses stream_options of more than 16 properties', () => {
    const options = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, i]));
    expect(issuePaths(CreateChatCompletionRequest, withFields(minimal, { stream_options: options }))).toEqual([
      'stream_options',
    ]);
  });

  // z.record copied them key by key: 300,000 keys in response_format took 0.8 s, in a tool 2 s.
  it('takes the free-form objects as they are, without copying their keys', () => {
    const big = () => Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`k${i}`, i]));
    const body = {
      ...minimal,
      messages: [{ role: 'assistant', content: null, tool_calls: [big()] }],
      response_format: big(),
      tools: [big()],
      tool_choice: big(),
    };
    const parsed = CreateChatCompletionRequest.parse(body);
    expect(parsed.response_format).toBe(body.response_format);
    expect(parsed.tools?.[0]).toBe(body.tools[0]);
    expect(parsed.tool_choice).toBe(body.tool_choice);
    expect(parsed.messages[0]?.tool_calls?.[0]).toBe(body.messages[0]?.tool_calls[0]);
  });
});

const usage = { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 };
const response = {
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 1789000000,
  model: 'tollway/sim-chat',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hi there' }, logprobs: null, finish_reason: 'stop' }],
  usage,
};

describe('ChatCompletionResponse', () => {
  it.each([
    ['a full response', response],
    ['no usage', withFields(response, { usage: undefined })],
    [
      'a null finish_reason',
      withFields(response, { choices: [{ index: 0, message: { role: 'assistant' }, finish_reason: null }] }),
    ],
    [
      'reasoning and tool calls',
      withFields(response, {
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: null, reasoning_content: 'think', tool_calls: [{ id: 'c' }] },
            finish_reason: 'tool_calls',
          },
        ],
      }),
    ],
    [
      'usage details',
      withFields(response, {
        usage: {
          ...usage,
          prompt_tokens_details: { cached_tokens: 0 },
          completion_tokens_details: { reasoning_tokens: 2 },
        },
      }),
    ],
  ])('accepts %s', (_name, body) => {
    expect(issuePaths(ChatCompletionResponse, body)).toEqual([]);
  });

  it.each(FINISH_REASONS.map((reason) => [reason]))('accepts finish_reason %s', (reason) => {
    const body = withFields(response, {
      choices: [{ index: 0, message: { role: 'assistant' }, finish_reason: reason }],
    });
    expect(issuePaths(ChatCompletionResponse, body)).toEqual([]);
  });

  it.each([
    ['a wrong object', { object: 'chat.completion.chunk' }, 'object'],
    ['created missing', { created: undefined }, 'created'],
    ['created fractional', { created: 1.5 }, 'created'],
    ['id a number', { id: 1 }, 'id'],
    ['choices missing', { choices: undefined }, 'choices'],
    [
      'an unknown finish_reason',
      { choices: [{ index: 0, message: { role: 'assistant' }, finish_reason: 'done' }] },
      'choices.0.finish_reason',
    ],
    ['finish_reason missing', { choices: [{ index: 0, message: { role: 'assistant' } }] }, 'choices.0.finish_reason'],
    [
      'a non-assistant message',
      { choices: [{ index: 0, message: { role: 'user' }, finish_reason: null }] },
      'choices.0.message.role',
    ],
    ['index missing', { choices: [{ message: { role: 'assistant' }, finish_reason: null }] }, 'choices.0.index'],
    ['usage without total_tokens', { usage: { prompt_tokens: 1, completion_tokens: 1 } }, 'usage.total_tokens'],
    [
      'reasoning_tokens a string',
      { usage: { ...usage, completion_tokens_details: { reasoning_tokens: 'two' } } },
      'usage.completion_tokens_details.reasoning_tokens',
    ],
  ])('refuses %s at its path', (_name, patch, path) => {
    expect(issuePaths(ChatCompletionResponse, withFields(response, patch))).toEqual([path]);
  });
});

const chunk = {
  id: 'chatcmpl-1',
  object: 'chat.completion.chunk',
  created: 1789000000,
  model: 'tollway/sim-chat',
  choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }],
};

describe('ChatCompletionChunk', () => {
  it.each([
    ['the opening role chunk', chunk],
    ['a content chunk with usage', withFields(chunk, { choices: [{ index: 0, delta: { content: 'Hi' } }], usage })],
    ['the finish chunk', withFields(chunk, { choices: [{ index: 0, delta: {}, finish_reason: 'length' }] })],
    ['the final usage chunk with empty choices', withFields(chunk, { choices: [], usage })],
    ['a null usage', withFields(chunk, { usage: null })],
    [
      'a reasoning delta',
      withFields(chunk, { choices: [{ index: 0, delta: { reasoning_content: 'hmm', content: null } }] }),
    ],
    [
      'a tool-call delta',
      withFields(chunk, { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'c' }] } }] }),
    ],
  ])('accepts %s', (_name, body) => {
    expect(issuePaths(ChatCompletionChunk, body)).toEqual([]);
  });

  it.each([
    ['a wrong object', { object: 'chat.completion' }, 'object'],
    ['delta missing', { choices: [{ index: 0 }] }, 'choices.0.delta'],
    [
      'an unknown finish_reason',
      { choices: [{ index: 0, delta: {}, finish_reason: 'eos' }] },
      'choices.0.finish_reason',
    ],
    ['content a number', { choices: [{ index: 0, delta: { content: 1 } }] }, 'choices.0.delta.content'],
    ['model missing', { model: undefined }, 'model'],
    ['usage with a string count', { choices: [], usage: { ...usage, prompt_tokens: '9' } }, 'usage.prompt_tokens'],
  ])('refuses %s at its path', (_name, patch, path) => {
    expect(issuePaths(ChatCompletionChunk, withFields(chunk, patch))).toEqual([path]);
  });
});
