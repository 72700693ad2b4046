#!/usr/bin/env node
// What a routing policy costs the gateway itself (issue 37: "the gateway's own CPU per request and
// its p50 stay within noise of today's"). One build (this checkout's dist), one gateway process per
// policy, each serving one model over the same `--replicas` instant engines (the simulated engine,
// each its own process, answering at once: the gateway is the bottleneck), the node flags of its
// start script, a static API key. A second least_outstanding gateway is the control: its ratio to
// the first is what noise alone gives on this machine. In each of `--rounds` rounds every gateway
// is measured in turn, the order rotated each round:
//   32 connections (wrk, `--seconds`): gateway CPU per request (from /proc), requests/s, p50, p99;
//   1 connection (lib/one-connection.mjs, `--seconds`): p50, p99.
// The request is an agent's turn: a 2,000-token system prompt, then `--turns` turns of history
// (a 500-token tool result and a 16-token answer each), streamed, 16 output tokens. At 32
// connections every request is a new conversation (its history and `user` numbered by wrk): the
// prefix index hashes the prompt, matches the system prompt and records every block past it, the
// sticky ring sees a new key. At 1 connection the body is always the same. Prints per round and
// gateway the figures, then per policy the median of the rounds' ratios to least_outstanding and
// their range, and how many entries prefix_cache's index holds at the end.
// Usage: pnpm build && node bench/routing-overhead.mjs [--seconds 3] [--rounds 8] [--warmup 8] [--replicas 4] [--turns 4] [--index-entries N]
//   --warmup: seconds of load on each gateway before the rounds (its CPU per request falls for a
//   while: heap sizing, inline caches, the prefix index filling to its bound);
//   --index-entries: prefix_cache's `index_entries` (0: the catalog default, 200,000).
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { benchArgs } from './lib/args.mjs';
import {
  deleteByPrefix,
  gatewayStartFlags,
  httpModelCatalogLines,
  latencyAtOneConnection,
  startBenchGateway,
  startInstantEngine,
} from './lib/chat-rig.mjs';
import { cpuMsOf, fmtRange, median } from './lib/processes.mjs';
import { promptText } from './lib/prompt-text.mjs';
import { haveWrk, wrkPost } from './lib/wrk.mjs';

const args = benchArgs(
  'node bench/routing-overhead.mjs [--seconds 3] [--rounds 8] [--warmup 8] [--replicas 4] [--turns 4] [--index-entries N]',
  {
    numbers: { seconds: 3, rounds: 8, warmup: 8, replicas: 4, turns: 4, 'index-entries': 0 },
  },
);
if (!haveWrk()) throw new Error('routing-overhead needs wrk (apt-get install wrk)');
const gatewayDir = new URL('../services/inference-gateway/', import.meta.url).pathname;
if (!existsSync(join(gatewayDir, 'dist/main.js'))) throw new Error('run `pnpm build` first');

/** The gateways: a name, its model's routing policy. The second least_outstanding one is the control. */
const TARGETS = [
  ['least_outstanding', 'least_outstanding'],
  ['least_outstanding again', 'least_outstanding'],
  ['prefix_cache', 'prefix_cache'],
  ['sticky', 'sticky'],
];
const BASE = 'least_outstanding';
const MODEL = 'bench/routed';
const KEY = 'bench-routing-overhead-key';
/** wrk replaces it with 1, 2, 3…: every request a new conversation and a new `user`. */
const NUMBER = '%N%';
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `bench-routing-overhead-${randomUUID()}:`;

const messages = [{ role: 'system', content: promptText('overhead-system', 2000) }];
for (let turn = 0; turn < args.turns; turn++) {
  const head = turn === 0 ? `conversation ${NUMBER}: ` : '';
  messages.push(
    { role: 'user', content: head + promptText(`overhead-tool-${turn}`, 500) },
    { role: 'assistant', content: promptText(`overhead-answer-${turn}`, 16) },
  );
}
messages.push({ role: 'user', content: 'Go on.' });
const body = JSON.stringify({ model: MODEL, messages, max_tokens: 16, stream: true, user: `session-${NUMBER}` });
const fixedBody = body.replaceAll(NUMBER, '0');

const work = mkdtempSync(join(tmpdir(), 'tollway-routing-overhead-'));
const started = [];
const redis = new Redis(redisUrl);
try {
  const engines = [];
  for (let i = 0; i < args.replicas; i++) engines.push(await startInstantEngine({ useDist: true }));
  started.push(...engines);
  const gateways = {};
  for (const [name, policy] of TARGETS) {
    const catalog = join(work, `${name.replace(/ /g, '-')}.yaml`);
    const lines = httpModelCatalogLines(
      MODEL,
      engines.map((engine) => engine.port),
      ['context_length: 65536', 'price_per_million: { input: 1, output: 2 }'],
      [
        args['index-entries'] > 0 && policy === 'prefix_cache'
          ? `routing: { policy: ${policy}, index_entries: ${args['index-entries']} }`
          : `routing: { policy: ${policy} }`,
      ],
    );
    writeFileSync(catalog, ['models:', ...lines, ''].join('\n'));
    const service = await startBenchGateway(join(gatewayDir, 'dist/main.js'), {
      cwd: gatewayDir,
      catalog,
      env: { API_KEYS: KEY, REDIS_URL: redisUrl, REDIS_PREFIX: PREFIX },
      flags: gatewayStartFlags().flags,
    });
    started.push(service);
    gateways[name] = { service, url: `http://127.0.0.1:${service.port}/v1/chat/completions` };
  }
  console.log(
    `${args.replicas} instant engine replicas; a gateway per policy (${gatewayStartFlags().flags.join(' ')}); ` +
      `a ${body.length}-character streamed request (2,000-token system prompt + ${args.turns} turns); ` +
      `${args.seconds} s a point; load average ${loadavg()
        .map((n) => n.toFixed(2))
        .join(' ')}`,
  );
  // Warm-up, not measured: connection pools, the heap's size, and the prefix index filled.
  for (const { url } of Object.values(gateways)) {
    await wrkPost(url, body, KEY, { connections: 32, seconds: args.warmup, numbered: NUMBER });
    await latencyAtOneConnection(url, fixedBody, KEY, 1);
  }
  const rounds = Object.fromEntries(TARGETS.map(([name]) => [name, []]));
  for (let round = 0; round < args.rounds; round++) {
    const order = TARGETS.map((_, i) => TARGETS[(i + round) % TARGETS.length][0]);
    for (const name of order) {
      const { service, url } = gateways[name];
      const cpuBefore = cpuMsOf(service.child.pid);
      const loaded = await wrkPost(url, body, KEY, { connections: 32, seconds: args.seconds, numbered: NUMBER });
      const cpuUs = ((cpuMsOf(service.child.pid) - cpuBefore) * 1000) / loaded.total;
      if (loaded.non2xx > 0 || loaded.errors > 0)
        throw new Error(`${name}: ${loaded.non2xx} non-2xx, ${loaded.errors} socket errors`);
      const one = await latencyAtOneConnection(url, fixedBody, KEY, args.seconds);
      rounds[name].push({ cpuUs, rps: loaded.rps, p50: loaded.p50, p99: loaded.p99, p50one: one.p50, p99one: one.p99 });
      console.log(
        `round ${round + 1} ${name.padEnd(23)} ${cpuUs.toFixed(0).padStart(4)} µs/req  ${Math.round(loaded.rps)}/s  ` +
          `32 conn p50 ${loaded.p50.toFixed(2)} p99 ${loaded.p99.toFixed(2)} ms  1 conn p50 ${one.p50.toFixed(3)} p99 ${one.p99.toFixed(3)} ms`,
      );
    }
  }
  const fields = [
    ['cpuUs', 'CPU/req'],
    ['rps', 'req/s'],
    ['p50', 'p50 32c'],
    ['p99', 'p99 32c'],
    ['p50one', 'p50 1c'],
    ['p99one', 'p99 1c'],
  ];
  console.log(
    `\nper policy over ${BASE}: median of ${args.rounds} rounds' ratios (range); ${BASE}'s own medians first; ` +
      `load average ${loadavg()
        .map((n) => n.toFixed(2))
        .join(' ')}`,
  );
  console.log(['gateway', ...fields.map(([, label]) => label)].join(' | '));
  const base = rounds[BASE];
  console.log(
    [
      `${BASE} (absolute)`,
      `${median(base.map((r) => r.cpuUs)).toFixed(0)} µs`,
      `${median(base.map((r) => r.rps)).toFixed(0)}/s`,
      ...fields.slice(2).map(([key]) => `${median(base.map((r) => r[key])).toFixed(3)} ms`),
    ].join(' | '),
  );
  for (const [name] of TARGETS.slice(1)) {
    const cells = fields.map(([key]) => {
      const ratios = rounds[name].map((r, i) => r[key] / base[i][key]);
      return `×${median(ratios).toFixed(2)} (${fmtRange(ratios)})`;
    });
    console.log([name, ...cells].join(' | '));
  }
  const metrics = await fetch(`http://127.0.0.1:${gateways.prefix_cache.service.port}/metrics`).then((res) =>
    res.text(),
  );
  const entries = /^tollway_routing_prefix_index_entries(?:\{[^}]*\})? (\S+)$/m.exec(metrics)?.[1] ?? 'unknown';
  console.log(`prefix_cache's index at the end: ${entries} entries`);
} finally {
  await Promise.all(started.map((service) => service.stop()));
  await deleteByPrefix(redis, PREFIX);
  redis.disconnect();
  rmSync(work, { recursive: true, force: true });
}
