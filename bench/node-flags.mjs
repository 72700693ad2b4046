#!/usr/bin/env node
// Two sets of the gateway's node flags side by side in one run (issue 13's RSS goal): two rigs
// (engine + gateway each), the same governed loads on both in alternating order per round (JSON
// and 16-chunk SSE at 32 connections, the same SSE from an engine that writes every event on its own
// (`--flush-each-event`, as per-token engines do), SSE of the in-process simulated engine), and for
// each flag set the rate, the gateway's CPU per request and its peak RSS over all the loads.
// Each gateway runs with lib/gc-probe.mjs preloaded, which records its GC pauses, so that the
// collector's share of the difference shows too: for each flag set, the minor and major GC pauses
// of the measured rounds per 1,000 requests, their time per request, and their longest.
// Usage: pnpm build && node bench/node-flags.mjs [--seconds 4] [--rounds 3] [--a="<flags>"] [--b="<flags>"]
//   --a defaults to the flags of the gateway's start script, --b to the same without its
//   --heap-growing-percent (V8's own old-generation growth).
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import {
  BENCH_MODEL,
  createBenchOrgKey,
  deleteByPrefix,
  gatewayStartFlags,
  httpModelCatalogLines,
  IN_PROCESS_CATALOG_LINES,
  IN_PROCESS_MODEL,
  startChatRig,
  startInstantEngine,
} from './lib/chat-rig.mjs';
import { cpuMsOf, median, rssOf, sampleRss } from './lib/processes.mjs';
import { haveWrk, wrkPost } from './lib/wrk.mjs';
import { benchArgs } from './lib/args.mjs';

const startFlags = gatewayStartFlags().flags;
const { seconds, rounds, a, b } = benchArgs(
  'node bench/node-flags.mjs [--seconds 4] [--rounds 3] [--a=<flags>] [--b=<flags>]',
  {
    numbers: { seconds: 4, rounds: 3 },
    strings: {
      a: startFlags.join(' '),
      b: startFlags.filter((flag) => !flag.startsWith('--heap-growing-percent')).join(' '),
    },
  },
);
const flagSets = { a, b };
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
/** The model served by the engine that writes every event on its own. */
const PER_EVENT_MODEL = 'bench/per-event';

if (!haveWrk()) throw new Error('node-flags needs wrk (apt-get install wrk)');

const bodyOf = (model, stream) =>
  JSON.stringify({
    model,
    messages: [{ role: 'user', content: 'Say hello to the benchmark.' }],
    max_tokens: 16,
    ...(stream ? { stream: true } : {}),
  });

/** perf_hooks.constants.NODE_PERFORMANCE_GC_MINOR and _MAJOR: scavenges and mark-compacts. */
const MINOR_GC = 1;
const MAJOR_GC = 4;

/** Width of a flag set's column. */
const COLUMN = 36;
const GC_PROBE = new URL('./lib/gc-probe.mjs', import.meta.url).pathname;
const probeDir = mkdtempSync(join(tmpdir(), 'tollway-gc-probe-'));
const redis = new Redis(redisUrl);
const rigs = {};
try {
  for (const [name, flags] of Object.entries(flagSets)) {
    const prefix = `bench-flags-${name}-${randomUUID()}:`;
    const adminToken = `bench-admin-${randomUUID()}`;
    const modelLines = ['capacity: 100000', 'price_per_million: { input: 1, output: 2 }'];
    const perEventSim = await startInstantEngine({ useDist: true, simArgs: ['--ignore-eos', '--flush-each-event'] });
    const rig = await startChatRig({
      useDist: true,
      simArgs: ['--ignore-eos'],
      modelLines,
      extraCatalogLines: [
        ...IN_PROCESS_CATALOG_LINES,
        ...httpModelCatalogLines(PER_EVENT_MODEL, perEventSim.port, modelLines),
      ],
      gatewayEnv: {
        REDIS_URL: redisUrl,
        REDIS_PREFIX: prefix,
        ADMIN_TOKEN: adminToken,
        GC_PROBE_OUT: join(probeDir, name),
      },
      gatewayNodeFlags: [...flags.split(' ').filter(Boolean), '--import', GC_PROBE],
    }).catch(async (err) => {
      await perEventSim.stop();
      throw err;
    });
    const key = await createBenchOrgKey(rig.gateway.port, adminToken);
    rigs[name] = {
      name,
      rig,
      perEventSim,
      prefix,
      key,
      flags,
      results: new Map(),
      peak: rssOf(rig.gateway.child.pid) ?? 0,
    };
  }
  const loads = [
    { name: 'JSON', model: BENCH_MODEL, stream: false },
    { name: 'SSE', model: BENCH_MODEL, stream: true },
    { name: 'SSE per-event', model: PER_EVENT_MODEL, stream: true },
    { name: 'SSE in-process', model: IN_PROCESS_MODEL, stream: true },
  ];
  console.log(`wrk 1 thread, 32 connections, ${seconds} s per point, ${rounds} rounds, governed key`);
  for (const name of Object.keys(rigs)) console.log(`  ${name}: node ${rigs[name].flags}`);
  // Warm-up of both, then the rounds, the two flag sets in alternating order.
  for (const load of loads) for (const name of Object.keys(rigs)) await measure(rigs[name], load, 1);
  for (const target of Object.values(rigs)) {
    target.results.clear();
    await gcPauses(target); // the warm-up's are dropped
  }
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? ['a', 'b'] : ['b', 'a'];
    for (const load of loads) for (const name of order) await measure(rigs[name], load, seconds);
    process.stdout.write(`round ${round + 1}/${rounds} done\n`);
  }
  console.log(
    `\n${''.padEnd(18)}${'a: req/s · CPU µs/req'.padEnd(COLUMN)}${'b: req/s · CPU µs/req'.padEnd(COLUMN)}b/a rate · CPU`,
  );
  for (const load of loads) {
    const [a, b] = ['a', 'b'].map((name) => summary(rigs[name].results.get(load.name)));
    console.log(
      `${load.name.padEnd(18)}${`${a.rps} · ${a.cpu}`.padEnd(COLUMN)}${`${b.rps} · ${b.cpu}`.padEnd(COLUMN)}` +
        `${(b.rps / a.rps).toFixed(3)} · ${(b.cpu / a.cpu).toFixed(3)}`,
    );
  }
  const mb = (bytes) => `${(bytes / 1024 / 1024).toFixed(1)} MiB (${(bytes / 1e6).toFixed(1)} MB)`;
  console.log(`peak RSS          ${mb(rigs.a.peak).padEnd(COLUMN)}${mb(rigs.b.peak)}`);
  // GC pauses of all the measured rounds, per flag set.
  const gc = {};
  for (const name of Object.keys(rigs)) {
    const requests = [...rigs[name].results.values()].flat().reduce((sum, run) => sum + run.total, 0);
    gc[name] = gcSummary(await gcPauses(rigs[name]), requests);
  }
  for (const [label, kind] of [
    ['minor GC', MINOR_GC],
    ['major GC', MAJOR_GC],
  ]) {
    const cell = (name) => {
      const { per1000, usPerRequest, maxMs } = gc[name][kind];
      return `${per1000.toFixed(1)}/1000 · ${usPerRequest.toFixed(1)} µs · max ${maxMs.toFixed(1)} ms`;
    };
    console.log(`${label.padEnd(18)}${cell('a').padEnd(COLUMN)}${cell('b')}`);
  }
  console.log('(GC: pauses per 1,000 requests · pause time per request · longest pause)');
} finally {
  for (const { rig, perEventSim, prefix } of Object.values(rigs)) {
    await Promise.all([rig.stop(), perEventSim.stop()]);
    await deleteByPrefix(redis, prefix);
  }
  redis.disconnect();
  rmSync(probeDir, { recursive: true, force: true });
}

async function measure(target, load, duration) {
  const pid = target.rig.gateway.child.pid;
  const stopRss = sampleRss(pid, 50);
  const cpuBefore = cpuMsOf(pid);
  const result = await wrkPost(target.rig.gatewayUrl, bodyOf(load.model, load.stream), target.key, {
    connections: 32,
    seconds: duration,
  });
  const cpuUs = (cpuMsOf(pid) - cpuBefore) * 1000;
  target.peak = Math.max(target.peak, stopRss());
  if (result.non2xx > 0 || result.errors > 0)
    throw new Error(`${load.name}: ${result.non2xx} non-2xx, ${result.errors} socket errors`);
  if (!target.results.has(load.name)) target.results.set(load.name, []);
  target.results.get(load.name).push({ rps: result.rps, cpu: cpuUs / Math.max(1, result.total), total: result.total });
}

/** The GC pauses the target's gateway recorded since the last call (lib/gc-probe.mjs, on SIGUSR2). */
async function gcPauses(target) {
  const file = join(probeDir, target.name);
  rmSync(file, { force: true });
  target.rig.gateway.child.kill('SIGUSR2');
  for (let waited = 0; !existsSync(file); waited += 20) {
    if (waited > 5000) throw new Error('the GC probe wrote nothing within 5 s');
    await sleep(20);
  }
  return JSON.parse(readFileSync(file, 'utf8'));
}

function gcSummary(pauses, requests) {
  const of = (kind) => {
    const ms = pauses.filter((pause) => pause.kind === kind).map((pause) => pause.ms);
    const total = ms.reduce((sum, x) => sum + x, 0);
    return {
      per1000: (1000 * ms.length) / Math.max(1, requests),
      usPerRequest: (1000 * total) / Math.max(1, requests),
      maxMs: ms.length ? Math.max(...ms) : 0,
    };
  };
  return { [MINOR_GC]: of(MINOR_GC), [MAJOR_GC]: of(MAJOR_GC) };
}

function summary(runs) {
  return { rps: Math.round(median(runs.map((r) => r.rps))), cpu: Math.round(median(runs.map((r) => r.cpu))) };
}
