#!/usr/bin/env node
// A turn's Redis work (issue 39), against another build in the same run: on each build's platform
// (a private Redis, the gateway with its simulated engine, 2 session API replicas and 2 workers of
// 4 agent processes, the built-in chat agent), `--clients` clients each loop send + long-poll on a
// session of their own for `--seconds`. Prints turns/s, round trip p50/p99, and Redis commands and
// CPU per turn (INFO before and after; the gateway's model call included); then, from a MONITOR
// pass of its own, the commands per turn by cause (BullMQ, the session scripts, long-poll reads,
// the worker registry, pub/sub, the gateway call); then a governed chat request's Redis work
// (wrk, or a Node loop, against the gateway alone). Then new ÷ base.
// With them, Redis's reads of client sockets per turn (each a batch of one client's commands) and
// its wake-ups per turn: its voluntary context switches, each the end of a sleep in
// epoll_wait that new commands broke (see the session README, "The ceiling of one Redis").
// Usage: node bench/turn-redis-cost.mjs [--base DIR] [--seconds 10] [--clients 32] [--rounds 2] [--apis 2] [--workers 2] [--pin]
//   --apis, --workers: the session API replicas and workers (4 agent processes each) of each platform.
//   --pin: Redis on CPU 0 alone and everything else on the other CPUs, as on the 16-core host.
import { resolve } from 'node:path';
import http from 'node:http';
import { benchArgs } from './lib/args.mjs';
import { CAUSES, clientNames, monitorCauses } from './lib/redis-monitor.mjs';
import { perUnit, pinToOtherCores, quantile, sessionClient, startSessionPlatform } from './lib/session-rig.mjs';

const args = benchArgs(
  'node bench/turn-redis-cost.mjs [--base DIR] [--seconds 10] [--clients 32] [--rounds 2] [--apis 2] [--workers 2] [--pin]',
  {
    numbers: { seconds: 10, clients: 32, rounds: 2, apis: 2, workers: 2 },
    strings: { base: null },
    flags: ['pin'],
  },
);
if (args.pin) pinToOtherCores(0);
const builds = { new: resolve(new URL('..', import.meta.url).pathname) };
if (args.base) builds.base = resolve(args.base);

const results = {};
for (const [name, root] of Object.entries(builds)) {
  console.error(`${name}…`);
  results[name] = await measure(root);
}
report();

async function measure(root) {
  const platform = await startSessionPlatform(root, {
    apis: args.apis,
    workers: args.workers,
    concurrency: 4,
    ...(args.pin ? { redisCore: 0 } : {}),
  });
  try {
    const org = await platform.organization('cost');
    const client = sessionClient(platform.apiUrls, org.key);
    const ids = await Promise.all(Array.from({ length: args.clients }, () => client.createSession()));
    await loop(client, ids, 2); // warm-up
    const rounds = [];
    for (let round = 0; round < args.rounds; round++) {
      const before = await platform.redis.counters();
      const { turns, latencies, elapsed } = await loop(client, ids, args.seconds);
      const after = await platform.redis.counters();
      rounds.push({ turnsPerSecond: turns / elapsed, ...perUnit(before, after, turns), latencies });
    }
    // Causes, from a pass under MONITOR of its own.
    let names = await clientNames(platform.redis.redis);
    const refresh = setInterval(async () => (names = await clientNames(platform.redis.redis)), 1000);
    const monitored = monitorCauses(platform.redis.port, Math.min(5, args.seconds), () => names);
    const { turns: monitoredTurns } = await loop(client, ids, Math.min(5, args.seconds));
    const { byCause, total } = await monitored;
    clearInterval(refresh);
    const chat = await governedRequests(platform, org.key);
    client.close();
    const best = rounds.reduce((a, b) => (a.turnsPerSecond >= b.turnsPerSecond ? a : b));
    const latencies = rounds.flatMap((r) => r.latencies);
    return {
      turnsPerSecond: median(rounds.map((r) => r.turnsPerSecond)),
      commands: median(rounds.map((r) => r.commands)),
      cpuUs: median(rounds.map((r) => r.cpuUs)),
      wakeups: median(rounds.map((r) => r.wakeups)),
      reads: median(rounds.map((r) => r.reads)),
      p50: quantile(latencies, 0.5),
      p99: quantile(latencies, 0.99),
      best,
      causes: Object.fromEntries(CAUSES.map((cause) => [cause, byCause.get(cause) / monitoredTurns])),
      monitoredPerTurn: total / monitoredTurns,
      chat,
    };
  } finally {
    await platform.stop();
  }
}

/** Each client loops send + long-poll on its session for `seconds`. */
async function loop(client, ids, seconds) {
  const end = performance.now() + seconds * 1000;
  const latencies = [];
  const started = performance.now();
  await Promise.all(
    ids.map(async (id) => {
      while (performance.now() < end) {
        const sentAt = performance.now();
        await client.send(id, { content: 'hello' });
        await client.waitIdle(id);
        latencies.push(performance.now() - sentAt);
      }
    }),
  );
  return { turns: latencies.length, latencies, elapsed: (performance.now() - started) / 1000 };
}

/** Governed chat completions straight at the gateway (16 at a time, a few seconds): Redis per request. */
async function governedRequests(platform, key) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  const body = JSON.stringify({
    model: 'tollway/sim-chat',
    messages: [{ role: 'user', content: 'hi' }],
    max_tokens: 8,
  });
  const post = () =>
    new Promise((done, fail) => {
      const req = http.request(
        `${platform.gatewayUrl}/v1/chat/completions`,
        {
          method: 'POST',
          agent,
          headers: {
            authorization: `Bearer ${key}`,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
          },
        },
        (res) => {
          res.resume();
          res.on('end', () => done(res.statusCode));
        },
      );
      req.on('error', fail);
      req.end(body);
    });
  const before = await platform.redis.counters();
  let requests = 0;
  const end = performance.now() + 3000;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (performance.now() < end) if ((await post()) === 200) requests++;
    }),
  );
  const after = await platform.redis.counters();
  agent.destroy();
  return { requests, ...perUnit(before, after, requests) };
}

function median(values) {
  return quantile(values, 0.5);
}

function report() {
  const lines = [
    `| build | turns/s | round trip p50 / p99 (ms) | Redis per turn | ${CAUSES.join(' | ')} | governed request |`,
    `|---|---|---|---|${CAUSES.map(() => '---').join('|')}|---|`,
  ];
  for (const [name, r] of Object.entries(results)) {
    lines.push(
      `| ${name} | ${r.turnsPerSecond.toFixed(0)} | ${r.p50.toFixed(0)} / ${r.p99.toFixed(0)} | ${r.commands.toFixed(1)} commands, ${r.cpuUs.toFixed(0)} µs CPU, ${r.reads.toFixed(2)} reads, ${r.wakeups.toFixed(2)} wake-ups | ${CAUSES.map((cause) => r.causes[cause].toFixed(1)).join(' | ')} | ${r.chat.commands.toFixed(2)} commands, ${r.chat.cpuUs.toFixed(1)} µs CPU |`,
    );
  }
  console.log(lines.join('\n'));
  // Redis's own time per command (a script's includes what it ran; MULTI/EXEC's its commands').
  for (const [name, r] of Object.entries(results)) {
    const top = r.best.byCommand
      .slice(0, 8)
      .map((entry) => `${entry.command} ${entry.calls.toFixed(2)}× ${entry.us.toFixed(0)} µs`)
      .join(', ');
    console.log(`${name}: Redis time per turn by command: ${top}`);
  }
  if (results.base) {
    const [fresh, base] = [results.new, results.base];
    console.log(
      `new ÷ base: turns/s ${(fresh.turnsPerSecond / base.turnsPerSecond).toFixed(3)}, Redis commands per turn ${(fresh.commands / base.commands).toFixed(3)} (${fresh.commands.toFixed(1)} vs ${base.commands.toFixed(1)}), Redis CPU per turn ${(fresh.cpuUs / base.cpuUs).toFixed(3)} (${fresh.cpuUs.toFixed(0)} vs ${base.cpuUs.toFixed(0)} µs), Redis reads per turn ${(fresh.reads / base.reads).toFixed(3)} (${fresh.reads.toFixed(2)} vs ${base.reads.toFixed(2)}), Redis wake-ups per turn ${(fresh.wakeups / base.wakeups).toFixed(3)} (${fresh.wakeups.toFixed(2)} vs ${base.wakeups.toFixed(2)})`,
    );
  }
}
