import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { observeScriptCalls } from '@tollway/accounts';
import { SessionEvent } from '@tollway/contracts';
import { createLogger } from '@tollway/service-kit';
import { commandsDuring } from '@tollway/service-kit/testing';
import { streamKeys } from '../../src/store/event-log-keys';
import { sessionKeys } from '../../src/store/session-keys';
import { SessionStore } from '../../src/store/session-store';
import { attachReaderScript } from '../../src/streaming/lua/attach-reader.script';
import { TurnEventStreams, type TurnEventStream } from '../../src/streaming/turn-event-stream';
import { deleteKeys, testPrefix } from '../api/api-harness';
import { waitFor } from '../worker/worker-harness';

// The worker's writer of a turn's events, on real Redis: what it writes, when, and in how many
// round trips, with no reader, once one comes, and once the turn is over.
const prefix = testPrefix();
const keys = streamKeys(prefix);
const redis = new Redis('redis://127.0.0.1:6379');
const subscriber = new Redis('redis://127.0.0.1:6379');
const store = new SessionStore({ redis, prefix });
let streams: TurnEventStreams;
const scripts: string[] = [];

beforeAll(async () => {
  streams = await TurnEventStreams.start({
    redis,
    subscriber,
    prefix,
    retention: { maxEntries: 1000, retentionMs: 60_000 },
    flushIntervalMs: 40,
    flushChars: 1_000_000,
    logger: createLogger({ service: 'test', silent: true }),
  });
  observeScriptCalls((name) => scripts.push(name));
});

afterAll(async () => {
  observeScriptCalls(null);
  await deleteKeys(prefix);
  await Promise.all([redis.quit(), subscriber.quit()]);
});

/** A session running a new turn, and the stream of that turn. */
async function runningTurn(): Promise<{ sessionId: string; turnId: string; stream: TurnEventStream }> {
  const sessionId = randomUUID();
  const turnId = randomUUID();
  await store.create(sessionId, 'org_a', [], { maxSessions: 1000, maxHistoryBytes: 1 << 20 });
  const job = { session_id: sessionId, turn_id: turnId, org_id: 'org_a', message: { role: 'user' }, accepted_at: 0 };
  await store.startTurn(
    sessionId,
    'org_a',
    { turnId, message: { role: 'user', content: 'hi' }, job: JSON.stringify(job) },
    { maxHistoryBytes: 1 << 20, maxRunningTurns: 0, maxWaitingTurns: 0, weight: 1 },
  );
  return { sessionId, turnId, stream: streams.open({ sessionId, turnId, orgId: 'org_a' }) };
}

/** The session's log as [type, event] pairs. */
async function log(sessionId: string): Promise<Array<[string, SessionEvent]>> {
  const entries = (await redis.xrange(keys.events(sessionId), '-', '+')) as Array<[string, string[]]>;
  return entries.map(([, fields]) => {
    const get = (name: string) => fields[fields.indexOf(name) + 1] as string;
    return [get('y'), SessionEvent.parse(JSON.parse(get('e')))];
  });
}

/** A reader joins the session's stream, as an API replica's reader hub does it. */
async function attachReader(sessionId: string): Promise<void> {
  await attachReaderScript.run(
    redis,
    [sessionKeys(prefix).session(sessionId), keys.events(sessionId), keys.watch(sessionId)],
    ['org_a', 10_000, keys.watchChannel, sessionId],
  );
}

const delta = (content: string) => ({ type: 'message.delta' as const, message_index: 0, content });

it('costs one round trip for a turn no one reads, and keeps what it would write', async () => {
  const { sessionId, turnId, stream } = await runningTurn();
  scripts.length = 0;
  stream.begin();
  for (const piece of ['Hel', 'lo', ' there']) stream.push([delta(piece)]);
  await new Promise((resolve) => setTimeout(resolve, 300));
  expect(scripts).toEqual(['events_append']);
  expect(await redis.exists(keys.events(sessionId))).toBe(0);
  const tail = await stream.finishing('{"trace_id":null,"total_duration":1,"total_tokens":3,"has_error":false}');
  expect(tail).toMatchObject({ mode: 'check', startId: '' });
  expect(tail.pending.map(([type, json]) => [type, JSON.parse(json)])).toEqual([
    ['turn.started', { type: 'turn.started', session_id: sessionId, turn_id: turnId }],
    ['message.delta', { ...delta('Hello there'), session_id: sessionId, turn_id: turnId }],
  ]);
  stream.close();
  // A reader that comes as the turn ends gets it whole: the finish script writes what waited.
  await attachReader(sessionId);
  const reply = { role: 'assistant' as const, content: 'Hello there' };
  await store.finishTurn(
    sessionId,
    turnId,
    { kind: 'success', append: [reply], response: reply },
    { org: 'org_a', events: tail },
  );
  expect((await log(sessionId)).map(([type]) => type)).toEqual(['turn.started', 'message.delta', 'turn.completed']);
});

it('writes the turn from its start as soon as a reader is announced, then in batches, and ends it with the finish script', async () => {
  const { sessionId, turnId, stream } = await runningTurn();
  stream.begin(false);
  stream.push([delta('before ')]);
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect(await redis.exists(keys.events(sessionId))).toBe(0);
  // A reader comes: its API process sets the watch key and announces it.
  await attachReader(sessionId);
  await waitFor(async () => (await log(sessionId)).length === 2);
  scripts.length = 0;
  for (let i = 0; i < 50; i++) {
    stream.push([delta(`${i} `)]);
    await new Promise((resolve) => setTimeout(resolve, 4));
  }
  await waitFor(async () => (await log(sessionId)).length > 2);
  const tail = await stream.finishing('{"trace_id":null,"total_duration":0.5,"total_tokens":9,"has_error":false}');
  const text = `before ${Array.from({ length: 50 }, (_, i) => `${i} `).join('')}`;
  const reply = { role: 'assistant' as const, content: text };
  expect(
    await store.finishTurn(
      sessionId,
      turnId,
      { kind: 'success', append: [reply], response: reply },
      { org: 'org_a', events: tail },
    ),
  ).toBe('applied');
  stream.close();
  const events = await log(sessionId);
  expect(events[0]![0]).toBe('turn.started');
  expect(events.at(-1)).toEqual([
    'turn.completed',
    {
      type: 'turn.completed',
      session_id: sessionId,
      turn_id: turnId,
      response: { session_id: sessionId, status: 'idle', response: reply, error: null },
      trace_metrics: { trace_id: null, total_duration: 0.5, total_tokens: 9, has_error: false },
    },
  ]);
  const deltas = events.filter(([type]) => type === 'message.delta').map(([, event]) => event);
  expect(deltas.map((event) => (event.type === 'message.delta' ? event.content : '')).join('')).toBe(text);
  // 50 pushes over about 200 ms: a handful of writes, not one per delta.
  expect(scripts.filter((name) => name === 'events_append').length).toBeLessThan(15);
  // Every entry names the one before it, and the turn's first entry.
  const raw = (await redis.xrange(keys.events(sessionId), '-', '+')) as Array<[string, string[]]>;
  const field = (entry: [string, string[]], name: string) => entry[1][entry[1].indexOf(name) + 1];
  raw.forEach((entry, i) => {
    expect(field(entry, 'p')).toBe(i === 0 ? '' : raw[i - 1]![0]);
    expect(field(entry, 's')).toBe(i === 0 ? '' : raw[0]![0]);
    expect(field(entry, 'o')).toBe('org_a');
  });
});

it('writes nothing of a turn after its session is deleted: the deletion is its last event', async () => {
  const { sessionId, turnId, stream } = await runningTurn();
  await attachReader(sessionId);
  stream.begin();
  await waitFor(async () => (await log(sessionId)).length === 1);
  expect((await store.delete(sessionId, 'org_a')).deleted).toBe(true);
  stream.push([delta('too late')]);
  await new Promise((resolve) => setTimeout(resolve, 200));
  stream.close();
  expect((await log(sessionId)).map(([type, event]) => [type, 'turn_id' in event ? event.turn_id : null])).toEqual([
    ['turn.started', turnId],
    ['turn.cancelled', turnId],
  ]);
  // The deleted session's log goes soon after, its watch key at once.
  expect(await redis.pttl(keys.events(sessionId))).toBeLessThanOrEqual(30_000);
  expect(await redis.exists(keys.watch(sessionId))).toBe(0);
});

it("a turn's end asks for readers and a log only on a session a reader once joined, or one made before the readers field", async () => {
  const reply = { role: 'assistant' as const, content: 'ok' };
  const finish = async (sessionId: string, turnId: string) =>
    store.finishTurn(sessionId, turnId, { kind: 'success', append: [reply], response: reply }, { org: 'org_a' });
  const unread = await runningTurn();
  const read = await runningTurn();
  const older = await runningTurn();
  for (const turn of [unread, read, older]) turn.stream.close();
  await attachReader(read.sessionId);
  await redis.del(keys.watch(read.sessionId)); // its reader has gone since
  // A session an earlier build made has no readers field; a reader of that build is on it.
  await redis.hdel(sessionKeys(prefix).session(older.sessionId), 'readers');
  await redis.set(keys.watch(older.sessionId), '1', 'PX', 10_000);
  const commands = await commandsDuring(redis, async () => {
    for (const turn of [unread, read, older]) expect(await finish(turn.sessionId, turn.turnId)).toBe('applied');
  });
  // Other test files share this Redis: only this file's keys count.
  const asked = commands
    .filter(({ args }) => args[0]?.toLowerCase() === 'exists' && args[1]?.startsWith(prefix))
    .map(({ args }) => args[1]);
  expect(asked).toEqual([keys.events(read.sessionId), keys.events(older.sessionId)]);
  const types = async (sessionId: string) =>
    ((await redis.xrange(keys.events(sessionId), '-', '+')) as Array<[string, string[]]>).map(([, f]) => f[1]);
  expect(await types(unread.sessionId)).toEqual([]);
  expect(await types(read.sessionId)).toEqual([]);
  expect(await types(older.sessionId)).toEqual(['turn.completed']);
});
