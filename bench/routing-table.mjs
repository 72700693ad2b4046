#!/usr/bin/env node
// The routing benchmark of record (issue 37): one command, one table, one last line. The built
// gateway routes to simulated engines in their vLLM-like prefix-caching mode (each its own process:
// a KV cache of 16-token chain-hashed blocks with LRU eviction, continuous batching with a running
// cap, prefill time per uncached token, decode time growing with the batch; see SIM below), 4 and
// 8 replicas behind one model per routing policy. Three workloads, each run closed-loop for a fixed
// time at 1.5 × the replicas' running capacity (saturation) from a pool of twice as many clients,
// the engines' caches emptied before each, then, going on with the same clients on the same
// caches, open-loop at 0.8 × least_outstanding's saturated rate for latency:
//   (a) agent sessions: a shared 2,000-token system prompt, 10 turns each adding a 500-token tool
//       result and a 16-token answer, the session id as `user`; a new session when one ends;
//   (b) many users over 48 shared 6,000-token system prompts, a 50-token question each;
//   (c) the control: a unique 2,000-token prompt each, no shared prefix.
// For each policy and workload: time to first token p50/p99 (as the client sees it), output
// tokens/s, the engines' prefix-cache hit rate, the busiest replica's load (requests in it,
// averaged over time) and requests answered over the mean, the decisions that spilled past a full
// replica, the gateway's CPU per request. Then prefix_cache again behind 2 gateway replicas, or
// each count `--gateways` lists (requests rotate over them; they share the prefix index). Figures are
// ratios against least_outstanding measured in the same run. Ends with
//   prefix_cache vs least_outstanding: TTFT p50 X x lower, output tokens/s Y x higher
// (the smaller of workloads (a) and (b), at the largest replica count run).
// Usage: pnpm build && node bench/routing-table.mjs [--quick] [--seconds N] [--gateways 2,4] [...]
//   --quick: 4 replicas, least_outstanding and prefix_cache only, 2 + 3 s a run (under two minutes); default 4 and 8 replicas, all three policies, 10 + 10 s a saturation run and 5 + 10 s a latency run (about fourteen minutes).
//   --gateways: the gateway replica counts of the multi-gateway rows (default 2; each at the largest replica count, about a minute more a count; `none`: no such rows).
//   --replicas, --workloads, --policies (least_outstanding first), --kv-blocks: a part of the table, or other engine settings, to explore.
//   ROUTING_DEBUG=1: each latency run's own hit rate, spills and busiest load on stderr.
import { mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { benchArgs } from './lib/args.mjs';
import { gatewayStartFlags, httpModelCatalogLines, postChat, startBenchGateway } from './lib/chat-rig.mjs';
import { cpuMsOf, quantile, startService } from './lib/processes.mjs';
import { promptText as text } from './lib/prompt-text.mjs';

const require = createRequire(import.meta.url);
const USAGE =
  'node bench/routing-table.mjs [--quick] [--seconds N] [--gateways 2,4] [--replicas 4,8] [--workloads a,b,c] [--policies least_outstanding,prefix_cache] [--kv-blocks N]';
const args = benchArgs(USAGE, {
  numbers: { seconds: 0, 'kv-blocks': 0 },
  strings: { gateways: '2', replicas: '', workloads: 'a,b,c', policies: '' },
  flags: ['quick'],
});
/** Gateway replica counts of the multi-gateway rows. */
const GATEWAY_COUNTS = args.gateways === 'none' ? [] : args.gateways.split(',').map(Number);
if (GATEWAY_COUNTS.some((n) => !Number.isInteger(n) || n < 2))
  throw new Error(`--gateways takes counts of 2 or more, comma-separated, not ${args.gateways}`);
const QUICK = args.quick;
const SECONDS = args.seconds || (QUICK ? 3 : 10);
/**
 * Seconds of each saturation run before the measured part: long enough for (a)'s sessions, which
 * start cached nowhere, to come round once (caches and queues settle).
 */
const WARMUP_S = QUICK ? 2 : 10;
/** Seconds of each latency run before the measured part (it goes on with the saturation run's clients, on its caches). */
const LATENCY_WARMUP_S = QUICK ? 2 : 5;
const REPLICA_COUNTS = args.replicas ? args.replicas.split(',').map(Number) : QUICK ? [4] : [4, 8];
if (REPLICA_COUNTS.some((n) => !Number.isInteger(n) || n < 1 || n > 64))
  throw new Error(`--replicas takes counts from 1 to 64, comma-separated, not ${args.replicas}`);
const POLICIES = args.policies
  ? args.policies.split(',')
  : QUICK
    ? ['least_outstanding', 'prefix_cache']
    : ['least_outstanding', 'prefix_cache', 'sticky'];
if (
  POLICIES[0] !== 'least_outstanding' ||
  POLICIES.some((p) => !['least_outstanding', 'prefix_cache', 'sticky'].includes(p))
)
  throw new Error(
    `--policies starts with least_outstanding (the baseline), then prefix_cache and sticky, not ${args.policies}`,
  );
/** The latency runs' offered load, over least_outstanding's saturated request rate in the same run. */
const LATENCY_LOAD = 0.8;
/** Clients of the saturation runs over the replicas' running capacity (sequences they run at once). */
const SATURATION = 1.5;
const WORKLOADS = args.workloads.split(',');
if (WORKLOADS.some((kind) => !['a', 'b', 'c'].includes(kind)))
  throw new Error(`--workloads takes a, b and c, comma-separated, not ${args.workloads}`);

/** The simulated engine's settings (vLLM-like; stated in the gateway README). */
const SIM = {
  kvCacheBlocks: args['kv-blocks'] || 6144,
  prefillTokensPerS: 8000,
  decodeStepMs: 20,
  decodeMsPerSequence: 0.5,
  maxRunning: 8,
  maxBatchedTokens: 2048,
};
/** Output tokens per request (the engine ignores EOS: every answer is this long). */
const OUTPUT_TOKENS = 16;
/** Tokens each turn of workload (a) adds before the answer (a tool result). */
const TOOL_RESULT_TOKENS = 500;
/** Turns of a session of workload (a). */
const SESSION_TURNS = 10;
const KEY = 'bench-routing-key';
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/11';

const root = new URL('..', import.meta.url).pathname;
const gatewayDir = join(root, 'services/inference-gateway');
if (!existsSync(join(gatewayDir, 'dist/main.js'))) throw new Error('run `pnpm build` first');

const SYSTEM_A = text('system-a', 2000);
/** Workload (b)'s shared system prompts (an agent's instructions and tool definitions each). */
const SYSTEMS_B = Array.from({ length: 48 }, (_, i) => text(`system-b-${i}`, 6000));

// ---- processes ----
const work = mkdtempSync(join(tmpdir(), 'tollway-routing-'));
const children = [];
async function startSim() {
  const sim = await startService(join(gatewayDir, 'dist/engines/simulated/main-sim.js'), {
    cwd: gatewayDir,
    args: [
      '--port',
      '0',
      '--ignore-eos',
      '--max-model-len',
      '65536',
      '--kv-cache-blocks',
      String(SIM.kvCacheBlocks),
      '--prefill-tokens-per-s',
      String(SIM.prefillTokensPerS),
      '--decode-step-ms',
      String(SIM.decodeStepMs),
      '--decode-ms-per-sequence',
      String(SIM.decodeMsPerSequence),
      '--max-concurrency',
      String(SIM.maxRunning),
      '--max-batched-tokens',
      String(SIM.maxBatchedTokens),
    ],
  });
  children.push(sim);
  return sim;
}

function catalogText(sims) {
  const lines = ['models:'];
  // prefix_cacheN: the N-gateway runs' own model, so no index from other runs is carried over.
  const models = [
    ...POLICIES.map((policy) => [policy, policy]),
    ...GATEWAY_COUNTS.map((gateways) => [`prefix_cache${gateways}`, 'prefix_cache']),
  ];
  for (const count of REPLICA_COUNTS) {
    for (const [name, policy] of models) {
      lines.push(
        ...httpModelCatalogLines(
          `bench/${name}-${count}`,
          sims.slice(0, count).map((sim) => sim.port),
          ['price_per_million: { input: 1, output: 2 }', 'context_length: 65536'],
          [`routing: { policy: ${policy} }`],
        ),
      );
    }
  }
  return `${lines.join('\n')}\n`;
}

async function startGateway(catalog) {
  const gateway = await startBenchGateway(join(gatewayDir, 'dist/main.js'), {
    cwd: gatewayDir,
    catalog,
    flags: gatewayStartFlags().flags,
    env: {
      REDIS_URL: redisUrl,
      REDIS_PREFIX: `bench-routing-${process.pid}:`,
      API_KEYS: KEY,
      LOG_LEVEL: 'info',
      ACCESS_LOG: 'false',
    },
  });
  children.push(gateway);
  return gateway;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });

async function getText(port, path) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return res.text();
}

async function resetSim(sim) {
  for (let i = 0; i < 200; i++) {
    const res = await fetch(`http://127.0.0.1:${sim.port}/sim/reset`, { method: 'POST' });
    await res.arrayBuffer();
    if (res.status === 200) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('a simulated engine stayed busy');
}

async function simCounters(sim) {
  const metrics = await getText(sim.port, '/metrics');
  const value = (name) => Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, 'm').exec(metrics)?.[1] ?? 0);
  const stats = JSON.parse(await getText(sim.port, '/sim/stats'));
  return {
    requests: stats.requests,
    loadMs: stats.loadMs,
    queries: value('vllm:prefix_cache_queries_total'),
    hits: value('vllm:prefix_cache_hits_total'),
  };
}

/** The routing decisions the gateways made for `model`, summed, by outcome (their /metrics). */
async function decisionsOf(gateways, model) {
  const byOutcome = {};
  for (const gateway of gateways) {
    const metrics = await getText(gateway.port, '/metrics');
    for (const line of metrics.split('\n')) {
      if (!line.startsWith('tollway_routing_decisions_total{') || !line.includes(`model="${model}"`)) continue;
      const outcome = /outcome="([^"]+)"/.exec(line)?.[1];
      if (outcome) byOutcome[outcome] = (byOutcome[outcome] ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return byOutcome;
}

// ---- workloads: each returns a function that, per worker, gives the next request body ----
/**
 * The requests of workload `kind` for `model`: `source()` makes a client (a session, in (a)) whose
 * `next()` is its next request body and `done()` records the answer. A session made while
 * `warming()` starts at a random turn (0 to 9) with its earlier turns already in its history, cached
 * nowhere (as if it began before the run), so that sessions are at every turn from the start, not
 * all young together; later sessions start at turn 0. Session ids are unique to each run.
 */
let runs = 0;
function workload(kind, model, warming) {
  const run = runs++;
  let sessions = 0;
  let users = 0;
  if (kind === 'a') {
    return () => {
      let session = null;
      const turnText = (id, turn) => text(`${id}-${turn}`, TOOL_RESULT_TOKENS);
      const answerText = (id, turn) => text(`${id}-answer-${turn}`, OUTPUT_TOKENS);
      return {
        next() {
          if (!session || session.turn === SESSION_TURNS) {
            const id = `run-${run}-session-${sessions++}`;
            const turn = warming() ? Math.floor(Math.random() * SESSION_TURNS) : 0;
            const messages = [{ role: 'system', content: SYSTEM_A }];
            for (let earlier = 1; earlier <= turn; earlier++) {
              messages.push({ role: 'user', content: turnText(id, earlier) });
              messages.push({ role: 'assistant', content: answerText(id, earlier) });
            }
            session = { id, turn, messages };
          }
          session.turn++;
          session.messages.push({ role: 'user', content: turnText(session.id, session.turn) });
          return JSON.stringify({
            model,
            messages: session.messages,
            max_tokens: OUTPUT_TOKENS,
            stream: true,
            user: session.id,
          });
        },
        done() {
          session.messages.push({ role: 'assistant', content: answerText(session.id, session.turn) });
        },
      };
    };
  }
  if (kind === 'b') {
    return () => ({
      next() {
        const user = `run-${run}-user-${users++}`;
        const system = SYSTEMS_B[Math.floor(Math.random() * SYSTEMS_B.length)];
        return JSON.stringify({
          model,
          messages: [
            { role: 'system', content: system },
            { role: 'user', content: text(`question-${user}`, 50) },
          ],
          max_tokens: OUTPUT_TOKENS,
          stream: true,
          user,
        });
      },
      done() {},
    });
  }
  return () => ({
    next() {
      const user = `run-${run}-user-${users++}`;
      return JSON.stringify({
        model,
        messages: [{ role: 'user', content: `${user} ${text(`unique-${user}-${Math.random()}`, 2000)}` }],
        max_tokens: OUTPUT_TOKENS,
        stream: true,
        user,
      });
    },
    done() {},
  });
}

/** One streamed request; resolves `{ status, ttftMs }` (time to the first body bytes: the role chunk and first token come together). */
function streamed(url, body) {
  const started = performance.now();
  let ttftMs = -1;
  return postChat(url, body, KEY, agent, () => {
    if (ttftMs < 0) ttftMs = performance.now() - started;
  }).then(({ status }) => ({ status, ttftMs }));
}

/**
 * Runs `kind` against `model` on `sims` through `gateways` (requests alternate), after a warm-up
 * of `warmupS` not counted: closed loop at 1.5 × the running capacity (`rate` null: saturation),
 * or open loop at `rate` requests a second (new clients only when none is idle: a session in (a)
 * waits for its previous turn, as a user does). `clients`: the idle clients an earlier run left, to
 * go on with (their sessions are in the caches it left). Returns the row's figures and the clients.
 */
async function run(
  kind,
  model,
  sims,
  gateways,
  { rate = null, reset = true, clients = null, warmupS = WARMUP_S } = {},
) {
  if (reset) await Promise.all(sims.map(resetSim));
  const started = performance.now();
  const measuredFrom = started + warmupS * 1000;
  const deadline = measuredFrom + SECONDS * 1000;
  const source = workload(kind, model, () => performance.now() < measuredFrom);
  const urls = gateways.map((gateway) => `http://127.0.0.1:${gateway.port}/v1/chat/completions`);
  const ttfts = [];
  /** Answers that ended in the measured window. */
  let completed = 0;
  let failed = 0;
  let sent = 0;
  let before = null;
  const snapshot = async () => ({
    cpu: gateways.map((gateway) => cpuMsOf(gateway.child.pid)),
    counters: await Promise.all(sims.map(simCounters)),
    decisions: await decisionsOf(gateways, model),
    sent,
  });
  const warmUpEnds = new Promise((resolve) => setTimeout(resolve, warmupS * 1000)).then(async () => {
    before = await snapshot();
  });
  const one = async (client) => {
    const requestStart = performance.now();
    const { status, ttftMs } = await streamed(urls[sent++ % urls.length], client.next());
    if (status !== 200) {
      failed++;
      return;
    }
    client.done();
    // Throughput: answers that ended in the measured window; latency: requests sent in it.
    const end = performance.now();
    if (end >= measuredFrom && end <= deadline) completed++;
    if (requestStart >= measuredFrom && requestStart <= deadline) ttfts.push(ttftMs);
  };
  // The clients (sessions, in (a)) alive at once: twice the saturation run's workers, the same
  // number in the latency run. A session's next turn comes after the other idle ones' (its tool ran
  // meanwhile), not on the slot its last turn just freed: that accident would give
  // least_outstanding an affinity real traffic lacks, and a pool no larger than the requests in
  // flight (the open loop's own) would keep every session's history in every replica's cache.
  const workers = Math.round(SATURATION * SIM.maxRunning * sims.length);
  const idle = clients ?? Array.from({ length: 2 * workers }, () => source());
  if (rate === null) {
    await Promise.all(
      Array.from({ length: workers }, async () => {
        while (performance.now() < deadline) {
          const client = idle.shift();
          await one(client);
          idle.push(client);
        }
      }),
    );
  } else {
    const inFlight = new Set();
    for (let at = 0; started + at < deadline; at += 1000 / rate) {
      const wait = started + at - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      const client = idle.shift() ?? source();
      const request = one(client).then(() => {
        inFlight.delete(request);
        idle.push(client);
      });
      inFlight.add(request);
    }
    await Promise.all(inFlight);
  }
  await warmUpEnds;
  const after = await snapshot();
  const cpuMs = after.cpu.reduce((sum, ms, i) => sum + ms - before.cpu[i], 0);
  const delta = (i, field) => after.counters[i][field] - before.counters[i][field];
  const perReplica = sims.map((_, i) => delta(i, 'requests'));
  const mean = perReplica.reduce((sum, n) => sum + n, 0) / perReplica.length;
  const loads = sims.map((_, i) => delta(i, 'loadMs'));
  const meanLoad = loads.reduce((sum, n) => sum + n, 0) / loads.length;
  const queries = sims.reduce((sum, _, i) => sum + delta(i, 'queries'), 0);
  const hits = sims.reduce((sum, _, i) => sum + delta(i, 'hits'), 0);
  ttfts.sort((a, b) => a - b);
  const decided = (outcome) => (after.decisions[outcome] ?? 0) - (before.decisions[outcome] ?? 0);
  const decisions = Object.keys(after.decisions).reduce((sum, outcome) => sum + decided(outcome), 0);
  return {
    spillRate: decisions > 0 ? decided('load_spill') / decisions : 0,
    completed,
    failed,
    p50: quantile(ttfts, 0.5),
    p99: quantile(ttfts, 0.99),
    requestsPerS: completed / SECONDS,
    tokensPerS: (completed * OUTPUT_TOKENS) / SECONDS,
    hitRate: queries > 0 ? hits / queries : 0,
    busiest: meanLoad > 0 ? Math.max(...loads) / meanLoad : NaN,
    busiestRequests: mean > 0 ? Math.max(...perReplica) / mean : NaN,
    cpuUsPerRequest: (cpuMs * 1000) / Math.max(1, after.sent - before.sent),
    clients: idle,
  };
}

// A bench stopped early stops its engines and gateways too.
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    for (const child of children) child.child.kill('SIGTERM');
    process.exit(130);
  });
}

// ---- the run ----
const sims = [];
/** The gateway replicas, the first one alone for the one-gateway rows. */
const gatewayProcesses = [];
try {
  const maxReplicas = Math.max(...REPLICA_COUNTS);
  sims.push(...(await Promise.all(Array.from({ length: maxReplicas }, startSim))));
  const catalog = join(work, 'catalog.yaml');
  writeFileSync(catalog, catalogText(sims));
  gatewayProcesses.push(await startGateway(catalog));
  console.log(
    `simulated engine: ${SIM.kvCacheBlocks} KV blocks of 16 tokens, prefill ${SIM.prefillTokensPerS} tokens/s, ` +
      `decode step ${SIM.decodeStepMs} ms + ${SIM.decodeMsPerSequence} ms per running sequence, at most ${SIM.maxRunning} running ` +
      `(${SIM.maxBatchedTokens} tokens a step); ${OUTPUT_TOKENS} output tokens a request; ${SECONDS} s a run, ` +
      `after ${WARMUP_S} s of warm-up (${LATENCY_WARMUP_S} s in the latency runs, which go on with the saturation runs' sessions). out tok/s: closed loop at ${SATURATION} × the running capacity (saturation); TTFT: open loop ` +
      `at ${LATENCY_LOAD} × least_outstanding's saturated request rate (the same offered load for every policy)`,
  );
  const header = [
    'replicas',
    'workload',
    'policy',
    'gateways',
    'TTFT p50 ms',
    'TTFT p99 ms',
    'out tok/s (sat.)',
    'hit rate',
    'busiest load/mean',
    'busiest req/mean',
    'spilled',
    'gw CPU µs/req',
    'p50 vs LO',
    'tok/s vs LO',
  ];
  console.log(header.join(' | '));
  const results = new Map();
  /** Saturation run, then a latency run at the offered load of `rate` (requests/s). */
  const measure = async (count, kind, policy, gateways, rate) => {
    const model = `bench/${gateways.length > 1 ? `prefix_cache${gateways.length}` : policy}-${count}`;
    const sat = await run(kind, model, sims.slice(0, count), gateways);
    // On the caches the saturation run left (the same policy's), with its sessions going on: its
    // warm-up settles the load.
    const lat = await run(kind, model, sims.slice(0, count), gateways, {
      rate: rate ?? LATENCY_LOAD * sat.requestsPerS,
      reset: false,
      clients: sat.clients,
      warmupS: LATENCY_WARMUP_S,
    });
    // The latency run's own figures, to see what a row hides (the row shows the saturation run's).
    if (process.env.ROUTING_DEBUG)
      console.error(
        `latency run: ${lat.completed} done, hit ${(lat.hitRate * 100).toFixed(1)} %, spilled ${(lat.spillRate * 100).toFixed(1)} %, busiest ${lat.busiest.toFixed(2)}, rate ${(rate ?? LATENCY_LOAD * sat.requestsPerS).toFixed(1)}/s`,
      );
    const base = results.get(`${count}/${kind}/least_outstanding/1`);
    const result = {
      ...sat,
      p50: lat.p50,
      p99: lat.p99,
      p50Gain: base ? base.p50 / lat.p50 : 1,
      tputGain: base ? sat.tokensPerS / base.tokensPerS : 1,
      latencyRate: rate ?? LATENCY_LOAD * sat.requestsPerS,
    };
    results.set(`${count}/${kind}/${policy}/${gateways.length}`, result);
    console.log(
      [
        count,
        kind,
        policy,
        gateways.length,
        result.p50.toFixed(0),
        result.p99.toFixed(0),
        `${result.tokensPerS.toFixed(0)}${sat.failed ? ` (${sat.failed} failed)` : ''}`,
        `${(result.hitRate * 100).toFixed(1)} %`,
        result.busiest.toFixed(2),
        result.busiestRequests.toFixed(2),
        `${(result.spillRate * 100).toFixed(1)} %`,
        result.cpuUsPerRequest.toFixed(0),
        `${result.p50Gain.toFixed(2)} x`,
        `${result.tputGain.toFixed(2)} x`,
      ].join(' | '),
    );
    return result;
  };
  for (const count of REPLICA_COUNTS) {
    for (const kind of WORKLOADS) {
      let rate = null;
      for (const policy of POLICIES) {
        const result = await measure(count, kind, policy, gatewayProcesses.slice(0, 1), rate);
        rate ??= result.latencyRate;
      }
    }
  }
  const multiGatewayCount = Math.max(...REPLICA_COUNTS);
  for (const gatewayCount of GATEWAY_COUNTS) {
    while (gatewayProcesses.length < gatewayCount) gatewayProcesses.push(await startGateway(catalog));
    for (const kind of ['a', 'b'].filter((k) => WORKLOADS.includes(k))) {
      const rate = results.get(`${multiGatewayCount}/${kind}/least_outstanding/1`).latencyRate;
      await measure(multiGatewayCount, kind, 'prefix_cache', gatewayProcesses.slice(0, gatewayCount), rate);
    }
  }

  // ---- what one routing decision costs the gateway, in-process (the table's CPU column is noisier) ----
  const decision = {};
  {
    const { ReplicaRouter } = require(join(gatewayDir, 'dist/engines/openai-compatible/routing.js'));
    const { RoutingSpec } = require(join(gatewayDir, 'dist/catalog/catalog.schema.js'));
    const messages = [{ role: 'system', content: SYSTEM_A }];
    for (let turn = 0; turn < 5; turn++)
      messages.push({ role: 'user', content: text(`cost-${turn}`, TOOL_RESULT_TOKENS) });
    for (const policy of ['least_outstanding', 'prefix_cache', 'sticky']) {
      const router = new ReplicaRouter(RoutingSpec.parse({ policy }), { count: 8, load: (i) => i % 3 });
      const requests = Array.from({ length: 64 }, (_, i) => ({ model: 'm', messages, user: `session-${i}` }));
      for (let i = 0; i < 2000; i++) router.choose(requests[i % 64]);
      const n = 20_000;
      const t0 = performance.now();
      for (let i = 0; i < n; i++) router.choose(requests[i % 64]);
      decision[policy] = ((performance.now() - t0) * 1000) / n;
    }
    console.log(
      `routing decision, a 5-turn session of workload (a) (${messages.reduce((sum, m) => sum + m.content.length, 0)} characters), 8 replicas: ` +
        Object.entries(decision)
          .map(([policy, us]) => `${policy} ${us.toFixed(1)} µs`)
          .join(', '),
    );
  }

  // ---- the issue's goals, from ratios within this run ----
  const get = (count, kind, policy, gateways = 1) => results.get(`${count}/${kind}/${policy}/${gateways}`);
  const checks = [];
  for (const count of REPLICA_COUNTS) {
    for (const kind of ['a', 'b'].filter((k) => WORKLOADS.includes(k))) {
      const prefix = get(count, kind, 'prefix_cache');
      checks.push([`${count} replicas (${kind}): TTFT p50 ≥ 3 x lower`, prefix.p50Gain >= 3, prefix.p50Gain]);
      checks.push([`${count} replicas (${kind}): output tokens/s ≥ 1.5 x`, prefix.tputGain >= 1.5, prefix.tputGain]);
      checks.push([`${count} replicas (${kind}): busiest replica ≤ 1.3 x mean`, prefix.busiest <= 1.3, prefix.busiest]);
    }
    if (!WORKLOADS.includes('c')) continue;
    const control = get(count, 'c', 'prefix_cache');
    checks.push([
      `${count} replicas (c): output tokens/s within 5 % of least_outstanding`,
      Math.abs(control.tputGain - 1) <= 0.05,
      control.tputGain,
    ]);
    checks.push([
      `${count} replicas (c): TTFT p50 within 5 % of least_outstanding`,
      Math.abs(1 / control.p50Gain - 1) <= 0.05,
      1 / control.p50Gain,
    ]);
    const lo = get(count, 'c', 'least_outstanding');
    checks.push([
      `${count} replicas (c): gateway CPU per request, prefix_cache over least_outstanding`,
      control.cpuUsPerRequest <= lo.cpuUsPerRequest * 1.1,
      control.cpuUsPerRequest / lo.cpuUsPerRequest,
    ]);
  }
  for (const gatewayCount of GATEWAY_COUNTS) {
    for (const kind of ['a', 'b'].filter((k) => WORKLOADS.includes(k))) {
      const one = get(multiGatewayCount, kind, 'prefix_cache', 1);
      const several = get(multiGatewayCount, kind, 'prefix_cache', gatewayCount);
      const kept = Math.min(several.p50Gain / one.p50Gain, several.tputGain / one.tputGain);
      checks.push([`${gatewayCount} gateway replicas (${kind}): gain kept ≥ 80 % of one gateway's`, kept >= 0.8, kept]);
    }
  }
  console.log('');
  for (const [name, ok, value] of checks) console.log(`${ok ? 'met    ' : 'NOT MET'} ${name}: ${value.toFixed(2)}`);
  const last = Math.max(...REPLICA_COUNTS);
  const shared = ['a', 'b'].filter((k) => WORKLOADS.includes(k));
  if (shared.length > 0) {
    const p50 = Math.min(...shared.map((kind) => get(last, kind, 'prefix_cache').p50Gain));
    const tput = Math.min(...shared.map((kind) => get(last, kind, 'prefix_cache').tputGain));
    console.log(
      `prefix_cache vs least_outstanding: TTFT p50 ${p50.toFixed(2)} x lower, output tokens/s ${tput.toFixed(2)} x higher`,
    );
  }
} finally {
  agent.destroy();
  await Promise.all(children.map((child) => child.stop()));
  rmSync(work, { recursive: true, force: true });
}
