#!/usr/bin/env node
// CPU work per request counted in instructions, not seconds: the gateway and the simulated engine
// each run under valgrind's callgrind, which counts the instructions a process executes whatever
// else the machine is doing (a shared 2-core VM swings wall-clock CPU figures by ±30 % between
// runs, more than most changes are worth). After a warm-up (JIT, pools, quota slices) both
// counters are zeroed, `--requests` chat completions go through the gateway at `--connections`, and
// both are dumped: the engine served exactly those requests, so its count per request is the
// engine-alone baseline of the same run, and the ratio of the two says how much more work a
// request costs the gateway than the engine that answers it.
// Usage: pnpm build && node bench/instructions.mjs [--requests 1000] [--warmup 1500] [--connections 4] [--tpot-ms 0] [--json] [--static] [--per-event]
//   --json: non-streamed completions (default: 16-chunk streams); --static: an unmetered API_KEYS
//   key instead of an organization key (authentication, budgets, credit, capacity); --per-event:
//   the engine writes every event on its own (`--flush-each-event`), as per-token engines do;
//   --connections: concurrent requests (default 4); --tpot-ms: the engine's time per output token
//   (default 0). How many socket reads a per-event stream reaches the gateway in depends on timing,
//   and the count with it: at 4 connections and no wait, runs of one build gave 1,718k-2,059k a
//   stream. `--per-event --connections 1 --tpot-ms 5` spaces the events so each comes on its own:
//   runs of one build then stayed within ±3 % (3,128k-3,331k), which is what an A/B of the per-event
//   path needs.
// Needs valgrind (apt-get install valgrind) and Redis; takes a few minutes (callgrind runs code
// about 50 times slower).
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import {
  BENCH_MODEL,
  createBenchOrgKey,
  deleteByPrefix,
  gatewayStartFlags,
  postChat,
  writeBenchCatalog,
} from './lib/chat-rig.mjs';
import { benchArgs } from './lib/args.mjs';
import { freePort } from '../packages/service-kit/dist/testing/free-port.js';

const args = benchArgs(
  'node bench/instructions.mjs [--requests 1000] [--warmup 1500] [--connections 4] [--tpot-ms 0] [--json] [--static] [--per-event]',
  { numbers: { requests: 1000, warmup: 1500, connections: 4, 'tpot-ms': 0 }, flags: ['json', 'static', 'per-event'] },
);
const { requests, warmup, connections } = args;
const tpotMs = args['tpot-ms'];
const stream = !args.json;
const unmetered = args.static;
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `bench-instr-${randomUUID()}:`;
const STATIC_KEY = 'bench-static-key';
const ADMIN_TOKEN = `bench-admin-${randomUUID()}`;

if (spawnSync('valgrind', ['--version']).error)
  throw new Error('instructions.mjs needs valgrind (apt-get install valgrind)');
const gatewayDir = new URL('../services/inference-gateway/', import.meta.url).pathname;
const work = mkdtempSync(join(tmpdir(), 'tollway-instr-'));
const redis = new Redis(redisUrl);
const children = [];

/** Starts `node args` under callgrind; resolves once `ready(port)` answers. */
async function underCallgrind(name, args, env, port, ready) {
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--smc-check=all-non-file',
      `--callgrind-out-file=${join(work, `${name}.out`)}`,
      'node',
      ...args,
    ],
    { cwd: gatewayDir, env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  children.push(child);
  let stderr = '';
  child.stderr.on('data', (data) => (stderr = (stderr + data).slice(-4000)));
  const deadline = Date.now() + 300_000;
  while (!(await ready(port).catch(() => false))) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`${name} did not start:\n${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  return { name, pid: child.pid };
}

/** The instruction total of `name`'s newest dump: the one taken after zeroing, which holds the load. */
function instructionsOf(name) {
  const dumps = readdirSync(work)
    .filter((file) => file.startsWith(`${name}.out`))
    .map((file) => ({ file, at: statSync(join(work, file)).mtimeMs }))
    .sort((a, b) => b.at - a.at);
  if (dumps.length === 0) throw new Error(`callgrind wrote no dump for ${name}`);
  const match = /^(?:summary|totals): (\d+)/m.exec(readFileSync(join(work, dumps[0].file), 'utf8'));
  if (!match) throw new Error(`no instruction total in ${dumps[0].file}`);
  return Number(match[1]);
}

try {
  const enginePort = await freePort();
  const gatewayPort = await freePort();
  const answers = (path) => async (port) => (await fetch(`http://127.0.0.1:${port}${path}`)).ok;
  const engine = await underCallgrind(
    'engine',
    [
      'dist/engines/simulated/main-sim.js',
      ...['--port', String(enginePort), '--ttft-ms', '0', '--tpot-ms', String(tpotMs)],
      ...['--max-concurrency', '100000', '--ignore-eos'],
      ...(args['per-event'] ? ['--flush-each-event'] : []),
    ],
    {},
    enginePort,
    answers('/v1/models'),
  );
  const catalog = join(work, 'catalog.yaml');
  writeBenchCatalog(catalog, enginePort, {
    modelLines: ['capacity: 100000', 'price_per_million: { input: 1, output: 2 }'],
  });
  const startFlags = gatewayStartFlags().flags;
  const gateway = await underCallgrind(
    'gateway',
    [...startFlags, 'dist/main.js'],
    {
      GATEWAY_PORT: String(gatewayPort),
      GATEWAY_HOST: '127.0.0.1',
      CATALOG_PATH: catalog,
      CATALOG_WATCH: 'false',
      REDIS_URL: redisUrl,
      REDIS_PREFIX: PREFIX,
      API_KEYS: STATIC_KEY,
      ADMIN_TOKEN,
    },
    gatewayPort,
    answers('/healthz'),
  );
  const key = unmetered ? STATIC_KEY : await createBenchOrgKey(gatewayPort, ADMIN_TOKEN);
  const url = `http://127.0.0.1:${gatewayPort}/v1/chat/completions`;
  const body = JSON.stringify({
    model: BENCH_MODEL,
    messages: [{ role: 'user', content: 'Say hello to the benchmark.' }],
    max_tokens: 16,
    ...(stream ? { stream: true } : {}),
  });
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  // During the warm-up the gateway runs 50 times slower than usual, with no JIT code yet: a Redis
  // reply can then miss the fail-fast command timeout (REDIS_COMMAND_TIMEOUT_MS in service-kit)
  // and the request answers 503. The warm-up tolerates that; the measured requests must all be 200.
  const run = async (count, { tolerant }) => {
    let next = 0;
    let refused = 0;
    await Promise.all(
      Array.from({ length: connections }, async () => {
        while (next++ < count) {
          const { status } = await postChat(url, body, key, agent, () => undefined);
          if (status === 200) continue;
          if (!tolerant) throw new Error(`the gateway answered ${status}`);
          refused++;
        }
      }),
    );
    return refused;
  };
  console.log(`warm-up: ${warmup} ${stream ? '16-chunk streams' : 'JSON completions'} under callgrind…`);
  const refused = await run(warmup, { tolerant: true });
  if (refused > 0) console.log(`  (${refused} warm-up requests answered other than 200)`);
  for (const { pid } of [engine, gateway]) execFileSync('callgrind_control', ['-z', String(pid)], { stdio: 'ignore' });
  await run(requests, { tolerant: false });
  for (const { pid } of [engine, gateway]) execFileSync('callgrind_control', ['-d', String(pid)], { stdio: 'ignore' });
  const perRequest = (name) => instructionsOf(name) / requests;
  const g = perRequest('gateway');
  const e = perRequest('engine');
  const k = (n) => `${Math.round(n / 1000).toLocaleString('en-US')}k`;
  console.log(
    `${requests} ${stream ? '16-chunk streams' : 'JSON completions'}, ${unmetered ? 'unmetered key' : 'organization key (governed)'}`,
  );
  console.log(`  gateway: ${k(g)} instructions per request`);
  console.log(`  engine:  ${k(e)} instructions per request (the engine alone's work, same run)`);
  console.log(`  gateway ÷ engine: ${(g / e).toFixed(2)}`);
} finally {
  for (const child of children) child.kill('SIGKILL');
  await deleteByPrefix(redis, PREFIX);
  redis.disconnect();
  rmSync(work, { recursive: true, force: true });
}
