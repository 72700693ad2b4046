import { issuePaths } from '../__fixtures__/issues';
import { MessageRequest, MessageResponse } from './message.schema';

describe('MessageRequest', () => {
  it('fills the spec defaults into an empty body', () => {
    expect(MessageRequest.parse({})).toEqual({ content: null, role: 'user', user_params: null, webhook: null });
  });

  it('fills the WebhookSpec defaults', () => {
    expect(MessageRequest.parse({ content: 'Hi', webhook: { url: 'https://example.test/hook' } }).webhook).toEqual({
      url: 'https://example.test/hook',
      token: null,
      include_messages: false,
    });
  });

  it.each([
    ['a plain user message', { content: 'Hi' }],
    [
      'every field',
      {
        content: 'Look',
        role: 'user',
        user_params: { locale: 'fr', depth: 2 },
        webhook: { url: 'http://127.0.0.1:9000/done', token: 'secret', include_messages: true },
        name: 'ada',
        base64_image: 'iVBORw0KGgo=',
      },
    ],
    ['a tool result', { role: 'tool', content: '42', tool_call_id: 'call_1' }],
    ['an assistant tool call', { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function' }] }],
    ['explicit nulls', { content: null, user_params: null, webhook: null }],
  ])('accepts %s', (_name, body) => {
    expect(issuePaths(MessageRequest, body)).toEqual([]);
  });

  it.each([
    ['an unknown role', { role: 'developer' }, 'role'],
    ['content as a number', { content: 5 }, 'content'],
    ['user_params as a string', { user_params: 'x' }, 'user_params'],
    ['a webhook without url', { webhook: { token: 't' } }, 'webhook.url'],
    ['a webhook url that is not a URL', { webhook: { url: 'not a url' } }, 'webhook.url'],
    ['a non-http webhook url', { webhook: { url: 'ftp://example.test/hook' } }, 'webhook.url'],
    ['a webhook token as a number', { webhook: { url: 'https://example.test', token: 1 } }, 'webhook.token'],
    [
      'include_messages as a string',
      { webhook: { url: 'https://example.test', include_messages: 'yes' } },
      'webhook.include_messages',
    ],
    ['an empty base64_image', { base64_image: '' }, 'base64_image'],
    ['tool_calls not an array', { tool_calls: 'x' }, 'tool_calls'],
  ])('refuses %s at its path', (_name, body, path) => {
    expect(issuePaths(MessageRequest, body)).toEqual([path]);
  });
});

describe('MessageResponse', () => {
  it('accepts running and nothing else', () => {
    const session_id = '0b6c3c3e-5d7a-4f0e-9a53-2f4d7a1c9e11';
    expect(issuePaths(MessageResponse, { session_id, status: 'running' })).toEqual([]);
    expect(issuePaths(MessageResponse, { session_id, status: 'idle' })).toEqual(['status']);
    expect(issuePaths(MessageResponse, { session_id: 'x', status: 'running' })).toEqual(['session_id']);
  });
});
