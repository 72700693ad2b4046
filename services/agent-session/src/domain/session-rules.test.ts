import { MessageRequest } from '@tollway/contracts';
import { longPollDeadline, normalizeSessionId, toSessionResponse, toStoredMessage } from './session-rules';

describe('session rules', () => {
  it('accepts UUIDs of any version, in lower case, and nothing else', () => {
    expect(normalizeSessionId('6F1C9A52-3A55-4D7A-9D0E-0A5F1B2C3D4E')).toBe('6f1c9a52-3a55-4d7a-9d0e-0a5f1b2c3d4e');
    expect(normalizeSessionId('00000000-0000-0000-0000-000000000000')).toBe('00000000-0000-0000-0000-000000000000');
    expect(normalizeSessionId('6f1c9a52-3a55-4d7a-9d0e-0a5f1b2c3d4')).toBeNull();
    expect(normalizeSessionId('../x')).toBeNull();
  });

  it('hides response while running (rule 2), shows the last successful one otherwise, and error only in error', () => {
    const response = { role: 'assistant' as const, content: 'a' };
    const base = { sessionId: 's', org: null, turnId: null, response, error: 'e' };
    expect(toSessionResponse({ ...base, status: 'running' })).toEqual({
      session_id: 's',
      status: 'running',
      response: null,
      error: null,
    });
    expect(toSessionResponse({ ...base, status: 'idle' })).toEqual({
      session_id: 's',
      status: 'idle',
      response,
      error: null,
    });
    expect(toSessionResponse({ ...base, status: 'error' })).toEqual({
      session_id: 's',
      status: 'error',
      response,
      error: 'e',
    });
  });

  it('stores the message fields, never user_params or webhook', () => {
    const request = MessageRequest.parse({
      content: 'hi',
      user_params: { a: 1 },
      webhook: { url: 'http://a.test' },
      name: 'n',
    });
    expect(toStoredMessage(request)).toEqual({ role: 'user', content: 'hi', name: 'n' });
  });

  it('computes the long-poll deadline (rule 1)', () => {
    expect(longPollDeadline(false, 5, 1000)).toBe('no-wait');
    expect(longPollDeadline(true, undefined, 1000)).toBeNull();
    expect(longPollDeadline(true, 0.25, 1000)).toBe(1250);
  });
});
