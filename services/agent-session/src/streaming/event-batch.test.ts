import { EventBatch, serializeEvents, type PendingEvent } from './event-batch';

const ids = { session_id: '00000000-0000-4000-8000-000000000001', turn_id: 't1' };
const delta = (content: string, message_index = 0): PendingEvent => ({
  type: 'message.delta',
  ...ids,
  message_index,
  content,
});

describe('EventBatch', () => {
  it('merges deltas of one message, so what waits concatenates to the same text', () => {
    const batch = new EventBatch();
    batch.add({ type: 'turn.started', ...ids });
    for (const piece of ['Hel', 'lo, ', 'wor', 'ld']) batch.add(delta(piece));
    batch.add({ type: 'message.delta', ...ids, message_index: 0, reasoning_content: 'hm' });
    expect(batch.textChars).toBe(14);
    expect(batch.take()).toEqual([
      { type: 'turn.started', ...ids },
      { ...delta('Hello, world'), reasoning_content: 'hm' },
    ]);
    expect(batch.length).toBe(0);
  });

  it('keeps apart what is not one text: another message, another tool call, an event between', () => {
    const batch = new EventBatch();
    batch.add(delta('a', 0));
    batch.add(delta('b', 1));
    batch.add({
      type: 'tool_call.delta',
      ...ids,
      message_index: 1,
      index: 0,
      id: 'c1',
      name: 'calc',
      arguments: '{"x"',
    });
    batch.add({ type: 'tool_call.delta', ...ids, message_index: 1, index: 0, arguments: ':1}' });
    batch.add({ type: 'tool_call.delta', ...ids, message_index: 1, index: 1, id: 'c2', arguments: '{}' });
    batch.add({ type: 'tool.result', ...ids, tool_call_id: 'c1', content: '1' });
    batch.add(delta('c', 1));
    expect(
      batch
        .take()
        .map((event) => [event.type, 'content' in event ? event.content : 'arguments' in event ? event.arguments : '']),
    ).toEqual([
      ['message.delta', 'a'],
      ['message.delta', 'b'],
      ['tool_call.delta', '{"x":1}'],
      ['tool_call.delta', '{}'],
      ['tool.result', '1'],
      ['message.delta', 'c'],
    ]);
  });

  it('starts a new delta once one holds its most characters', () => {
    const batch = new EventBatch({ maxDeltaChars: 5, maxCustomEvents: 10 });
    for (const piece of ['abc', 'de', 'fgh', 'ij']) batch.add(delta(piece));
    expect(batch.take().map((event) => (event.type === 'message.delta' ? event.content : ''))).toEqual([
      'abcde',
      'fghij',
    ]);
  });

  it('puts back what a write did not take ahead of what came since, merged again', () => {
    const batch = new EventBatch();
    batch.add(delta('one '));
    const taken = batch.take();
    batch.add(delta('two'));
    batch.restore(taken);
    expect(batch.take()).toEqual([delta('one two')]);
  });

  it('holds a bounded number of custom events and counts the ones it drops', () => {
    const batch = new EventBatch({ maxDeltaChars: 100, maxCustomEvents: 2 });
    for (let i = 0; i < 5; i++) batch.add({ type: 'agent.event', ...ids, name: 'n', data: i });
    expect(batch.take().map((event) => (event.type === 'agent.event' ? event.data : null))).toEqual([0, 1]);
    expect(batch.dropped).toBe(3);
    batch.add({ type: 'agent.event', ...ids, name: 'n', data: 5 });
    expect(batch.length).toBe(1);
  });

  it('serializes as [type, JSON] pairs, the way the scripts take them', () => {
    expect(serializeEvents([delta('x')])).toEqual([['message.delta', JSON.stringify(delta('x'))]]);
  });
});
