#!/usr/bin/env node
// This build's gateway against another build's, side by side in one run: did a change make the
// request path slower? One instant engine (the simulated one, in its own process), two gateways in
// front of it (this checkout's dist and `--base`'s, each with the node flags of its start script,
// its own Redis prefix and an organization key: governed), and wrk at 32 connections against each
// in turn, in alternating rounds whose order flips every round (the first process started is not
// always the first measured). Prints per round and load the rates and each gateway's CPU per
// request (from /proc), then, per load, new ÷ base as the median of the rounds' ratios.
// Build both first: `pnpm build` here, and in the base checkout, e.g.
//   git worktree add /tmp/base <rev> && (cd /tmp/base && pnpm install --frozen-lockfile && pnpm build)
// Usage: node bench/ab-builds.mjs --base /tmp/base [--seconds 3] [--rounds 6] [--per-event]
//   --per-event  adds a load against a second engine that writes every event on its own.
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { benchArgs } from './lib/args.mjs';
import {
  BENCH_MODEL,
  createBenchOrgKey,
  deleteByPrefix,
  gatewayStartFlags,
  httpModelCatalogLines,
  startBenchGateway,
  startInstantEngine,
} from './lib/chat-rig.mjs';
import { cpuMsOf, fmtRange, median } from './lib/processes.mjs';
import { haveWrk, wrkPost } from './lib/wrk.mjs';

const args = benchArgs('node bench/ab-builds.mjs --base DIR [--seconds 3] [--rounds 6] [--per-event]', {
  numbers: { seconds: 3, rounds: 6 },
  strings: { base: null },
  flags: ['per-event'],
});
if (!args.base) throw new Error('--base DIR: a checkout of the build to compare with, built (pnpm build)');
if (!haveWrk()) throw new Error('ab-builds needs wrk (apt-get install wrk)');
const ROOT = resolve(new URL('..', import.meta.url).pathname);
const builds = { new: ROOT, base: resolve(args.base) };
for (const dir of Object.values(builds))
  if (!existsSync(join(dir, 'services/inference-gateway/dist/main.js'))) throw new Error(`${dir}: not built`);

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const redis = new Redis(redisUrl);
const run = randomUUID();
const work = mkdtempSync(join(tmpdir(), 'tollway-ab-'));
const started = [];
const PER_EVENT_MODEL = 'bench/per-event';
// As the table's: priced (credit is charged), a capacity no load reaches (leases are still taken).
const MODEL_LINES = ['capacity: 100000', 'price_per_million: { input: 1, output: 2 }'];
const request = (stream, model = BENCH_MODEL) =>
  JSON.stringify({
    model,
    messages: [{ role: 'user', content: 'Say hello to the benchmark.' }],
    max_tokens: 16,
    stream,
  });
const loads = {
  json: request(false),
  sse: request(true),
  ...(args['per-event'] ? { 'per-event sse': request(true, PER_EVENT_MODEL) } : {}),
};

try {
  const engine = await startInstantEngine({ useDist: true });
  started.push(engine);
  const catalogLines = ['models:', ...httpModelCatalogLines(BENCH_MODEL, engine.port, MODEL_LINES)];
  if (args['per-event']) {
    const perEvent = await startInstantEngine({ useDist: true, simArgs: ['--flush-each-event'] });
    started.push(perEvent);
    catalogLines.push(...httpModelCatalogLines(PER_EVENT_MODEL, perEvent.port, MODEL_LINES));
  }
  const catalog = join(work, 'catalog.yaml');
  writeFileSync(catalog, `${catalogLines.join('\n')}\n`);
  const gateways = {};
  for (const [name, dir] of Object.entries(builds)) {
    const adminToken = `ab-admin-${randomUUID()}`;
    const gatewayDir = join(dir, 'services/inference-gateway');
    const service = await startBenchGateway(join(gatewayDir, 'dist/main.js'), {
      cwd: gatewayDir,
      catalog,
      env: { REDIS_URL: redisUrl, REDIS_PREFIX: `bench-ab-${name}-${run}:`, ADMIN_TOKEN: adminToken },
      flags: gatewayStartFlags(join(gatewayDir, 'package.json')).flags,
    });
    started.push(service);
    gateways[name] = {
      service,
      url: `http://127.0.0.1:${service.port}/v1/chat/completions`,
      key: await createBenchOrgKey(service.port, adminToken),
    };
  }
  // Warm-up: each load once against each gateway.
  for (const body of Object.values(loads))
    for (const gateway of Object.values(gateways))
      await wrkPost(gateway.url, body, gateway.key, { connections: 32, seconds: 1 });
  const ratios = Object.fromEntries(Object.keys(loads).map((load) => [load, { rate: [], cpu: [] }]));
  for (let round = 0; round < args.rounds; round++) {
    const order = round % 2 ? ['base', 'new'] : ['new', 'base'];
    for (const [load, body] of Object.entries(loads)) {
      const measured = {};
      for (const name of order) {
        const { service, url, key } = gateways[name];
        const cpuBefore = cpuMsOf(service.child.pid);
        const result = await wrkPost(url, body, key, { connections: 32, seconds: args.seconds });
        if (result.non2xx > 0 || result.errors > 0)
          throw new Error(`${name} ${load}: ${result.non2xx} non-2xx, ${result.errors} errors`);
        const cpuUs = ((cpuMsOf(service.child.pid) - cpuBefore) * 1000) / result.total;
        measured[name] = { rps: result.rps, cpuUs };
      }
      ratios[load].rate.push(measured.new.rps / measured.base.rps);
      ratios[load].cpu.push(measured.new.cpuUs / measured.base.cpuUs);
      console.log(
        `round ${round + 1} ${load.padEnd(13)} new ${Math.round(measured.new.rps)}/s ${measured.new.cpuUs.toFixed(0)} µs` +
          `  base ${Math.round(measured.base.rps)}/s ${measured.base.cpuUs.toFixed(0)} µs  (${order.join(' then ')})`,
      );
    }
  }
  console.log(`\nnew ÷ base, median of ${args.rounds} rounds (32 connections, ${args.seconds} s a point)`);
  for (const [load, { rate, cpu }] of Object.entries(ratios))
    console.log(
      `  ${load.padEnd(13)} rate ×${median(rate).toFixed(2)} (rounds ${fmtRange(rate)})  CPU a request ×${median(cpu).toFixed(2)} (${fmtRange(cpu)})`,
    );
} finally {
  await Promise.all(started.map((service) => service.stop()));
  for (const name of Object.keys(builds)) await deleteByPrefix(redis, `bench-ab-${name}-${run}:`);
  redis.disconnect();
  rmSync(work, { recursive: true, force: true });
}
