#!/usr/bin/env node
// Where the gateway's tail at one connection comes from (issue 13): runs wrk at 1 connection
// against the governed (organization key) and the unmetered (static key) gateway in turn, with
// bench/lib/tail-probe.mjs loaded into the gateway, and prints for each a histogram of request time
// (measured inside the gateway) by what else happened while the request was served: a GC pause,
// one of its own Redis round trips (an admission that missed the local slice), another Redis call
// sent or answered meanwhile (settlement, slice return, lease renewal), a timer callback, nothing.
// Also per request: Redis calls by script, timer callbacks by where they were set, GC pauses.
// Usage: pnpm build && node bench/tail-causes.mjs [--seconds 5] [--rounds 2] [--tsx]
//        [--sse]            streams of 16 chunks instead of JSON
//        [--connections N]  wrk connections (default 1)
//        [--per-event]      with --sse: the engine writes every event on its own (--flush-each-event),
//                           as per-token engines do (the table's per-event engine)
//        [--cpu-prof DIR]   instead of the probe: the gateway's CPU profile (written under DIR), self
//                           time per function, top 25 (the probe's own cost would show in it)
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { BENCH_MODEL, createBenchOrgKey, deleteByPrefix, startChatRig } from './lib/chat-rig.mjs';
import { quantile } from './lib/processes.mjs';
import { wrkPost } from './lib/wrk.mjs';
import { oneConnectionLatencies } from './lib/one-connection.mjs';
import { benchArgs } from './lib/args.mjs';

const args = benchArgs(
  'node bench/tail-causes.mjs [--seconds 5] [--rounds 2] [--tsx] [--sse] [--per-event] [--connections 1] [--cpu-prof DIR]',
  {
    numbers: { seconds: 5, rounds: 2, connections: 1 },
    strings: { 'cpu-prof': null },
    flags: ['tsx', 'sse', 'per-event'],
  },
);
const { seconds, rounds, sse, connections } = args;
const profileDir = args['cpu-prof'];
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `${process.env.BENCH_REDIS_PREFIX ?? 'bench-'}${randomUUID()}:`;
const STATIC_KEY = 'bench-static-key';
const ADMIN_TOKEN = `bench-admin-${randomUUID()}`;
const work = mkdtempSync(join(tmpdir(), 'tollway-tail-'));
const probeOut = join(work, 'probe.json');
const body = JSON.stringify({
  model: BENCH_MODEL,
  messages: [{ role: 'user', content: 'Say hello to the benchmark.' }],
  max_tokens: 16,
  ...(sse ? { stream: true } : {}),
});

const redis = new Redis(redisUrl);
let rig;
try {
  rig = await startChatRig({
    useDist: !args.tsx,
    simArgs: ['--ignore-eos', ...(args['per-event'] ? ['--flush-each-event'] : [])],
    modelLines: ['capacity: 100000', 'price_per_million: { input: 1, output: 2 }'],
    gatewayEnv: {
      REDIS_URL: redisUrl,
      REDIS_PREFIX: PREFIX,
      API_KEYS: STATIC_KEY,
      ADMIN_TOKEN,
      TAIL_PROBE_OUT: probeOut,
    },
    gatewayNodeFlags: profileDir
      ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`]
      : ['--import', new URL('./lib/tail-probe.mjs', import.meta.url).pathname],
  });
  const { gateway, gatewayUrl } = rig;
  const orgKey = await createBenchOrgKey(gateway.port, ADMIN_TOKEN);
  const modes = { governed: orgKey, unmetered: STATIC_KEY };
  // At 1 connection the exact sequential client (wrk's one-connection latencies are not consistent
  // on these VMs: see lib/one-connection.mjs), else wrk.
  const load = async (key, duration) => {
    if (connections !== 1) return wrkPost(gatewayUrl, body, key, { connections, seconds: duration });
    const { latencies, rps } = await oneConnectionLatencies(gatewayUrl, body, key, duration);
    return { rps, p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99) };
  };
  for (const key of Object.values(modes)) await load(key, 1);
  const collected = { governed: [], unmetered: [] };
  const clientSide = { governed: [], unmetered: [] };
  for (let round = 0; round < rounds; round++) {
    for (const mode of round % 2 ? ['unmetered', 'governed'] : ['governed', 'unmetered']) {
      if (!profileDir) await dump(gateway); // forget what came before
      const result = await load(modes[mode], seconds);
      clientSide[mode].push(result);
      if (!profileDir) collected[mode].push(await dump(gateway));
    }
  }
  if (!profileDir) for (const mode of Object.keys(modes)) report(mode, collected[mode], clientSide[mode]);
  else {
    for (const mode of Object.keys(modes))
      console.log(
        `${mode}: ${clientSide[mode].map((r) => `${Math.round(r.rps)}/s p50 ${r.p50} ms p99 ${r.p99} ms`).join(', ')}`,
      );
    await rig.stop();
    rig = null;
    summariseProfiles(profileDir);
  }
} finally {
  await rig?.stop();
  await deleteByPrefix(redis, PREFIX);
  redis.disconnect();
  rmSync(work, { recursive: true, force: true });
}

/** Asks the probe for what it recorded since the last dump. */
async function dump(gateway) {
  rmSync(probeOut, { force: true });
  gateway.child.kill('SIGUSR2');
  for (let i = 0; i < 100; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    try {
      return JSON.parse(readFileSync(probeOut, 'utf8'));
    } catch {
      // not written yet
    }
  }
  throw new Error('the probe wrote nothing');
}

/** The cause a request's time is put down to, by precedence (the first that applies). */
function causeOf(request, data) {
  const overlaps = (start, end) => start < request.end && end > request.start;
  if (data.gcs.some((gc) => overlaps(gc.start, gc.start + gc.duration))) return 'GC pause during it';
  const calls = data.redisCalls.filter(
    (call) => (call.sent >= request.start && call.sent <= request.end) || overlaps(call.answered, call.answered),
  );
  if (calls.some((call) => call.name === 'admit' && call.sent >= request.start)) return 'own admit round trip';
  if (calls.length > 0) return `Redis ${[...new Set(calls.map((call) => call.name))].sort().join('+')} meanwhile`;
  // undici's own immediates run on every request's path: they are the request, not a cause.
  const timer = data.callbacks.find((cb) => overlaps(cb.start, cb.start + cb.duration) && !cb.site.includes('undici'));
  if (timer) return `timer: ${timer.site.split(' ')[0]}`;
  return 'nothing else';
}

function report(mode, dumps, client) {
  const all = [];
  const redisCounts = new Map();
  const timerCounts = new Map();
  let gcCount = 0;
  let gcMs = 0;
  const gcKinds = new Map();
  for (const data of dumps) {
    for (const request of data.requests) all.push({ ms: request.end - request.start, cause: causeOf(request, data) });
    for (const call of data.redisCalls) redisCounts.set(call.name, (redisCounts.get(call.name) ?? 0) + 1);
    for (const cb of data.callbacks) {
      const key = `${cb.kind} ${cb.site}`;
      const seen = timerCounts.get(key) ?? { count: 0, ms: 0 };
      timerCounts.set(key, { count: seen.count + 1, ms: seen.ms + cb.duration });
    }
    gcCount += data.gcs.length;
    for (const gc of data.gcs) {
      gcMs += gc.duration;
      gcKinds.set(gc.kind, (gcKinds.get(gc.kind) ?? 0) + 1);
    }
  }
  const sorted = all.map((r) => r.ms).sort((a, b) => a - b);
  const p99 = quantile(sorted, 0.99);
  const n = all.length;
  const fmt = (ms) => `${(ms * 1000).toFixed(0)} µs`;
  console.log(
    `\n=== ${mode}: ${n} requests (client p50/p99 ${client.map((r) => `${fmt(r.p50)}/${fmt(r.p99)}`).join(', ')}); ` +
      `in the gateway p50 ${fmt(quantile(sorted, 0.5))}, p90 ${fmt(quantile(sorted, 0.9))}, p95 ${fmt(quantile(sorted, 0.95))}, ` +
      `p99 ${fmt(p99)}, p99.9 ${fmt(quantile(sorted, 0.999))}`,
  );
  const byCause = new Map();
  for (const r of all) {
    if (!byCause.has(r.cause)) byCause.set(r.cause, []);
    byCause.get(r.cause).push(r.ms);
  }
  console.log(
    `  ${'cause'.padEnd(44)}${'requests'.padStart(10)}${'share'.padStart(8)}${'p50'.padStart(10)}${'p99'.padStart(10)}${'max'.padStart(10)}  of the slowest 1 %`,
  );
  const slow = all.filter((r) => r.ms >= p99).length;
  for (const [cause, times] of [...byCause].sort((a, b) => b[1].length - a[1].length)) {
    times.sort((a, b) => a - b);
    const inTail = times.filter((ms) => ms >= p99).length;
    console.log(
      `  ${cause.padEnd(44)}${String(times.length).padStart(10)}${`${((100 * times.length) / n).toFixed(2)}%`.padStart(8)}` +
        `${fmt(quantile(times, 0.5)).padStart(10)}${fmt(quantile(times, 0.99)).padStart(10)}${fmt(times.at(-1)).padStart(10)}` +
        `  ${((100 * inTail) / Math.max(1, slow)).toFixed(0)} %`,
    );
  }
  const kinds = [...gcKinds].map(([kind, count]) => `kind ${kind}: ${count}`).join(', ');
  console.log(
    `  GC: ${((1000 * gcCount) / n).toFixed(2)} pauses per 1000 requests (${kinds}), mean ${gcCount ? (gcMs / gcCount).toFixed(3) : 0} ms`,
  );
  console.log(
    `  Redis calls per 1000 requests: ${[...redisCounts].map(([name, count]) => `${name} ${((1000 * count) / n).toFixed(2)}`).join(', ') || 'none'}`,
  );
  const timers = [...timerCounts].sort((a, b) => b[1].count - a[1].count).slice(0, 8);
  console.log('  timer callbacks per 1000 requests (mean time in the callback):');
  for (const [site, { count, ms }] of timers)
    console.log(
      `    ${((1000 * count) / n).toFixed(2).padStart(9)}  ${fmt(ms / count).padStart(8)}  ${site.replace(/\(\/.*node_modules\//, '(')}`,
    );
}

/** Self time per function over the profiles in `dir`, the top 25. */
function summariseProfiles(dir) {
  const totals = new Map();
  let all = 0;
  for (const file of readdirSync(dir).filter((name) => name.endsWith('.cpuprofile'))) {
    const profile = JSON.parse(readFileSync(join(dir, file), 'utf8'));
    const byId = new Map(profile.nodes.map((node) => [node.id, node]));
    const deltas = profile.timeDeltas;
    profile.samples.forEach((id, i) => {
      const frame = byId.get(id).callFrame;
      const where = frame.url
        ? `${frame.url.replace(/^.*\/(node_modules|services|packages)\//, '$1/')}:${frame.lineNumber + 1}`
        : '';
      const key = `${frame.functionName || '(anonymous)'} ${where}`;
      const us = deltas[i + 1] ?? 0;
      totals.set(key, (totals.get(key) ?? 0) + us);
      all += us;
    });
  }
  console.log('\n=== CPU profile of the gateway (whole run), self time, top 25');
  for (const [key, us] of [...totals].sort((a, b) => b[1] - a[1]).slice(0, 25))
    console.log(`  ${((100 * us) / all).toFixed(1).padStart(5)} %  ${key}`);
}
