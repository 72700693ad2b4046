import { sessionStreamRuleBreak } from './session-stream-rules';

const session_id = '0b6c3c3e-5d7a-4f0e-9a53-2f4d7a1c9e11';
const turn_id = 't1';
const event = (id: string | null, payload: Record<string, unknown>) =>
  `${id ? `id: ${id}\n` : ''}event: ${String(payload.type)}\ndata: ${JSON.stringify(payload)}\n\n`;
const started = (id: string) => event(id, { type: 'turn.started', session_id, turn_id });
const delta = (id: string, content: string) =>
  event(id, { type: 'message.delta', session_id, turn_id, message_index: 0, content });
const completed = (id: string) =>
  event(id, {
    type: 'turn.completed',
    session_id,
    turn_id,
    response: { session_id, status: 'idle', response: { role: 'assistant', content: 'ab' }, error: null },
    trace_metrics: { trace_id: null, total_duration: 0.1, total_tokens: 2, has_error: false },
  });
const OPEN = 'retry: 1000\nid: 5-0\n\n';
const judge = (body: string, { cut = false, send = false } = {}) => sessionStreamRuleBreak({ body, cut, send });

describe('sessionStreamRuleBreak', () => {
  it("accepts a send's whole stream, and a stream cut anywhere (a frame cut in half included)", () => {
    const whole = OPEN + started('6-0') + delta('6-1', 'a') + ': keep-alive\n\n' + delta('7-0', 'b') + completed('7-1');
    expect(judge(whole, { send: true })).toBeNull();
    for (let at = 0; at <= whole.length; at += 7)
      expect(judge(whole.slice(0, at), { cut: true, send: true })).toBeNull();
    const truncated = event(null, { type: 'stream.truncated', session_id, last_event_id: '1-0' });
    expect(judge(OPEN + truncated + delta('9-0', 'x'), { cut: true })).toBeNull();
  });

  it.each([
    ['a stream that ends inside a frame', OPEN + 'id: 6-0\nevent: x', {}],
    ['no retry first', started('6-0'), { cut: true }],
    ['ids going back', OPEN + delta('6-1', 'a') + delta('6-0', 'b'), { cut: true }],
    ['an id repeated', OPEN + delta('6-1', 'a') + delta('6-1', 'b'), { cut: true }],
    ['an event without an id', OPEN + delta('', 'a'), { cut: true }],
    [
      'a type that is not its data',
      OPEN + 'id: 6-0\nevent: turn.started\ndata: {"type":"turn.failed"}\n\n',
      { cut: true },
    ],
    ['data that is not a SessionEvent', OPEN + event('6-0', { type: 'message.delta', session_id }), { cut: true }],
    ['two data lines', OPEN + 'id: 6-0\nevent: x\ndata: {}\ndata: {}\n\n', { cut: true }],
    ["an event after a send's ending", OPEN + started('6-0') + completed('6-1') + delta('7-0', 'z'), { send: true }],
    ["a send's stream that does not start with turn.started", OPEN + delta('6-0', 'a'), { cut: true, send: true }],
  ])('finds %s', (_name, body, options) => {
    expect(judge(body, options)).not.toBeNull();
  });
});
