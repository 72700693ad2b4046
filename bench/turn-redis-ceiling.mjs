#!/usr/bin/env node
// How many turns one Redis core serves when it is kept busy (issue 39's ceiling): Redis on CPU 0
// alone, and `--drivers` processes on the other CPUs, each playing API replicas and workers with
// the session service's own code (the built SessionStore and TurnScheduler): `--slots` agent slots
// each end their turn with a reply (the script that ends it claims the next turn, then the
// claimed turn's history is read), and the client of the ended session sends again at once. No
// HTTP, no agent, no model: what is left is exactly a turn's Redis work, as fast as Redis and the
// drivers take it. Each driver's turn ends are delivered to a subscriber of its own, as to the API
// replica whose long-poll waits.
// Prints turns/s, Redis CPU per turn, Redis busy (% of its core), wake-ups and commands per turn,
// and the ceiling that CPU per turn gives one core. The more turns are under way at once (--slots),
// the more commands each wake-up of Redis finds waiting, and the less CPU a turn costs it: with one
// slot every command waits for the one before (three wake-ups a turn), as at a light load.
// Sessions start with `--history` messages and each takes about turns ÷ sessions turns, two
// messages each. Needs Linux and 2 CPUs or more; `pnpm build` first.
// Usage: node bench/turn-redis-ceiling.mjs [--drivers n] [--turns 20000] [--sessions 1024] [--slots 64] [--history 20]
//   --turns, --sessions, --slots: per driver. --drivers: default the CPUs but Redis's, at most 8.
import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { benchArgs } from './lib/args.mjs';
import { pinToOtherCores, startBenchRedis } from './lib/session-rig.mjs';

const root = new URL('..', import.meta.url).pathname;
const dist = join(root, 'services/agent-session/dist');

if (process.argv[2] === '--driver') await drive(JSON.parse(process.argv[3]));
else await main();

async function main() {
  const args = benchArgs(
    'node bench/turn-redis-ceiling.mjs [--drivers n] [--turns 20000] [--sessions 1024] [--slots 64] [--history 20]',
    {
      numbers: {
        drivers: Math.min(8, Math.max(1, availableParallelism() - 1)),
        turns: 20000,
        sessions: 1024,
        slots: 64,
        history: 20,
      },
    },
  );
  if (args.drivers < 1 || args.slots < 1 || args.sessions < args.slots) {
    console.error('--drivers and --slots take 1 or more, --sessions at least --slots');
    process.exit(2);
  }
  pinToOtherCores(0);
  const redis = await startBenchRedis({ core: 0 });
  const prefix = `ceiling-${randomUUID()}:`;
  try {
    const drivers = Array.from({ length: args.drivers }, (_, i) =>
      fork(new URL(import.meta.url).pathname, [
        '--driver',
        JSON.stringify({ url: redis.url, prefix, org: 'ceiling', index: i, ...args }),
      ]),
    );
    const said = (child, type) =>
      new Promise((resolve, reject) => {
        child.on('message', (message) => message.type === type && resolve(message));
        child.once('exit', (code) => code !== 0 && reject(new Error(`a driver exited with ${code}`)));
      });
    // Every driver makes its sessions and sends their first turns; then all start together.
    await Promise.all(drivers.map((child) => said(child, 'ready')));
    const before = await redis.counters();
    const startedAt = performance.now();
    const done = drivers.map((child) => said(child, 'done'));
    for (const child of drivers) child.send({ type: 'go' });
    const results = await Promise.all(done);
    const seconds = (performance.now() - startedAt) / 1000;
    const after = await redis.counters();
    const turns = results.reduce((sum, result) => sum + result.turns, 0);
    const cpuSeconds = after.cpu - before.cpu;
    const cpuUs = (cpuSeconds * 1e6) / turns;
    const perTurn = (field) => ((after[field] - before[field]) / turns).toFixed(2);
    console.log(
      `${args.drivers} driver(s) x ${args.slots} slots, ${args.sessions} sessions each (histories from ${args.history} messages, about ${Math.ceil(args.turns / args.sessions)} turns each)`,
    );
    console.log(
      `| turns/s | Redis CPU a turn | Redis busy | wake-ups a turn | commands a turn | ceiling of one core at this CPU a turn |`,
    );
    console.log(`|---|---|---|---|---|---|`);
    console.log(
      `| ${(turns / seconds).toFixed(0)} | ${cpuUs.toFixed(1)} µs | ${((cpuSeconds / seconds) * 100).toFixed(0)} % | ${perTurn('wakeups')} | ${perTurn('commands')} | ${(1e6 / cpuUs).toFixed(0)} turns/s |`,
    );
    await Promise.all(
      drivers.map((child) => {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.send({ type: 'exit' });
        return exited;
      }),
    );
  } finally {
    await redis.stop();
  }
}

/** One driver: its sessions, their first turns, then its slots running turns until `turns` ended. */
async function drive({ url, prefix, org, index, turns, sessions, slots, history }) {
  const { SessionStore } = await import(join(dist, 'store/session-store.js'));
  const { TurnScheduler } = await import(join(dist, 'store/turn-scheduler.js'));
  const { replicaEventsChannel } = await import(join(dist, 'store/session-keys.js'));
  const redis = new Redis(url, { enableAutoPipelining: true });
  const subscriber = new Redis(url);
  const replica = `driver${index}`;
  await subscriber.subscribe(replicaEventsChannel(prefix, replica));
  const store = new SessionStore({ redis, prefix });
  const scheduler = new TurnScheduler(redis, prefix);
  const limits = { maxHistoryBytes: 1e9, maxWaitingTurns: 0, weight: 1, maxRunningTurns: 0 };
  const reply = { role: 'assistant', content: 'Hello! How can I help you today?' };
  const preload = Array.from({ length: history }, (_, i) =>
    i % 2 === 0 ? { role: 'user', content: `message ${i}` } : { ...reply },
  );
  const send = async (sessionId) => {
    const turnId = randomUUID();
    const job = JSON.stringify({
      session_id: sessionId,
      turn_id: turnId,
      org_id: org,
      message: { role: 'user', content: null },
      accepted_at: Date.now(),
      traceparent: null,
    });
    const { result } = await store.startTurn(
      sessionId,
      org,
      { turnId, message: { role: 'user', content: 'hello' }, job },
      limits,
      replica,
    );
    if (result !== 'ok') throw new Error(`send: ${result}`);
  };
  const ids = Array.from({ length: sessions }, () => randomUUID());
  for (const id of ids) {
    const created = await store.create(id, org, preload, { maxSessions: 1e9, maxHistoryBytes: 1e9 });
    if (created !== 'created') throw new Error(`create: ${created}`);
  }
  await Promise.all(ids.map(send));
  process.send({ type: 'ready' });
  await new Promise((resolve) => process.on('message', (message) => message.type === 'go' && resolve()));
  let ended = 0;
  const slot = async (turn) => {
    while (turn && ended < turns) {
      ended++;
      const { result, next } = await scheduler.finish(
        turn,
        { kind: 'success', append: [reply], response: reply },
        1,
        60_000,
      );
      if (result !== 'applied') throw new Error(`finish: ${result}`);
      await send(turn.sessionId);
      turn = next[0];
    }
  };
  // Other drivers' slots share the queue: claim this driver's slots one turn at a time.
  const first = [];
  for (let i = 0; i < slots; i++) first.push(...(await scheduler.claim(1, 60_000, false)));
  await Promise.all(first.map(slot));
  process.send({ type: 'done', turns: ended });
  await new Promise((resolve) => process.on('message', (message) => message.type === 'exit' && resolve()));
  redis.disconnect();
  subscriber.disconnect();
  process.disconnect();
}
