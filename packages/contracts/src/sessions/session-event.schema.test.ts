import { issuePaths, withFields } from '../__fixtures__/issues';
import {
  isTurnEndEvent,
  SESSION_EVENT_TYPES,
  SessionEvent,
  SessionEventsQuery,
  SESSION_EVENT_ID,
} from './session-event.schema';

const session_id = '0b6c3c3e-5d7a-4f0e-9a53-2f4d7a1c9e11';
const turn_id = '6f1d2a8e-3b4c-4d5e-8f90-123456789abc';
const trace = { trace_id: null, total_duration: 0.8, total_tokens: 21, has_error: false };

/** One known-good event of every type, as the service sends them. */
const GOOD: Record<(typeof SESSION_EVENT_TYPES)[number], Record<string, unknown>> = {
  'turn.started': { type: 'turn.started', session_id, turn_id },
  'message.delta': {
    type: 'message.delta',
    session_id,
    turn_id,
    message_index: 0,
    content: 'Hel',
    reasoning_content: 'hm',
  },
  'tool_call.delta': {
    type: 'tool_call.delta',
    session_id,
    turn_id,
    message_index: 0,
    index: 1,
    id: 'call_1',
    name: 'calc',
    arguments: '{"x"',
  },
  'tool.result': { type: 'tool.result', session_id, turn_id, tool_call_id: 'call_1', content: '4' },
  'agent.event': { type: 'agent.event', session_id, turn_id, name: 'plan', data: { steps: ['a', 'b'] } },
  'turn.completed': {
    type: 'turn.completed',
    session_id,
    turn_id,
    response: { session_id, status: 'idle', response: { role: 'assistant', content: 'Hello' }, error: null },
    trace_metrics: trace,
  },
  'turn.failed': {
    type: 'turn.failed',
    session_id,
    turn_id,
    response: { session_id, status: 'error', response: null, error: 'model refused' },
    trace_metrics: null,
  },
  'turn.cancelled': { type: 'turn.cancelled', session_id, turn_id: null, error: 'turn cancelled: session deleted' },
  'stream.truncated': { type: 'stream.truncated', session_id, last_event_id: '1712345678901-0' },
};

describe('SessionEvent', () => {
  it.each(SESSION_EVENT_TYPES.map((type) => [type]))('parses a good %s', (type) => {
    expect(issuePaths(SessionEvent, GOOD[type])).toEqual([]);
    expect(SessionEvent.parse(GOOD[type]).type).toBe(type);
  });

  it.each([
    ['an unknown type', GOOD['turn.started'], { type: 'turn.paused' }, 'type'],
    ['a session id that is not a UUID', GOOD['turn.started'], { session_id: 'abc' }, 'session_id'],
    ['a delta without its message index', GOOD['message.delta'], { message_index: undefined }, 'message_index'],
    ['a negative message index', GOOD['message.delta'], { message_index: -1 }, 'message_index'],
    ['a tool call index that is fractional', GOOD['tool_call.delta'], { index: 0.5 }, 'index'],
    ['a custom event without a name', GOOD['agent.event'], { name: '' }, 'name'],
    ['a custom event name past 128 characters', GOOD['agent.event'], { name: 'n'.repeat(129) }, 'name'],
    ['a completed turn without trace_metrics', GOOD['turn.completed'], { trace_metrics: null }, 'trace_metrics'],
    [
      'a completed turn whose session is not a SessionResponse',
      GOOD['turn.completed'],
      { response: { status: 'idle' } },
      'response.session_id',
    ],
    ['a cancellation without its error', GOOD['turn.cancelled'], { error: undefined }, 'error'],
  ])('refuses %s at its path', (_name, base, patch, path) => {
    expect(issuePaths(SessionEvent, withFields(base, patch))).toContain(path);
  });

  it('tells the events that end a turn', () => {
    expect(SESSION_EVENT_TYPES.filter((type) => isTurnEndEvent({ type }))).toEqual([
      'turn.completed',
      'turn.failed',
      'turn.cancelled',
    ]);
  });
});

describe('SessionEventsQuery', () => {
  it('reads follow as a boolean, false by default, and keeps last_event_id as sent', () => {
    expect(SessionEventsQuery.parse({})).toEqual({ follow: false });
    expect(SessionEventsQuery.parse({ follow: '1', last_event_id: '5-0' })).toEqual({
      follow: true,
      last_event_id: '5-0',
    });
    expect(issuePaths(SessionEventsQuery, { follow: 'yes' })).toEqual(['follow']);
    expect(issuePaths(SessionEventsQuery, { last_event_id: ['1-0', '2-0'] })).toEqual(['last_event_id']);
  });

  it('describes event ids as two numbers of at most 20 digits', () => {
    expect(SESSION_EVENT_ID.test('1712345678901-0')).toBe(true);
    expect(SESSION_EVENT_ID.test('1712345678901')).toBe(false);
    expect(SESSION_EVENT_ID.test(`${'1'.repeat(21)}-0`)).toBe(false);
  });
});
