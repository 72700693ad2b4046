import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { SessionStore, type StoredMessage } from '../../src/store/session-store';
import { TurnScheduler } from '../../src/store/turn-scheduler';
import { schedulerOrg, sessionKeys } from '../../src/store/session-keys';
import { deleteKeys, testPrefix } from '../api/api-harness';

// A session's history is one string (each message's JSON after a comma), read whole with one GET.
// Builds before this one stored it as a list and kept no count: such sessions are read as they
// are and turned into the string at their first send, claim or read, with nothing lost.

const redis = new Redis('redis://127.0.0.1:6379');
let prefix: string;
let store: SessionStore;
let scheduler: TurnScheduler;
const LIMITS = { maxHistoryBytes: 1 << 20, maxRunningTurns: 0, maxWaitingTurns: 0, weight: 1 };
const OLD: StoredMessage[] = [
  { role: 'system', content: 'be brief, "always"' },
  { role: 'user', content: 'hi ]\n[' },
  { role: 'assistant', content: 'hello 🚀' },
];

beforeEach(() => {
  prefix = testPrefix();
  store = new SessionStore({ redis, prefix });
  scheduler = new TurnScheduler(redis, prefix);
});
afterEach(() => deleteKeys(prefix));
afterAll(() => redis.quit());

/** A session as a build before this one left it: its history a list, no count of messages. */
async function legacySession(
  org: string,
  history: StoredMessage[],
  running?: { turnId: string; job: string },
  id = randomUUID(),
) {
  const keys = sessionKeys(prefix);
  const json = history.map((message) => JSON.stringify(message));
  const bytes = json.reduce((sum, item) => sum + Buffer.byteLength(item), 0);
  await redis.hset(keys.session(id), {
    status: running ? 'running' : 'idle',
    org,
    created_at: 1,
    updated_at: 1,
    history_bytes: bytes,
    ...(running ? { turn_id: running.turnId, job: running.job } : {}),
  });
  if (json.length > 0) await redis.rpush(keys.history(id), ...json);
  await redis.zadd(keys.activity, running ? 9e15 : 1, id);
  await redis.zadd(keys.org(org), 1, id);
  return id;
}

async function stored(id: string) {
  const keys = sessionKeys(prefix);
  return {
    type: await redis.type(keys.history(id)),
    messages: await redis.hget(keys.session(id), 'messages'),
    bytes: await redis.hget(keys.session(id), 'history_bytes'),
  };
}

const job = (id: string, turnId: string, org: string) =>
  JSON.stringify({ session_id: id, turn_id: turnId, org_id: org, message: { content: 'x' }, accepted_at: 1 });

test('a session an earlier build stored lists with its count, reads whole, and is turned into the string at its first read', async () => {
  const id = await legacySession('org-l', OLD);
  const empty = await legacySession('org-l', []);
  expect(await store.list('org-l')).toEqual(
    expect.arrayContaining([
      { sessionId: id, status: 'idle', totalMessages: 3 },
      { sessionId: empty, status: 'idle', totalMessages: 0 },
    ]),
  );
  expect(await store.messages(id, 'org-l')).toEqual(OLD);
  expect(await stored(id)).toMatchObject({ type: 'string', messages: '3' });
  expect(await store.messages(id, 'org-l')).toEqual(OLD);
  expect(await store.messages(empty, 'org-l')).toEqual([]);
  expect(await store.messages(id, 'org-other')).toBeNull();
  expect(await store.list('org-l')).toEqual(
    expect.arrayContaining([{ sessionId: id, status: 'idle', totalMessages: 3 }]),
  );
});

test('a send on such a session turns it into the string and appends; the claim and the end carry on from there', async () => {
  const id = await legacySession('org-l', OLD);
  const sent = await store.startTurn(
    id,
    'org-l',
    { turnId: 't-1', message: { role: 'user', content: 'next' }, job: job(id, 't-1', 'org-l') },
    LIMITS,
  );
  expect(sent.result).toBe('ok');
  const [turn] = await scheduler.claim(1, 10_000, false);
  expect(turn?.history).toEqual([...OLD, { role: 'user', content: 'next' }]);
  const answer = { role: 'assistant' as const, content: 'done, "ok"' };
  await scheduler.finish(turn!, { kind: 'success', append: [answer], response: answer }, 0, 10_000);
  const all = [...OLD, { role: 'user', content: 'next' }, answer];
  expect(await store.messages(id, 'org-l')).toEqual(all);
  const bytes = all.reduce((sum, message) => sum + Buffer.byteLength(JSON.stringify(message)), 0);
  expect(await stored(id)).toEqual({ type: 'string', messages: '5', bytes: String(bytes) });
  expect(await store.list('org-l')).toEqual([{ sessionId: id, status: 'idle', totalMessages: 5 }]);
});

test('a turn an earlier build queued runs on its list history, turned into the string by the claim', async () => {
  const history = [...OLD, { role: 'user' as const, content: 'queued before the upgrade' }];
  const id = randomUUID();
  await legacySession('org-l', history, { turnId: 't-old', job: job(id, 't-old', 'org-l') }, id);
  // The earlier build's send queued it with the scheduler of this one (same queue and entry).
  const keys = sessionKeys(prefix);
  await redis.rpush(keys.queue('org-l'), `${id}:t-old|${job(id, 't-old', 'org-l')}`);
  await redis.hset(keys.scheduler('org-l'), 'waiting', 1);
  await redis.zadd(keys.ready, 0, schedulerOrg('org-l'));
  const [turn] = await scheduler.claim(1, 10_000, false);
  expect(turn).toMatchObject({ sessionId: id, turnId: 't-old', history });
  expect(await stored(id)).toMatchObject({ type: 'string', messages: '4' });
  const answer = { role: 'assistant' as const, content: 'after' };
  await scheduler.finish(turn!, { kind: 'success', append: [answer], response: answer }, 0, 10_000);
  expect(await store.messages(id, 'org-l')).toEqual([...history, answer]);
});

test('a turn that ended in error appends nothing and keeps the count', async () => {
  const id = await legacySession('org-l', OLD);
  await store.startTurn(
    id,
    'org-l',
    { turnId: 't-1', message: { role: 'user', content: 'q' }, job: job(id, 't-1', 'org-l') },
    LIMITS,
  );
  const [turn] = await scheduler.claim(1, 10_000, false);
  await scheduler.finish(turn!, { kind: 'error', error: 'model failed' }, 0, 10_000);
  expect(await store.messages(id, 'org-l')).toEqual([...OLD, { role: 'user', content: 'q' }]);
  expect(await stored(id)).toMatchObject({ type: 'string', messages: '4' });
});
