import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { createLogger } from '@tollway/service-kit';
import { SessionStore } from '../store/session-store';
import { sessionKeys } from '../store/session-keys';
import { TurnScheduler, type ClaimedTurn } from '../store/turn-scheduler';
import { TurnDispatcher } from './turn-dispatcher';

/**
 * The worker's loop over the scheduler, on real Redis with a stand-in for the agent: how many
 * claims it makes (each a Redis round trip), and that a token it cannot use goes on to a worker
 * that can.
 */
const prefix = `test-${randomUUID()}:`;
const LEASE_TTL_MS = 5000;
const limits = { maxHistoryBytes: 1_000_000, maxRunningTurns: 0, maxWaitingTurns: 0, weight: 1 };
const logger = createLogger({ service: 'test', silent: true });
const connections: Redis[] = [];
const dispatchers: TurnDispatcher[] = [];
let redis: Redis;
let store: SessionStore;

function connect(): Redis {
  const connection = new Redis('redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
  connections.push(connection);
  return connection;
}

beforeAll(() => {
  redis = connect();
  store = new SessionStore({ redis, prefix });
});

afterEach(async () => {
  // Stopped, and their turns ended, before the connections close (no timer or call outlives the test).
  const stopping = dispatchers.splice(0);
  await Promise.all(stopping.map((dispatcher) => dispatcher.stop()));
  await Promise.all(stopping.map((dispatcher) => dispatcher.drained()));
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
});

afterAll(async () => {
  await Promise.all(connections.map((connection) => connection.quit().catch(() => undefined)));
});

/** Queues one turn on a new session; its session id. */
async function send(): Promise<string> {
  const id = randomUUID();
  expect(await store.create(id, null, [], { maxSessions: 1000, maxHistoryBytes: 1_000_000 })).toBe('created');
  const message = { role: 'user' as const, content: 'x' };
  const { result } = await store.startTurn(id, null, { turnId: randomUUID(), message, job: '{}' }, limits);
  expect(result).toBe('ok');
  return id;
}

/**
 * A worker of `concurrency` slots whose turns take `holdMs` and then end as the real processor
 * ends them (claiming the next in the same step); records the sessions it started and its claims.
 */
function startWorker(concurrency: number, holdMs: number) {
  const scheduler = new TurnScheduler(connect(), prefix);
  const claims = { plain: 0, withWait: 0 };
  const claim = scheduler.claim.bind(scheduler);
  const claimThenWait = scheduler.claimThenWait.bind(scheduler);
  scheduler.claim = (...args) => {
    claims.plain++;
    return claim(...args);
  };
  scheduler.claimThenWait = (...args) => {
    claims.withWait++;
    return claimThenWait(...args);
  };
  const started: string[] = [];
  const dispatcher = new TurnDispatcher({
    scheduler,
    blocking: connect(),
    concurrency,
    leaseTtlMs: LEASE_TTL_MS,
    logger,
    process: async (turn: ClaimedTurn, claimNext) => {
      started.push(turn.sessionId);
      await new Promise((resolve) => setTimeout(resolve, holdMs));
      const reply = { role: 'assistant' as const, content: 'done' };
      const outcome = { kind: 'success' as const, append: [reply], response: reply };
      return (await scheduler.finish(turn, outcome, claimNext(), LEASE_TTL_MS)).next;
    },
  });
  dispatchers.push(dispatcher);
  dispatcher.start();
  return { started, claims };
}

async function waitFor(check: () => boolean, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (!check() && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 5));
  expect(check()).toBe(true);
}

const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

it('claims once a wake, with the next wait in the same write, and not again for a slot whose turn found no successor', async () => {
  const worker = startWorker(4, 20);
  await waitFor(() => worker.claims.withWait === 1, 1000); // at start: nothing to claim yet
  const ids = [await send()];
  await waitFor(() => worker.started.length === 1, 1000);
  await settle(200); // the turn ends, finds the queue empty, and its slot waits for a token
  expect(worker.claims).toEqual({ plain: 0, withWait: 2 });
  ids.push(await send());
  await waitFor(() => worker.started.length === 2, 1000);
  await settle(200);
  expect(worker.claims).toEqual({ plain: 0, withWait: 3 });
  expect(worker.started).toEqual(ids);
  expect(await redis.hget(sessionKeys(prefix).session(ids[1] as string), 'status')).toBe('idle');
});

it('hands on a token its wait took while every slot was taken, for the next worker that waits', async () => {
  // The worker takes the first send's token and claims all it can (2 of 3): the claim leaves a
  // token for the turn it had no slot for, and the wait written behind the claim takes it.
  const a = startWorker(2, 1000);
  await waitFor(() => a.claims.withWait === 1, 1000);
  await settle(50);
  const sent = [randomUUID(), randomUUID(), randomUUID()];
  for (const id of sent) await store.create(id, null, [], { maxSessions: 1000, maxHistoryBytes: 1_000_000 });
  await Promise.all(
    sent.map((id) =>
      store.startTurn(id, null, { turnId: randomUUID(), message: { role: 'user', content: 'x' }, job: '{}' }, limits),
    ),
  );
  await waitFor(() => a.started.length === 2, 1000);
  await settle(100);
  expect(a.claims).toEqual({ plain: 0, withWait: 2 });
  // It could not use the token: it is back, and the next worker to wait takes it and the turn.
  expect(await redis.zcard(sessionKeys(prefix).wake)).toBe(1);
  const waiting = connect();
  expect(await waiting.bzpopmin(sessionKeys(prefix).wake, 1)).not.toBeNull();
});
