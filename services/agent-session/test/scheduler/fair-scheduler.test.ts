import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { SessionStore, type OrganizationTurnLimits } from '../../src/store/session-store';
import { TurnScheduler, type ClaimedTurn } from '../../src/store/turn-scheduler';
import { sessionKeys } from '../../src/store/session-keys';
import { WorkerRegistration } from '../../src/worker/worker-registry';
import { commandsDuring } from '@tollway/service-kit/testing';
import { deleteKeys, testPrefix } from '../api/api-harness';

// The fair turn scheduler's Lua on real Redis, played by hand: sends (the API's start script),
// claims and ends (a worker's), deletes and reaps, across organizations.

const redis = new Redis('redis://127.0.0.1:6379');
let prefix: string;
let store: SessionStore;
let scheduler: TurnScheduler;

const NO_LIMITS: Omit<OrganizationTurnLimits, 'maxSessions'> = { maxRunningTurns: 0, maxWaitingTurns: 0, weight: 1 };
const LEASE_MS = 10_000;

beforeEach(() => {
  prefix = testPrefix();
  store = new SessionStore({ redis, prefix });
  scheduler = new TurnScheduler(redis, prefix);
});

afterEach(() => deleteKeys(prefix));
afterAll(() => redis.quit());

/** Sends one message on a new session of `org`: the turn waits in the org's queue. */
async function send(org: string, limits: Partial<typeof NO_LIMITS> = {}) {
  const sessionId = randomUUID();
  expect(await store.create(sessionId, org, [], { maxSessions: 100_000, maxHistoryBytes: 1 << 20 })).toBe('created');
  const turnId = randomUUID();
  const job = JSON.stringify({
    session_id: sessionId,
    turn_id: turnId,
    org_id: org,
    message: { content: 'x' },
    accepted_at: 1,
  });
  const started = await store.startTurn(
    sessionId,
    org,
    { turnId, message: { role: 'user', content: 'x' }, job },
    { maxHistoryBytes: 1 << 20, ...NO_LIMITS, ...limits },
  );
  return { sessionId, turnId, org, started };
}

async function sendMany(org: string, n: number, limits: Partial<typeof NO_LIMITS> = {}) {
  const sent = [];
  for (let i = 0; i < n; i++) sent.push(await send(org, limits));
  return sent;
}

/** Claims turns one at a time (each ended at once, as a worker of one process would) and lists whose they were. */
async function drainOneByOne(count: number): Promise<string[]> {
  const orgs: string[] = [];
  for (let i = 0; i < count; i++) {
    const [turn] = await scheduler.claim(1, LEASE_MS, false);
    if (!turn) break;
    orgs.push(turn.orgId ?? '');
    await end(turn);
  }
  return orgs;
}

async function end(turn: ClaimedTurn) {
  return scheduler.finish(turn, { kind: 'error', error: 'done' }, 0, LEASE_MS);
}

async function schedulerState(org: string) {
  return redis.hgetall(sessionKeys(prefix).scheduler(org));
}

test('takes organizations round-robin, each one first in first out', async () => {
  const a = await sendMany('org-a', 4);
  const b = await sendMany('org-b', 2);
  const c = await sendMany('org-c', 1);
  const claimed: ClaimedTurn[] = [];
  for (let i = 0; i < 7; i++) {
    const [turn] = await scheduler.claim(1, LEASE_MS, false);
    claimed.push(turn!);
    await end(turn!);
  }
  expect(claimed.map((turn) => turn.orgId)).toEqual(['org-a', 'org-b', 'org-c', 'org-a', 'org-b', 'org-a', 'org-a']);
  // Within an organization, the order of acceptance.
  expect(claimed.filter((turn) => turn.orgId === 'org-a').map((turn) => turn.turnId)).toEqual(a.map((t) => t.turnId));
  expect(claimed.filter((turn) => turn.orgId === 'org-b').map((turn) => turn.turnId)).toEqual(b.map((t) => t.turnId));
  expect(claimed.find((turn) => turn.orgId === 'org-c')?.turnId).toBe(c[0]?.turnId);
  expect(await scheduler.claim(1, LEASE_MS, false)).toEqual([]);
});

test("a backlog does not hold up a newcomer: the newcomer's turn is next", async () => {
  await sendMany('org-flood', 50);
  expect(await drainOneByOne(10)).toEqual(Array(10).fill('org-flood'));
  const late = await send('org-late');
  const [next] = await scheduler.claim(1, LEASE_MS, false);
  // Ties go by name; either way the newcomer is within the next two turns, never behind 40.
  const after = next?.orgId === 'org-late' ? next : (await scheduler.claim(1, LEASE_MS, false))[0];
  expect(after?.turnId).toBe(late.turnId);
});

test('weights 1 and 3 get turns 1 : 3 while both are backlogged', async () => {
  await sendMany('org-light', 40, { weight: 1 });
  await sendMany('org-heavy', 40, { weight: 3 });
  const orgs = await drainOneByOne(40);
  const heavy = orgs.filter((org) => org === 'org-heavy').length;
  expect(heavy).toBeGreaterThanOrEqual(29);
  expect(heavy).toBeLessThanOrEqual(31);
});

test('is work-conserving: an organization alone gets every claim', async () => {
  await sendMany('org-alone', 12);
  const claimed = await scheduler.claim(8, LEASE_MS, false);
  expect(claimed).toHaveLength(8);
  expect(new Set(claimed.map((turn) => turn.orgId))).toEqual(new Set(['org-alone']));
  expect(await schedulerState('org-alone')).toMatchObject({ waiting: '4', running: '8' });
});

test('an organization idle for a while earns no credit over one that kept working', async () => {
  await sendMany('org-busy', 30);
  expect(await drainOneByOne(30)).toHaveLength(30);
  // org-busy has had 30 turns; a newcomer arriving now starts even with it, not 30 turns ahead.
  await sendMany('org-busy', 6);
  await sendMany('org-new', 6);
  const orgs = await drainOneByOne(12);
  for (let i = 0; i < 12; i += 2) expect(new Set(orgs.slice(i, i + 2))).toEqual(new Set(['org-busy', 'org-new']));
});

test("a cap on running turns holds an organization's turns back without holding up others", async () => {
  await sendMany('org-capped', 5, { maxRunningTurns: 2 });
  await sendMany('org-free', 3);
  const claimed = await scheduler.claim(10, LEASE_MS, false);
  expect(claimed.filter((turn) => turn.orgId === 'org-capped')).toHaveLength(2);
  expect(claimed.filter((turn) => turn.orgId === 'org-free')).toHaveLength(3);
  expect(await scheduler.claim(10, LEASE_MS, false)).toEqual([]);
  // One ends: its slot frees exactly one more of the capped organization's turns.
  const first = claimed.find((turn) => turn.orgId === 'org-capped')!;
  const { next } = await scheduler.finish(first, { kind: 'error', error: 'done' }, 5, LEASE_MS);
  expect(next.map((turn) => turn.orgId)).toEqual(['org-capped']);
  expect(await schedulerState('org-capped')).toMatchObject({ waiting: '2', running: '2', cap: '2' });
});

test('a raised cap frees the turns the old one held back at the next send', async () => {
  await sendMany('org-raised', 3, { maxRunningTurns: 1 });
  expect(await scheduler.claim(5, LEASE_MS, false)).toHaveLength(1);
  await send('org-raised', { maxRunningTurns: 3 });
  expect(await scheduler.claim(5, LEASE_MS, false)).toHaveLength(2);
});

test('a send past the limit of waiting turns is refused and writes nothing', async () => {
  const sent = await sendMany('org-limited', 3, { maxWaitingTurns: 3 });
  expect(sent.map((s) => s.started.result)).toEqual(['ok', 'ok', 'ok']);
  const refused = await send('org-limited', { maxWaitingTurns: 3 });
  expect(refused.started).toEqual({ result: 'queue_full', waiting: 3 });
  expect((await store.get(refused.sessionId, 'org-limited'))?.status).toBe('idle');
  expect(await store.messages(refused.sessionId, 'org-limited')).toEqual([]);
  // Another organization is not affected, and a claim makes room again.
  expect((await send('org-other', { maxWaitingTurns: 3 })).started.result).toBe('ok');
  await scheduler.claim(1, LEASE_MS, false);
  const [turn] = await scheduler.claim(1, LEASE_MS, false);
  expect(turn).toBeDefined();
  expect((await send('org-limited', { maxWaitingTurns: 3 })).started.result).toBe('ok');
});

test('deleting a session takes its waiting turn out of the queue and hands back its job', async () => {
  const [first, second] = await sendMany('org-d', 2);
  const deleted = await store.delete(first!.sessionId, 'org-d');
  expect(deleted.deleted).toBe(true);
  expect(JSON.parse(deleted.waitingJob ?? 'null')).toMatchObject({ turn_id: first!.turnId });
  expect(await schedulerState('org-d')).toMatchObject({ waiting: '1' });
  const claimed = await scheduler.claim(5, LEASE_MS, false);
  expect(claimed.map((turn) => turn.turnId)).toEqual([second!.turnId]);
  // The organization's last waiting turn deleted: it leaves the ready set.
  const third = await send('org-d');
  await store.delete(third.sessionId, 'org-d');
  expect(await redis.zscore(sessionKeys(prefix).ready, 'org-d')).toBeNull();
  expect(await scheduler.claim(5, LEASE_MS, false)).toEqual([]);
});

test("deleting a session whose turn executes tells its worker, keeps the job for a reaper, and the worker's end is stale", async () => {
  const sent = await send('org-e');
  const [turn] = await scheduler.claim(1, LEASE_MS, false);
  const subscriber = new Redis('redis://127.0.0.1:6379');
  const messages: string[] = [];
  subscriber.on('message', (_channel, message) => messages.push(message));
  await subscriber.subscribe(`${prefix}turn-cancel`);
  const deleted = await store.delete(sent.sessionId, 'org-e');
  expect(deleted).toEqual({ deleted: true, waitingJob: null });
  for (let i = 0; i < 100 && messages.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  expect(JSON.parse(messages[0] ?? '{}')).toEqual({ session_id: sent.sessionId, turn_id: sent.turnId });
  expect(await redis.get(sessionKeys(prefix).cancelledJob(sent.turnId))).toContain(sent.turnId);
  const ended = await end(turn!);
  expect(ended).toMatchObject({ result: 'stale', stillLeased: true });
  expect(await schedulerState('org-e')).toMatchObject({ running: '0' });
  await subscriber.quit();
});

test('a lease that expires is reaped once: the turn ends in error and its slot comes back', async () => {
  const sent = await send('org-r', { maxRunningTurns: 1 });
  await send('org-r', { maxRunningTurns: 1 });
  const [turn] = await scheduler.claim(1, 50, false);
  expect(turn?.turnId).toBe(sent.turnId);
  await new Promise((resolve) => setTimeout(resolve, 80));
  const [a, b] = await Promise.all([scheduler.reap(10, 'worker gone'), scheduler.reap(10, 'worker gone')]);
  expect([...a, ...b]).toEqual([
    { sessionId: sent.sessionId, turnId: sent.turnId, how: 'ended', jobJson: turn!.jobJson },
  ]);
  expect(await store.get(sent.sessionId, 'org-r')).toMatchObject({ status: 'error', error: 'worker gone' });
  // The capped organization's next turn is free to run; the late worker's end changes nothing.
  expect(await scheduler.claim(1, LEASE_MS, false)).toHaveLength(1);
  expect(await end(turn!)).toMatchObject({ result: 'stale', stillLeased: false });
  expect(await schedulerState('org-r')).toMatchObject({ running: '1', waiting: '0' });
});

test('a reaped turn of a deleted session comes back with the job the deletion kept', async () => {
  const sent = await send('org-x');
  await scheduler.claim(1, 50, false);
  await store.delete(sent.sessionId, 'org-x');
  await new Promise((resolve) => setTimeout(resolve, 80));
  const [reaped] = await scheduler.reap(10, 'worker gone');
  expect(reaped).toMatchObject({ sessionId: sent.sessionId, turnId: sent.turnId, how: 'deleted' });
  expect(reaped?.jobJson).toContain(sent.turnId);
});

test('a turn handed back goes to the front of its queue', async () => {
  const [first, second] = await sendMany('org-q', 2);
  const [turn] = await scheduler.claim(1, LEASE_MS, false);
  expect(turn?.turnId).toBe(first!.turnId);
  expect(await scheduler.requeue(turn!)).toBe(true);
  expect(await scheduler.requeue(turn!)).toBe(false);
  const claimed = await scheduler.claim(2, LEASE_MS, false);
  expect(claimed.map((t) => t.turnId)).toEqual([first!.turnId, second!.turnId]);
});

test("a claim returns the history, which ends with the turn's own message", async () => {
  const sent = await send('org-h');
  const [turn] = await scheduler.claim(1, LEASE_MS, false);
  expect(turn).toMatchObject({ sessionId: sent.sessionId, turnId: sent.turnId, orgId: 'org-h' });
  expect(turn?.history).toEqual([{ role: 'user', content: 'x' }]);
});

test('a worker taking all it asked for while others wait leaves a wake token; a worker ending a turn does not', async () => {
  await sendMany('org-w', 5);
  await redis.del(sessionKeys(prefix).wake);
  const claimed = await scheduler.claim(2, LEASE_MS, true);
  expect(claimed).toHaveLength(2);
  expect(await redis.zcard(sessionKeys(prefix).wake)).toBe(1);
  await redis.del(sessionKeys(prefix).wake);
  await scheduler.finish(claimed[0]!, { kind: 'error', error: 'done' }, 1, LEASE_MS);
  expect(await redis.zcard(sessionKeys(prefix).wake)).toBe(0);
});

test('the heartbeat renews held leases and reports turns whose lease or session is gone', async () => {
  const kept = await send('org-hb');
  const deleted = await send('org-hb');
  const reaped = await send('org-hb');
  const turns = await scheduler.claim(3, LEASE_MS, false);
  const registration = new WorkerRegistration({ redis, prefix, workerId: 'w1', concurrency: 3, ttlMs: LEASE_MS });
  for (const turn of turns) registration.hold(turn.sessionId, turn.turnId, turn.orgId);
  await store.delete(deleted.sessionId, 'org-hb');
  await redis.zrem(sessionKeys(prefix).leases, `${reaped.sessionId}:${reaped.turnId}:org-hb`);
  const lost = await registration.heartbeat();
  expect(lost.map((turn) => turn.turnId).sort()).toEqual([deleted.turnId, reaped.turnId].sort());
  expect(await redis.zscore(sessionKeys(prefix).leases, `${kept.sessionId}:${kept.turnId}:org-hb`)).not.toBeNull();
});

test("a worker's claim holds its turns' leases from the reply on, and reads their histories again until Redis answers: a failed read does not cost the turns", async () => {
  // A Redis user that may run the scripts but not read histories (LRANGE), until granted: the
  // claim goes through and the read after it fails, as when Redis goes between the two.
  const user = `claim-read-${randomUUID()}`;
  await redis.call('ACL', 'SETUSER', user, 'on', '>pw', '~*', '&*', '+@all', '-lrange');
  const connection = new Redis({ host: '127.0.0.1', port: 6379, username: user, password: 'pw' });
  const held = new Set<string>();
  const leases = {
    hold: (sessionId: string, turnId: string) => void held.add(`${sessionId}:${turnId}`),
    forget: (sessionId: string, turnId: string) => void held.delete(`${sessionId}:${turnId}`),
  };
  try {
    const sent = await send('org-a');
    const claiming = new TurnScheduler(connection, prefix, undefined, undefined, leases).claim(1, LEASE_MS, false);
    await until(() => held.size === 1);
    expect([...held]).toEqual([`${sent.sessionId}:${sent.turnId}`]);
    await new Promise((resolve) => setTimeout(resolve, 300)); // reads fail meanwhile
    await redis.call('ACL', 'SETUSER', user, '+lrange');
    const [turn] = await claiming;
    expect(turn).toMatchObject({ sessionId: sent.sessionId, turnId: sent.turnId, history: [{ content: 'x' }] });
    expect(held.size).toBe(1); // the worker runs it now, and forgets it when it ends
    // Without a lease holder (not a worker's scheduler) the read is not tried again.
    await send('org-b');
    await redis.call('ACL', 'SETUSER', user, '-lrange');
    await expect(new TurnScheduler(connection, prefix).claim(1, LEASE_MS, false)).rejects.toThrow(/NOPERM/);
  } finally {
    connection.disconnect();
    await redis.call('ACL', 'DELUSER', user);
  }
});

async function until(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

it("leases the turns of one claim until the Redis clock's now plus the lease lifetime, and a claim that finds nothing reads no clock", async () => {
  const [a, b] = await sendMany('org-clock', 2);
  const [seconds, micros] = await redis.time();
  const before = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  const claimed = await scheduler.claim(2, LEASE_MS, false);
  expect(claimed.map((turn) => turn.turnId).sort()).toEqual([a?.turnId, b?.turnId].sort());
  const leases = sessionKeys(prefix).leases;
  const deadlines = await Promise.all(
    claimed.map((turn) => redis.zscore(leases, `${turn.sessionId}:${turn.turnId}:org-clock`)),
  );
  expect(deadlines[0]).toBe(deadlines[1]);
  expect(Number(deadlines[0])).toBeGreaterThanOrEqual(before + LEASE_MS);
  expect(Number(deadlines[0])).toBeLessThan(before + LEASE_MS + 5_000);
  // Nothing waits now: a claim (and an end that claims) run no TIME, and an end that gives its slot
  // back without making its organization ready looks at the ready set once.
  const seen = await commandsDuring(redis, async () => {
    expect(await scheduler.claim(4, LEASE_MS, false)).toEqual([]);
    for (const turn of claimed)
      expect((await scheduler.finish(turn, { kind: 'error', error: 'x' }, 4, LEASE_MS)).next).toEqual([]);
  });
  // Other test files share this Redis: only this file's commands count, those naming its keys and
  // those its scripts ran (MONITOR shows a script's commands, source 'lua', right after its call).
  const name = ({ args }: { args: string[] }) => args[0]?.toLowerCase();
  let caller = false;
  const ours = seen.filter(({ args, source }) => {
    if (source !== 'lua') caller = args.some((arg) => arg.startsWith(prefix));
    return caller;
  });
  expect(ours.filter((command) => name(command) === 'evalsha')).toHaveLength(3);
  expect(ours.filter((command) => name(command) === 'zrange')).toHaveLength(1 + claimed.length);
  expect(ours.map(name)).not.toContain('time');
});
