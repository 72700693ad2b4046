#!/usr/bin/env node
// The gateway's benchmark of record (issue 13): one command, one table. Against an instant
// OpenAI-compatible engine over HTTP (the simulated engine, its own process), it measures
//   engine alone · Tollway governed (an organization key: auth, three budgets, credit, capacity)
//   · Tollway unmetered (a static API_KEYS key) · Tollway serving its in-process simulated engine
// for JSON and 16-chunk SSE streams, at 1 connection (p50, p99) and 32 connections (rate, p50,
// p99): at 32 connections with wrk, at 1 connection with an exact sequential client
// (lib/one-connection.mjs: wrk's one-connection latencies are not consistent here). Every point is measured in each of `--rounds` rounds, the targets in a rotated
// order per round, so a slow minute of a shared machine spreads over all of them; at 32
// connections the table shows the median of the rounds and, for rates, the range; at 1 connection,
// where the tail is the point, each round's time is cut into slices alternating the targets and
// the percentiles are those of all their requests together. The gateway runs as the default start
// command runs it (the node flags of its package.json `start` script) and its RSS is sampled
// throughout; its CPU time per request (from /proc) is printed too: it barely depends on other
// load. The goals of issue 13 are checked from ratios within the run. Last, the CPU of a relayed
// stream part by part (engine, gateway, wrk, Redis) and the stream rate two cores allow with it.
// The 32-connection stream point is measured against two instant engines: the one of the table,
// which writes the events generated together in one write (the whole stream, here), and one that
// writes every event as an HTTP chunk of its own, each in a turn of its event loop of its own
// (`--flush-each-event`), as vLLM, SGLang and llama.cpp's server send a token per scheduler step;
// the gateway governs both. Beside the gateway, a bare pass-through proxy (lib/bare-proxy.mjs: node:http
// both ways, bytes piped, nothing else) relays the same streams from each engine: a reference for what
// relaying alone costs on this machine, so the gateway's stream rate can be read against it.
// Usage: pnpm build && node bench/gateway-table.mjs [--seconds 5] [--rounds 2] [--tsx]
//   --tsx runs the TypeScript sources instead of dist/ (RSS is then tsx's, not the start command's).
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import http from 'node:http';
import { availableParallelism } from 'node:os';
import { Redis } from 'ioredis';
import {
  BENCH_MODEL,
  createBenchOrgKey,
  deleteByPrefix,
  gatewayStartFlags,
  httpModelCatalogLines,
  IN_PROCESS_CATALOG_LINES,
  IN_PROCESS_MODEL,
  postChat,
  startBareProxy,
  startChatRig,
  startInstantEngine,
} from './lib/chat-rig.mjs';
import { cpuMsOf, exitedChildrenCpuMs, machineCpuMs, median, quantile, rssOf, sampleRss } from './lib/processes.mjs';
import { haveWrk, wrkPost } from './lib/wrk.mjs';
import { oneConnectionLatencies } from './lib/one-connection.mjs';
import { benchArgs } from './lib/args.mjs';

const { seconds, rounds, tsx } = benchArgs('node bench/gateway-table.mjs [--seconds 5] [--rounds 2] [--tsx]', {
  numbers: { seconds: 5, rounds: 2 },
  flags: ['tsx'],
});
const useDist = !tsx;
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `${process.env.BENCH_REDIS_PREFIX ?? 'bench-'}${randomUUID()}:`;
const STATIC_KEY = 'bench-static-key';
const ADMIN_TOKEN = `bench-admin-${randomUUID()}`;
const STREAM_TOKENS = 16;
/** The model served by the engine that writes every event on its own. */
const PER_EVENT_MODEL = 'bench/per-event';
const CORES = availableParallelism();
/** Every target of the 32-connection stream point, in the order the budget table prints them. */
const SSE32_TARGETS = [
  'engine',
  'bare',
  'governed',
  'unmetered',
  'inProcess',
  'perEventEngine',
  'perEventBare',
  'perEventGoverned',
];
/** Slices per round of each 1-connection point (see the rounds). */
const ONE_CONNECTION_SLICES = 3;

if (!haveWrk()) throw new Error('gateway-table needs wrk (apt-get install wrk)');
if (useDist && !existsSync(new URL('../services/inference-gateway/dist/main.js', import.meta.url))) {
  throw new Error('services/inference-gateway/dist is missing: run `pnpm build` first (or pass --tsx)');
}

// The gateway starts as `pnpm --filter @tollway/inference-gateway start` starts it: the node
// flags of that script (e.g. its young-generation size), nothing else.
const { script: START_SCRIPT, flags: gatewayNodeFlags } = gatewayStartFlags();

const bodyOf = (model, stream) =>
  JSON.stringify({
    model,
    messages: [{ role: 'user', content: 'Say hello to the benchmark.' }],
    max_tokens: STREAM_TOKENS,
    ...(stream ? { stream: true } : {}),
  });

const redis = new Redis(redisUrl);
let rig;
let perEventSim;
let bareProxies = [];
try {
  // Every stream has exactly max_tokens token chunks.
  const simArgs = ['--ignore-eos'];
  const modelLines = ['capacity: 100000', 'price_per_million: { input: 1, output: 2 }'];
  perEventSim = await startInstantEngine({ useDist, simArgs: [...simArgs, '--flush-each-event'] });
  rig = await startChatRig({
    useDist,
    simArgs,
    modelLines,
    extraCatalogLines: [
      ...IN_PROCESS_CATALOG_LINES,
      ...httpModelCatalogLines(PER_EVENT_MODEL, perEventSim.port, modelLines),
    ],
    gatewayEnv: { REDIS_URL: redisUrl, REDIS_PREFIX: PREFIX, API_KEYS: STATIC_KEY, ADMIN_TOKEN },
    gatewayNodeFlags,
  });
  const { sim, gateway, engineUrl, gatewayUrl } = rig;
  const [bare, perEventBare] = (bareProxies = await Promise.all([
    startBareProxy(sim.port),
    startBareProxy(perEventSim.port),
  ]));
  const bareUrl = (proxy) => `http://127.0.0.1:${proxy.port}/v1/chat/completions`;
  const orgKey = await createBenchOrgKey(gateway.port, ADMIN_TOKEN);
  // `pid` serves the requests; `enginePid` is the engine process behind them (for the CPU split).
  const engine = { pid: sim.child.pid, enginePid: sim.child.pid };
  const throughGateway = { url: gatewayUrl, pid: gateway.child.pid, enginePid: sim.child.pid };
  const perEventEngineUrl = `http://127.0.0.1:${perEventSim.port}/v1/chat/completions`;
  // `proxyPid` is the process relaying the requests in place of the gateway (for the CPU split).
  const targets = {
    engine: { label: 'engine alone', url: engineUrl, key: STATIC_KEY, model: BENCH_MODEL, ...engine },
    bare: {
      label: 'bare pass-through proxy',
      url: bareUrl(bare),
      key: STATIC_KEY,
      model: BENCH_MODEL,
      pid: bare.child.pid,
      proxyPid: bare.child.pid,
      enginePid: sim.child.pid,
    },
    governed: { label: 'Tollway, governed', key: orgKey, model: BENCH_MODEL, ...throughGateway },
    unmetered: { label: 'Tollway, unmetered', key: STATIC_KEY, model: BENCH_MODEL, ...throughGateway },
    inProcess: { label: 'Tollway, in-process sim', key: STATIC_KEY, model: IN_PROCESS_MODEL, ...throughGateway },
    perEventEngine: {
      label: 'per-event engine alone',
      url: perEventEngineUrl,
      key: STATIC_KEY,
      model: PER_EVENT_MODEL,
      pid: perEventSim.child.pid,
      enginePid: perEventSim.child.pid,
    },
    perEventBare: {
      label: 'bare proxy, per-event engine',
      url: bareUrl(perEventBare),
      key: STATIC_KEY,
      model: PER_EVENT_MODEL,
      pid: perEventBare.child.pid,
      proxyPid: perEventBare.child.pid,
      enginePid: perEventSim.child.pid,
    },
    perEventGoverned: {
      label: 'Tollway, governed, per-event engine',
      key: orgKey,
      model: PER_EVENT_MODEL,
      ...throughGateway,
      enginePid: perEventSim.child.pid,
    },
  };
  const measures = [
    { name: 'json1', stream: false, connections: 1, targets: ['engine', 'governed', 'unmetered'] },
    { name: 'json32', stream: false, connections: 32, targets: ['engine', 'governed', 'unmetered'] },
    { name: 'sse1', stream: true, connections: 1, targets: ['engine', 'governed', 'unmetered'] },
    {
      name: 'sse32',
      stream: true,
      connections: 32,
      targets: SSE32_TARGETS,
    },
  ];
  console.log(
    `engine :${sim.port}  gateway :${gateway.port} (${useDist ? `the start script: ${START_SCRIPT}` : 'tsx'})  ` +
      `32 connections: wrk 1 thread; 1 connection: one sequential socket, in ${ONE_CONNECTION_SLICES} alternating slices; ` +
      `${seconds} s per point, ${rounds} rounds, targets rotated per round; ${STREAM_TOKENS}-token JSON and SSE`,
  );

  // Every relayed stream follows the Events rules; checked once per target before the load.
  for (const name of Object.keys(targets)) await checkStream(targets[name]);
  const rssIdle = rssOf(gateway.child.pid);
  const stopRss = sampleRss(gateway.child.pid, 50);
  // Warm-up: JIT, connection pools, quota slices and capacity blocks.
  // Which load the gateway's RSS peaked in: a sampler per load, the largest kept.
  let peakLoad = { rss: 0, during: 'idle' };
  const sampled = async (during, run) => {
    const stop = sampleRss(gateway.child.pid, 50);
    try {
      return await run();
    } finally {
      const rss = stop();
      if (rss > peakLoad.rss) peakLoad = { rss, during };
    }
  };
  for (const measure of measures)
    for (const name of measure.targets)
      await sampled(`warm-up ${measure.name} ${name}`, () =>
        load(targets[name], measure.stream, measure.connections, 1),
      );

  const results = new Map();
  let rssAfterJson = 0;
  for (let round = 0; round < rounds; round++) {
    for (const measure of measures) {
      // At 1 connection the tail is what is measured: the time is cut into slices that alternate
      // the targets, so each samples the same moments of a noisy machine, and the runs are pooled.
      const slices = measure.connections === 1 ? ONE_CONNECTION_SLICES : 1;
      const duration = Math.max(1, Math.round(seconds / slices));
      const order = [];
      for (let slice = 0; slice < slices; slice++) order.push(...rotate(measure.targets, round + slice));
      for (const name of order) {
        const target = targets[name];
        const budgetBefore = await budgetSnapshot(target);
        const result = await sampled(`${measure.name} ${name}, round ${round + 1}`, () =>
          load(target, measure.stream, measure.connections, duration),
        );
        const budget = perRequest(budgetBefore, await budgetSnapshot(target), result.total);
        if (result.non2xx > 0 || result.errors > 0)
          console.log(`  ! ${measure.name} ${name}: ${result.non2xx} non-2xx, ${result.errors} socket errors`);
        const key = `${measure.name}/${name}`;
        if (!results.has(key)) results.set(key, []);
        // CPU of the serving process: the engine alone's, else the gateway's.
        const cpuUsPerRequest = target.pid === target.enginePid ? budget.engineUs : budget.gatewayUs;
        results.get(key).push({ ...result, cpuUsPerRequest, ...budget });
      }
      if (measure.name === 'json32') rssAfterJson = Math.max(rssAfterJson, rssOf(gateway.child.pid) ?? 0);
    }
    process.stdout.write(`round ${round + 1}/${rounds} done\n`);
  }
  const rssPeak = stopRss();
  const rssEnd = rssOf(gateway.child.pid);

  printTable(results, targets, { rssIdle, rssAfterJson, rssEnd, rssPeak, peakDuring: peakLoad.during });
} finally {
  await Promise.all([rig?.stop(), perEventSim?.stop(), ...bareProxies.map((proxy) => proxy.stop())]);
  await deleteByPrefix(redis, PREFIX);
  redis.disconnect();
}

/**
 * CPU time so far, in ms, of every part of a measurement of `target`: its engine process, the gateway process,
 * wrk (this process's exited children: each wrk run is waited for), Redis (its INFO), and the whole
 * machine (busy and total, all cores).
 */
async function budgetSnapshot(target) {
  const info = await redis.info('cpu');
  const cpuSeconds = (field) => Number(new RegExp(`^${field}:([\\d.]+)`, 'm').exec(info)?.[1] ?? NaN);
  const machine = machineCpuMs();
  return {
    engine: cpuMsOf(target.enginePid),
    gateway: cpuMsOf(target.proxyPid ?? rig.gateway.child.pid),
    wrk: exitedChildrenCpuMs(),
    redis: (cpuSeconds('used_cpu_user') + cpuSeconds('used_cpu_sys')) * 1000,
    machineBusy: machine.busy,
    machineTotal: machine.total,
  };
}

/** Between two budget snapshots: µs of CPU per request of each part, and the machine's busy cores. */
function perRequest(before, after, requests) {
  const us = (part) => ((after[part] - before[part]) * 1000) / Math.max(1, requests);
  return {
    engineUs: us('engine'),
    gatewayUs: us('gateway'),
    wrkUs: us('wrk'),
    redisUs: us('redis'),
    busyCores:
      (CORES * (after.machineBusy - before.machineBusy)) / Math.max(1, after.machineTotal - before.machineTotal),
  };
}

/**
 * One point: wrk at 32 connections (the rate); at 1 connection the exact sequential client of
 * lib/one-connection.mjs (wrk's latencies at one connection are not consistent with its own rate
 * on these VMs: see there), with the same fields plus each request's latency.
 */
async function load(target, stream, connections, duration) {
  const body = bodyOf(target.model, stream);
  if (connections !== 1) return wrkPost(target.url, body, target.key, { connections, seconds: duration });
  const result = await oneConnectionLatencies(target.url, body, target.key, duration);
  return { ...result, errors: 0 };
}

function rotate(list, by) {
  const k = by % list.length;
  return [...list.slice(k), ...list.slice(0, k)];
}

function printTable(results, targets, rss) {
  const get = (measure, name) => results.get(`${measure}/${name}`);
  const ms = (v) => (v < 1 ? `${Math.round(v * 1000)} µs` : `${v.toFixed(2)} ms`);
  const pick = (measure, name, field) => {
    const runs = get(measure, name);
    return runs ? median(runs.map((r) => r[field])) : NaN;
  };
  // 1-connection latencies pool all the runs of a target (see the rounds), sorted once; others
  // are medians of the rounds.
  const pooledRuns = new Map();
  const pooled = (measure, name) => {
    const key = `${measure}/${name}`;
    if (!pooledRuns.has(key))
      pooledRuns.set(
        key,
        get(measure, name)
          .flatMap((run) => run.latencies)
          .sort((a, b) => a - b),
      );
    return pooledRuns.get(key);
  };
  const percentile = (measure, name, p) =>
    get(measure, name)[0].latencies ? quantile(pooled(measure, name), p / 100) : pick(measure, name, `p${p}`);
  const latency = (measure, name) =>
    get(measure, name) ? `${ms(percentile(measure, name, 50))} / ${ms(percentile(measure, name, 99))}` : '—';
  const rate = (measure, name) => {
    const runs = get(measure, name);
    if (!runs) return '—';
    const values = runs.map((r) => Math.round(r.rps));
    return `${Math.round(median(values))} (${Math.min(...values)}–${Math.max(...values)})`;
  };
  const cpu = (measure, name) => (get(measure, name) ? `${Math.round(pick(measure, name, 'cpuUsPerRequest'))}` : '—');

  const rows = [
    ['JSON, 1 conn, p50 / p99', (n) => latency('json1', n)],
    ['JSON, 32 conn, req/s (range)', (n) => rate('json32', n)],
    ['JSON, 32 conn, p50 / p99', (n) => latency('json32', n)],
    ['JSON, 32 conn, CPU µs/request', (n) => cpu('json32', n)],
    ['SSE, 1 conn, p50 / p99', (n) => latency('sse1', n)],
    [`SSE ${STREAM_TOKENS}-chunk, 32 conn, streams/s`, (n) => rate('sse32', n)],
    ['SSE, 32 conn, p50 / p99', (n) => latency('sse32', n)],
    ['SSE, 32 conn, CPU µs/stream', (n) => cpu('sse32', n)],
  ];
  const names = ['engine', 'bare', 'governed', 'unmetered', 'inProcess'];
  const line = (cells, width = 24) => cells.map((cell, i) => String(cell).padEnd(i ? width : 34)).join('');
  console.log(
    '\n(1 connection: percentiles of all the requests of all rounds together; 32 connections: medians of the rounds;\n' +
      ' CPU = the serving process: the engine alone, else the bare proxy or the gateway)',
  );
  console.log(line(['', ...names.map((n) => targets[n].label)]));
  for (const [label, cell] of rows) console.log(line([label, ...names.map(cell)]));
  const perEvent = ['perEventEngine', 'perEventBare', 'perEventGoverned'];
  console.log(`\nAn engine that writes every event on its own (--flush-each-event), as per-token engines do`);
  console.log(line(['', ...perEvent.map((n) => targets[n].label)], 38));
  for (const [label, cell] of rows.filter(([label]) => label.startsWith('SSE') && !label.includes('1 conn')))
    console.log(line([label, ...perEvent.map(cell)], 38));
  const check = (measure) =>
    names
      .filter((n) => get(measure, n))
      .map((n) => {
        const runs = get(measure, n);
        const total = runs.reduce((sum, run) => sum + run.total, 0);
        const weighted = (field) => runs.reduce((sum, run) => sum + run[field] * run.total, 0) / total;
        return `${n} ${weighted('meanUs').toFixed(0)}/${weighted('usPerRequest').toFixed(0)}`;
      })
      .join(', ');
  console.log(
    `\n1 connection, mean latency / wall time per request, µs (a check of the client): JSON ${check('json1')}; SSE ${check('sse1')}`,
  );
  // RSS in MiB (2^20 bytes), as Node and most tools count it; the goal's 150 MB is read strictly, as
  // 150 × 10^6 bytes (143.1 MiB), so it holds whichever way it is read.
  const mb = (bytes) => `${((bytes ?? 0) / 1024 / 1024).toFixed(1)} MiB`;
  console.log(
    `\nGateway RSS: idle ${mb(rss.rssIdle)}, after the JSON load ${mb(rss.rssAfterJson)}, at the end ${mb(rss.rssEnd)}, peak ${mb(rss.rssPeak)} (during ${rss.peakDuring})`,
  );

  const p99 = (m, n) => percentile(m, n, 99);
  const rps = (m, n) => pick(m, n, 'rps');
  // The stream goals: rate ≥ 75 % of the engine alone's, p99 ≤ 2 × its p99, at 32 connections.
  const streamGoals = (engine, bare, governed, label) => {
    const [rate, p99s] = [rps('sse32', governed) / rps('sse32', engine), p99('sse32', governed) / p99('sse32', engine)];
    const bareRate = rps('sse32', bare) / rps('sse32', engine);
    return [
      [
        `${label.replace('governed', 'bare proxy')} streams/s, share of engine`,
        `${(100 * bareRate).toFixed(0)} % (governed: ${((100 * rate) / bareRate).toFixed(0)} % of the bare proxy's rate)`,
        null,
      ],
      [`${label} streams/s ≥ 75 % of engine`, `${(100 * rate).toFixed(0)} %`, rate >= 0.75],
      [
        `${label} stream p99 ≤ 2 × engine`,
        `${ms(p99('sse32', governed))} vs ${ms(2 * p99('sse32', engine))} (ratio ${p99s.toFixed(2)})`,
        p99s <= 2,
      ],
    ];
  };
  const checks = [
    [
      'governed p99, 1 conn ≤ 1.5 × unmetered p99',
      `${ms(p99('json1', 'governed'))} vs ${ms(1.5 * p99('json1', 'unmetered'))} (ratio ${(p99('json1', 'governed') / p99('json1', 'unmetered')).toFixed(2)})`,
      p99('json1', 'governed') <= 1.5 * p99('json1', 'unmetered'),
    ],
    [
      'governed p99, 1 conn ≤ engine p99 + 1.5 ms',
      `${ms(p99('json1', 'governed'))} vs ${ms(p99('json1', 'engine') + 1.5)}`,
      p99('json1', 'governed') <= p99('json1', 'engine') + 1.5,
    ],
    ...streamGoals('engine', 'bare', 'governed', 'governed'),
    ...streamGoals('perEventEngine', 'perEventBare', 'perEventGoverned', 'per-event engine: governed'),
    [
      'gateway peak RSS ≤ 150 MB (150 × 10^6 bytes)',
      `${mb(rss.rssPeak)} (${(rss.rssPeak / 1e6).toFixed(1)} MB)`,
      rss.rssPeak <= 150e6,
    ],
    [
      'governed JSON req/s at 32 conn, share of engine',
      `${((100 * rps('json32', 'governed')) / rps('json32', 'engine')).toFixed(0)} % (unmetered ${((100 * rps('json32', 'unmetered')) / rps('json32', 'engine')).toFixed(0)} %)`,
      null,
    ],
  ];
  console.log('\nGoals of issue 13 (ratios within this run)');
  for (const [label, value, ok] of checks)
    console.log(`  ${ok === null ? '    ' : ok ? 'ok  ' : 'MISS'} ${label.padEnd(56)} ${value}`);
  printBudget(pick, rps, targets);
}

/**
 * Where the CPU of a 16-chunk stream at 32 connections goes, part by part, and what that allows:
 * engine, gateway, wrk and Redis share the machine's cores, so a relayed stream rate is at most
 * cores ÷ (the parts' CPU per stream), and at most 1 s ÷ the gateway's (one thread); the stream
 * goal of issue 13 is turned into the gateway CPU per stream it would take with the other parts as
 * measured.
 */
function printBudget(pick, rps, targets) {
  const names = SSE32_TARGETS;
  const parts = ['engineUs', 'gatewayUs', 'wrkUs', 'redisUs'];
  const widths = [36, 9, 9, 9, 9, 9, 14];
  const line = (cells) =>
    cells
      .map((cell, i) =>
        String(cell)
          .padStart(i ? widths[i] : 0)
          .padEnd(i ? 0 : widths[i]),
      )
      .join('');
  console.log(`\nCPU of a ${STREAM_TOKENS}-chunk stream at 32 connections, µs (medians of the rounds; ${CORES} cores)`);
  // "relay": the gateway, or in the bare proxy's rows the bare proxy.
  console.log(line(['', 'engine', 'relay', 'wrk', 'Redis', 'sum', 'machine busy']));
  for (const name of names) {
    const values = parts.map((part) => pick('sse32', name, part));
    const sum = values.reduce((a, b) => a + b, 0);
    const busy = pick('sse32', name, 'busyCores');
    console.log(
      line([targets[name].label, ...values.map((v) => v.toFixed(1)), sum.toFixed(1), `${busy.toFixed(2)} cores`]),
    );
  }
  for (const [engineName, bareName, governedName] of [
    ['engine', 'bare', 'governed'],
    ['perEventEngine', 'perEventBare', 'perEventGoverned'],
  ]) {
    const engineRate = rps('sse32', engineName);
    const engineOwn = pick('sse32', engineName, 'engineUs');
    const [engine, gateway, wrk, redisUs] = parts.map((part) => pick('sse32', governedName, part));
    const others = engine + wrk + redisUs;
    const ceiling = Math.min((CORES * 1e6) / (others + gateway), 1e6 / gateway);
    const goal = 0.75 * engineRate;
    const gatewayFor = Math.min((CORES * 1e6) / goal - others, 1e6 / goal);
    console.log(
      `  ${targets[governedName].label}: at most ${Math.round(ceiling)} streams/s with these costs ` +
        `(${((100 * ceiling) / engineRate).toFixed(0)} % of the engine alone; measured ${Math.round(rps('sse32', governedName))})`,
    );
    console.log(
      `    75 % of the engine alone (${Math.round(goal)}/s) would need the gateway at ≤ ${gatewayFor.toFixed(1)} µs a stream: ` +
        `${(gatewayFor / engineOwn).toFixed(2)} × what the engine alone spends to generate and serve it (today ${(gateway / engineOwn).toFixed(2)} ×)`,
    );
    const bareUs = pick('sse32', bareName, 'gatewayUs');
    console.log(
      `    the bare pass-through proxy spent ${bareUs.toFixed(1)} µs a stream (${(bareUs / engineOwn).toFixed(2)} × the engine alone's); ` +
        `the gateway ${(gateway / bareUs).toFixed(2)} × the bare proxy's`,
    );
  }
}

/** One stream through `target`, checked against the six Events rules; throws on a violation. */
async function checkStream(target) {
  let text = '';
  const { status } = await postChat(target.url, bodyOf(target.model, true), target.key, http.globalAgent, (data) => {
    text += data;
  });
  if (status !== 200) throw new Error(`${target.label}: stream answered ${status}`);
  // The engine alone, and the bare proxy that relays it, are what they are (no usage on the first
  // chunks unless asked); the gateway's streams are what must follow the rules.
  if (target.pid === target.enginePid || target.proxyPid) return;
  const frames = text
    .split('\n\n')
    .filter((frame) => frame.length > 0)
    .map((frame) => frame.replace(/^data: /, ''));
  const problem = eventsProblem(frames);
  if (problem) throw new Error(`${target.label}: stream breaks the Events rules: ${problem}\n${text}`);
  const tokenChunks = frames.slice(1, -2).length;
  if (tokenChunks !== STREAM_TOKENS)
    throw new Error(`${target.label}: ${tokenChunks} token chunks, not ${STREAM_TOKENS}`);
}

/** The first of the six Events rules that `frames` (SSE data payloads) break, or null. */
function eventsProblem(frames) {
  if (frames.at(-1) !== '[DONE]') return 'rule 6: no data: [DONE] at the end';
  const chunks = frames.slice(0, -1).map((frame) => JSON.parse(frame));
  const first = chunks[0];
  if (first?.choices?.[0]?.delta?.role !== 'assistant' || 'usage' in first) return 'rule 2: first chunk';
  const last = chunks.at(-1);
  if (last.choices.length !== 0 || !last.usage) return 'rule 5: last chunk';
  for (const chunk of chunks.slice(1, -1)) {
    const finishing = chunk.choices.some((choice) => choice.finish_reason);
    if (finishing && 'usage' in chunk) return 'rule 3: finishing chunk carries usage';
    if (!finishing && !chunk.usage) return 'rule 4: a chunk without usage';
  }
  return null;
}
