import type { AgentStreamEvent } from './agent.types';
import { AgentEventEmitter } from './agent-events';

function emitter(): { events: AgentEventEmitter; batches: AgentStreamEvent[][] } {
  const batches: AgentStreamEvent[][] = [];
  return { events: new AgentEventEmitter((batch) => batches.push(batch)), batches };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('the agent events of a turn (ctx.events)', () => {
  it('hands over the events of one turn of the event loop in one batch', async () => {
    const { events, batches } = emitter();
    events.delta({ content: 'a' });
    events.delta({ content: 'b', reasoning_content: 'r' });
    expect(batches).toEqual([]);
    await tick();
    expect(batches).toEqual([
      [
        { type: 'message.delta', message_index: 0, content: 'a' },
        { type: 'message.delta', message_index: 0, content: 'b', reasoning_content: 'r' },
      ],
    ]);
    events.emit('step', { n: 1 });
    await tick();
    expect(batches).toHaveLength(2);
  });

  it('numbers messages: deltas go to the latest one started', async () => {
    const { events, batches } = emitter();
    expect(events.startMessage()).toBe(0);
    events.delta({ content: 'first' });
    expect(events.startMessage()).toBe(1);
    events.toolCallDelta({ index: 0, id: 'c', name: 'calc', arguments: '{}' });
    events.toolResult({ tool_call_id: 'c', content: '4' });
    events.flush();
    expect(batches.flat()).toEqual([
      { type: 'message.delta', message_index: 0, content: 'first' },
      { type: 'tool_call.delta', message_index: 1, index: 0, id: 'c', name: 'calc', arguments: '{}' },
      { type: 'tool.result', tool_call_id: 'c', content: '4' },
    ]);
  });

  it('drops empty deltas, and takes nothing after flush (the turn is over)', async () => {
    const { events, batches } = emitter();
    events.delta({ content: '' });
    events.delta({});
    events.flush();
    events.delta({ content: 'late' });
    await tick();
    expect(batches).toEqual([]);
  });

  it('refuses custom events that readers could not take: a bad name, data that is not JSON or is too large', () => {
    const { events } = emitter();
    expect(() => events.emit('', 1)).toThrow(TypeError);
    expect(() => events.emit('x'.repeat(129), 1)).toThrow(/1 to 128/);
    expect(() => events.emit('fn', () => 1)).toThrow(/JSON value/);
    expect(() => events.emit('big', 'x'.repeat(70_000))).toThrow(/65536 bytes/);
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(() => events.emit('cycle', cycle)).toThrow();
    expect(() => events.toolCallDelta({ index: -1 })).toThrow(TypeError);
  });

  it('sends custom data as JSON carries it, not the object the agent keeps', () => {
    const { events, batches } = emitter();
    const data = { when: new Date(0), gone: undefined, n: 1 };
    events.emit('copy', data);
    data.n = 2;
    events.flush();
    expect(batches[0]).toEqual([
      { type: 'agent.event', name: 'copy', data: { when: '1970-01-01T00:00:00.000Z', n: 1 } },
    ]);
  });
});
