import { issuePaths, withFields } from '../__fixtures__/issues';
import {
  CHAT_MESSAGE_ROLES,
  ChatMessage,
  CreateSessionRequest,
  GetSessionQuery,
  HealthResponse,
  SESSION_ERROR_CODES,
  SESSION_STATUSES,
  SessionErrorResponse,
  SessionResponse,
  SessionSummary,
  SessionSummaryList,
} from './session.schema';

const SESSION_ID = '0b6c3c3e-5d7a-4f0e-9a53-2f4d7a1c9e11';

describe('HealthResponse', () => {
  const health = { status: 'ok', max_workers: 4, running_workers: 1, total_sessions: 12 };

  it('accepts the spec shape, zero counts included', () => {
    expect(issuePaths(HealthResponse, health)).toEqual([]);
    expect(issuePaths(HealthResponse, { ...health, running_workers: 0, total_sessions: 0 })).toEqual([]);
  });

  it.each([
    ['a status other than ok', { status: 'degraded' }, 'status'],
    ['max_workers missing', { max_workers: undefined }, 'max_workers'],
    ['running_workers as a string', { running_workers: '1' }, 'running_workers'],
    ['negative total_sessions', { total_sessions: -1 }, 'total_sessions'],
  ])('refuses %s at its path', (_name, patch, path) => {
    expect(issuePaths(HealthResponse, withFields(health, patch))).toEqual([path]);
  });
});

describe('ChatMessage', () => {
  it.each(CHAT_MESSAGE_ROLES.map((role) => [role]))('accepts the %s role', (role) => {
    expect(issuePaths(ChatMessage, { role, content: 'x' })).toEqual([]);
  });

  it.each([
    ['null content', { role: 'assistant', content: null }, []],
    ['content missing (required, nullable)', { role: 'assistant' }, ['content']],
    ['an unknown role', { role: 'developer', content: 'x' }, ['role']],
    ['content as an array', { role: 'user', content: ['x'] }, ['content']],
  ])('%s', (_name, body, paths) => {
    expect(issuePaths(ChatMessage, body)).toEqual(paths);
  });
});

describe('SessionResponse', () => {
  const idle = { session_id: SESSION_ID, status: 'idle', response: null, error: null };

  it.each([
    ['a new idle session', idle],
    ['a running session', { ...idle, status: 'running' }],
    ['an idle session with a response', { ...idle, response: { role: 'assistant', content: 'Hi' } }],
    ['an errored session', { ...idle, status: 'error', error: 'agent failed' }],
    ['response and error left out', { session_id: SESSION_ID, status: 'idle' }],
  ])('accepts %s', (_name, body) => {
    expect(issuePaths(SessionResponse, body)).toEqual([]);
  });

  it.each(SESSION_STATUSES.map((status) => [status]))('accepts status %s', (status) => {
    expect(issuePaths(SessionResponse, { ...idle, status })).toEqual([]);
  });

  it.each([
    ['a session_id that is not a UUID', { session_id: 'abc' }, 'session_id'],
    ['an unknown status', { status: 'done' }, 'status'],
    ['status missing', { status: undefined }, 'status'],
    ['a response with an unknown role', { response: { role: 'robot', content: 'x' } }, 'response.role'],
    ['error as an object', { error: { message: 'x' } }, 'error'],
  ])('refuses %s at its path', (_name, patch, path) => {
    expect(issuePaths(SessionResponse, withFields(idle, patch))).toEqual([path]);
  });
});

describe('SessionSummary', () => {
  const summary = { session_id: SESSION_ID, total_messages: 2, status: 'idle' };

  it('accepts a summary and a list of them', () => {
    expect(issuePaths(SessionSummary, summary)).toEqual([]);
    expect(issuePaths(SessionSummaryList, [summary, { ...summary, total_messages: 0, status: 'error' }])).toEqual([]);
  });

  it.each([
    ['negative total_messages', { total_messages: -1 }, 'total_messages'],
    ['fractional total_messages', { total_messages: 1.5 }, 'total_messages'],
    ['an unknown status', { status: 'paused' }, 'status'],
    ['session_id missing', { session_id: undefined }, 'session_id'],
  ])('refuses %s at its path', (_name, patch, path) => {
    expect(issuePaths(SessionSummary, withFields(summary, patch))).toEqual([path]);
  });

  it('names the index of a bad list item', () => {
    expect(issuePaths(SessionSummaryList, [summary, { ...summary, status: 'x' }])).toEqual(['1.status']);
  });
});

describe('CreateSessionRequest', () => {
  it.each([
    ['an empty body', {}],
    ['an empty state', { state: [] }],
    [
      'a preloaded history',
      {
        state: [
          { role: 'user', content: 'Hi' },
          { role: 'assistant', content: 'Hello' },
        ],
      },
    ],
  ])('accepts %s', (_name, body) => {
    expect(issuePaths(CreateSessionRequest, body)).toEqual([]);
  });

  it.each([
    ['state not an array', { state: 'Hi' }, 'state'],
    ['a system item (only user and assistant)', { state: [{ role: 'system', content: 'x' }] }, 'state.0.role'],
    ['a null content (string required)', { state: [{ role: 'user', content: null }] }, 'state.0.content'],
    ['content missing', { state: [{ role: 'user' }] }, 'state.0.content'],
  ])('refuses %s at its path', (_name, body, path) => {
    expect(issuePaths(CreateSessionRequest, body)).toEqual([path]);
  });
});

describe('GetSessionQuery', () => {
  it.each([
    [{}, { wait: false }],
    [{ wait: 'true' }, { wait: true }],
    [{ wait: '1' }, { wait: true }],
    [{ wait: 'false' }, { wait: false }],
    [
      { wait: 'true', timeout: '2.5' },
      { wait: true, timeout: 2.5 },
    ],
    [{ timeout: '0' }, { wait: false, timeout: 0 }],
    [{ timeout: '.5' }, { wait: false, timeout: 0.5 }],
    [{ timeout: '30.' }, { wait: false, timeout: 30 }],
  ])('parses %p', (query, parsed) => {
    expect(GetSessionQuery.parse(query)).toEqual(parsed);
  });

  it.each([
    [{ wait: 'maybe' }, 'wait'],
    [{ timeout: '-1' }, 'timeout'],
    [{ timeout: 'soon' }, 'timeout'],
    // Number() takes all of these, the empty ones as 0 (a long-poll that would not wait).
    [{ timeout: '' }, 'timeout'],
    [{ timeout: ' ' }, 'timeout'],
    [{ timeout: '0x10' }, 'timeout'],
    [{ timeout: '1e3' }, 'timeout'],
    [{ timeout: 'Infinity' }, 'timeout'],
    [{ timeout: ['1', '2'] }, 'timeout'],
  ])('refuses %p', (query, path) => {
    expect(issuePaths(GetSessionQuery, query)).toEqual([path]);
  });
});

describe('SessionErrorResponse', () => {
  it.each(Object.values(SESSION_ERROR_CODES).map((code) => [code]))('accepts code %s', (code) => {
    expect(
      issuePaths(SessionErrorResponse, { error: { message: 'm', type: 'invalid_request_error', param: null, code } }),
    ).toEqual([]);
  });

  it('refuses an envelope without a code', () => {
    expect(issuePaths(SessionErrorResponse, { error: { message: 'm', type: 't', param: null } })).toEqual([
      'error.code',
    ]);
  });
});
