#!/usr/bin/env node
// Cost of admission control (issue 4's performance goals): auth by organization key, all three
// budgets, credit and capacity enforced, against the simulated engine answering at once:
//  (a) added latency at one connection, p50 and p99: engine direct, gateway without admission
//      (a static API_KEYS key, unmetered), gateway with full admission (an organization key);
//  (b) requests per second at 32 connections, same three;
//  (c) Redis round trips per request on the metered path, counted with MONITOR (only commands
//      touching this run's key prefix, so other Redis users do not disturb the count): one request
//      at a time, and at 32 connections, where settlements that finish together share one call.
// Full admission runs as deployed: local admission from quota slices (ADMISSION_SLICES=true);
// --no-slices admits every request in Redis instead, for comparison.
// Usage: node bench/admission-overhead.mjs [--dist] [--seconds 5] [--no-slices]
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { Redis } from 'ioredis';
import {
  BENCH_MODEL,
  createBenchOrgKey,
  deleteByPrefix,
  describeLoadGenerator,
  fmtMs,
  gatewayStartFlags,
  latencyAtOneConnection,
  postChat,
  sequentialLatencies,
  startChatRig,
  throughput,
} from './lib/chat-rig.mjs';
import { sampleRss } from './lib/processes.mjs';

const argv = process.argv.slice(2);
const useDist = argv.includes('--dist');
const slices = !argv.includes('--no-slices');
const secondsAt = argv.indexOf('--seconds');
const seconds = secondsAt === -1 ? 5 : Number(argv[secondsAt + 1]);
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

const STATIC_KEY = 'bench-static-key';
const ADMIN_TOKEN = `bench-admin-${randomUUID()}`;
const PREFIX = `bench-${randomUUID()}:`;

const body = JSON.stringify({
  model: BENCH_MODEL,
  messages: [{ role: 'user', content: 'Say hello to the benchmark.' }],
  max_tokens: 16,
});

const redis = new Redis(redisUrl);
let rig;
let gateway;
try {
  rig = await startChatRig({
    useDist,
    // capacity is enforced: every request takes and frees a lease.
    modelLines: ['capacity: 100000', 'price_per_million: { input: 1, output: 2 }'],
    gatewayEnv: {
      REDIS_URL: redisUrl,
      REDIS_PREFIX: PREFIX,
      API_KEYS: STATIC_KEY,
      ADMIN_TOKEN,
      ADMISSION_SLICES: String(slices),
    },
    // As deployed: the node flags of the gateway's start script (the quickstart and the Docker image use the same).
    gatewayNodeFlags: gatewayStartFlags().flags,
  });
  ({ gateway } = rig);
  // Budgets large enough never to refuse during the run: every check still runs.
  const orgKey = await createBenchOrgKey(gateway.port, ADMIN_TOKEN);

  const stopRss = sampleRss(gateway.child.pid);
  const { engineUrl, gatewayUrl } = rig;
  console.log(
    `engine :${rig.sim.port}  gateway :${gateway.port}  ${useDist ? 'compiled' : 'tsx'}  ${seconds}s per measure`,
  );
  console.log(describeLoadGenerator());
  console.log(
    `full admission: ${slices ? 'local admission from quota slices (as deployed)' : 'every request in Redis (--no-slices)'}`,
  );

  for (const [url, key] of [
    [engineUrl, STATIC_KEY],
    [gatewayUrl, STATIC_KEY],
    [gatewayUrl, orgKey],
  ])
    await sequentialLatencies(url, body, key, 2000);

  // (a) one connection.
  const direct = await latencyAtOneConnection(engineUrl, body, STATIC_KEY, seconds);
  const unmetered = await latencyAtOneConnection(gatewayUrl, body, STATIC_KEY, seconds);
  const metered = await latencyAtOneConnection(gatewayUrl, body, orgKey, seconds);
  console.log('\n(a) latency at 1 connection (ms)');
  console.log(`    engine direct              p50 ${fmtMs(direct.p50)}  p99 ${fmtMs(direct.p99)}`);
  console.log(`    gateway, no admission      p50 ${fmtMs(unmetered.p50)}  p99 ${fmtMs(unmetered.p99)}`);
  console.log(`    gateway, full admission    p50 ${fmtMs(metered.p50)}  p99 ${fmtMs(metered.p99)}`);
  console.log(
    `    added by the gateway       p50 ${fmtMs(metered.p50 - direct.p50)}  p99 ${fmtMs(metered.p99 - direct.p99)}   (goal ≤ 0.3 / ≤ 2)`,
  );
  console.log(
    `    of which admission         p50 ${fmtMs(metered.p50 - unmetered.p50)}  p99 ${fmtMs(metered.p99 - unmetered.p99)}`,
  );

  // (b) 32 connections. A 3 s warm-up each: the metered path takes a few seconds under load to
  // reach its steady rate. The gateway is measured twice, alternating without and with admission,
  // so a slow minute of a shared machine does not fall on one of them only; both runs are shown.
  const directRps = await throughput(engineUrl, body, STATIC_KEY, 32, seconds, { warmup: 3 });
  const gatewayRuns = { unmetered: [], metered: [] };
  for (let round = 0; round < 2; round++) {
    gatewayRuns.unmetered.push(await throughput(gatewayUrl, body, STATIC_KEY, 32, seconds, { warmup: 3 }));
    gatewayRuns.metered.push(await throughput(gatewayUrl, body, orgKey, 32, seconds, { warmup: 3 }));
  }
  console.log('\n(b) requests/s at 32 connections');
  const show = (r) => `${Math.round(r.rps)} req/s (${r.errors} errors, ${r.non2xx} non-2xx)`;
  console.log(`    engine direct              ${show(directRps)}`);
  for (const [label, runs] of [
    ['gateway, no admission  ', gatewayRuns.unmetered],
    ['gateway, full admission', gatewayRuns.metered],
  ]) {
    const mean = runs.reduce((sum, r) => sum + r.rps, 0) / runs.length;
    console.log(`    ${label}    mean ${Math.round(mean)} req/s   runs: ${runs.map(show).join(', ')}`);
  }
  console.log('    goal ≥ 8000 req/s with full admission');

  // (c) Redis round trips per metered request.
  const sample = 200;
  // Requests the load generator abandoned at the end of its run are still being settled: let them land.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const sequential = await countRedisCommands(async () => {
    for (let i = 0; i < sample; i++) await postChat(gatewayUrl, body, orgKey, http.globalAgent);
    return sample;
  });
  printRoundTrips(`one request at a time (${sample} requests)`, sequential);
  const loaded = await countRedisCommands(async () => {
    const run = await throughput(gatewayUrl, body, orgKey, 32, 2);
    return run.total;
  });
  printRoundTrips('32 connections (2 s)', loaded);
  console.log("    (each EVALSHA is one round trip; only admit calls are on a request's path; the key");
  console.log('    lookup is cached in process)');

  const peak = stopRss();
  console.log(`\nRSS of the gateway, peak under load: ${(peak / 1024 / 1024).toFixed(1)} MB`);
} finally {
  await rig?.stop();
  await deleteByPrefix(redis, PREFIX);
  redis.disconnect();
}

function printRoundTrips(label, { counts, requests }) {
  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  console.log(`\n(c) Redis commands per metered request, ${label}: ${(total / requests).toFixed(3)}`);
  for (const [name, n] of counts) console.log(`    ${name.padEnd(10)} ${(n / requests).toFixed(4)}`);
}

/**
 * Redis commands touching PREFIX while `run` runs, by command name (via MONITOR), and the number
 * of requests `run` resolves with. Requests the load generator left unanswered at its end are
 * counted by their commands but not as requests: a slight overcount.
 */
async function countRedisCommands(run) {
  const monitor = await redis.monitor();
  // A busy server streams other clients' commands too; ioredis can trip over a line that arrives
  // while the monitor connection closes. Counting is done by then.
  monitor.on('error', () => undefined);
  const counts = new Map();
  monitor.on('monitor', (_time, args, source) => {
    // Commands a script runs inside Redis show up with source `lua`: they are not round trips.
    if (source === 'lua' || !args.some((arg) => String(arg).startsWith(PREFIX))) return;
    const name = String(args[0]).toLowerCase();
    const label = name === 'evalsha' || name === 'eval' ? `${name} (${scriptOf(args)})` : name;
    counts.set(label, (counts.get(label) ?? 0) + 1);
  });
  await new Promise((resolve) => setTimeout(resolve, 100));
  const requests = await run();
  // Settlement runs after the response is sent: let the last one land.
  await new Promise((resolve) => setTimeout(resolve, 200));
  monitor.disconnect();
  return { counts, requests };
}

/** Which of the gateway's scripts an EVALSHA/EVAL runs, told by the keys it names. */
function scriptOf(args) {
  const keys = args.slice(3, 3 + Number(args[2])).map(String);
  if (keys.length % 4 === 0 && keys[2]?.endsWith(':leases') && keys[3]?.endsWith(':slices')) return 'admit';
  if (keys.some((key) => key.includes(':usage:'))) return 'settle';
  if (keys.length > 0 && keys.every((key) => /:(org|buckets|slices|leases)$/.test(key))) return 'return or settle';
  return 'other';
}
