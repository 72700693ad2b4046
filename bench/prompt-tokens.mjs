#!/usr/bin/env node
// What the gateway's memory of prompt token counts saves (PROMPT_TOKEN_CACHE_ENTRIES) on the
// traffic it is for: a conversation sent whole with every turn. Each request carries a system
// prompt of about 4 KB, ten earlier messages and a last user message that differs from request to
// request (wrk numbers it), as a chat client or an agent sends its history with each turn. Two
// gateways, each with its own instant engine and an organization key (governed), one with the
// default cache and one with PROMPT_TOKEN_CACHE_ENTRIES=0 (the baseline: every text counted on
// every request), are loaded in alternating rounds with JSON requests at `--connections`. Printed:
// the gateway's CPU per request (from /proc: it barely depends on other load), the rate and wrk's
// p50/p99, medians of the rounds, and the ratios cached ÷ baseline. The rate and latencies include
// the simulated engine, which counts every prompt itself on the same two cores.
// Usage: pnpm build && node bench/prompt-tokens.mjs [--seconds 5] [--rounds 3] [--connections 8]
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { benchArgs } from './lib/args.mjs';
import { BENCH_MODEL, createBenchOrgKey, deleteByPrefix, startChatRig } from './lib/chat-rig.mjs';
import { cpuMsOf, median } from './lib/processes.mjs';
import { haveWrk, wrkPost } from './lib/wrk.mjs';

const { seconds, rounds, connections } = benchArgs(
  'node bench/prompt-tokens.mjs [--seconds 5] [--rounds 3] [--connections 8]',
  { numbers: { seconds: 5, rounds: 3, connections: 8 } },
);
if (!haveWrk()) throw new Error('prompt-tokens needs wrk (apt-get install wrk)');

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const RUN = `${process.env.BENCH_REDIS_PREFIX ?? 'bench-'}${randomUUID()}:`;
/** Replaced by wrk with 1, 2, 3…, so every request's last message is new. */
const NUMBER = '%N%';

/** A system prompt of about 4 KB: numbered rules of a support assistant, none repeated. */
function systemPrompt() {
  const topics = ['orders', 'returns', 'refunds', 'shipping', 'warranties', 'accounts', 'invoices', 'discounts'];
  let text = 'You are the support assistant of Acme Outdoor Supply. Follow these rules.\n';
  for (let i = 1; text.length < 4000; i++) {
    const topic = topics[i % topics.length];
    text += `${i}. When a customer asks about ${topic}, check the ${topic} policy version ${i} first, quote it briefly, and offer to open a ticket if the answer is not in it.\n`;
  }
  return text;
}

const history = [];
for (let i = 0; i < 10; i++) {
  history.push(
    i % 2 === 0
      ? {
          role: 'user',
          content: `Question ${i}: my order #${4100 + i} for a tent and two sleeping bags has not arrived after ${i + 3} days. What can I do about it, and can I still change the delivery address?`,
        }
      : {
          role: 'assistant',
          content: `I am sorry about the delay of order #${4100 + i - 1}. Orders usually arrive within five working days. I can change the delivery address until the parcel leaves the warehouse; shall I open a ticket for you?`,
        },
  );
}
const body = JSON.stringify({
  model: BENCH_MODEL,
  max_tokens: 16,
  messages: [
    { role: 'system', content: systemPrompt() },
    ...history,
    { role: 'user', content: `Thanks. One more question (${NUMBER}): do you ship to Norway?` },
  ],
});

const redis = new Redis(redisUrl);
const rigs = {};
try {
  for (const [name, entries] of [
    ['cached', undefined],
    ['baseline', '0'],
  ]) {
    const adminToken = `bench-admin-${randomUUID()}`;
    const rig = await startChatRig({
      useDist: true,
      simArgs: ['--ignore-eos'],
      modelLines: ['capacity: 100000', 'price_per_million: { input: 1, output: 2 }'],
      gatewayEnv: {
        REDIS_URL: redisUrl,
        REDIS_PREFIX: `${RUN}${name}:`,
        ADMIN_TOKEN: adminToken,
        ACCESS_LOG: 'false',
        ...(entries === undefined ? {} : { PROMPT_TOKEN_CACHE_ENTRIES: entries }),
      },
    });
    rigs[name] = { rig, key: await createBenchOrgKey(rig.gateway.port, adminToken), points: [] };
  }
  const load = async (name, secs) => {
    const { rig, key } = rigs[name];
    const before = cpuMsOf(rig.gateway.child.pid);
    const result = await wrkPost(rig.gatewayUrl, body, key, { connections, seconds: secs, numbered: NUMBER });
    const cpuMs = cpuMsOf(rig.gateway.child.pid) - before;
    if (result.non2xx > 0 || result.errors > 0 || result.total === 0)
      throw new Error(`${name}: ${result.non2xx} non-2xx answers and ${result.errors} socket errors`);
    return { ...result, cpuUs: (cpuMs * 1000) / result.total };
  };
  console.log(
    `prompt of ${body.length} bytes (12 messages, the last one new each request); JSON, ${connections} connections, ${seconds} s per point, ${rounds} rounds`,
  );
  for (const name of Object.keys(rigs)) await load(name, 2); // warm-up
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? ['cached', 'baseline'] : ['baseline', 'cached'];
    for (const name of order) rigs[name].points.push(await load(name, seconds));
  }
  const summary = {};
  for (const [name, { points }] of Object.entries(rigs)) {
    summary[name] = {
      cpuUs: median(points.map((p) => p.cpuUs)),
      rps: median(points.map((p) => p.rps)),
      p50: median(points.map((p) => p.p50)),
      p99: median(points.map((p) => p.p99)),
    };
    const s = summary[name];
    console.log(
      `${name.padEnd(9)} gateway CPU ${s.cpuUs.toFixed(0).padStart(5)} µs/request (rounds ${points.map((p) => p.cpuUs.toFixed(0)).join(', ')})   ${s.rps.toFixed(0).padStart(5)} req/s   p50 ${s.p50.toFixed(2)} ms   p99 ${s.p99.toFixed(2)} ms`,
    );
  }
  const ratio = (field) => (summary.cached[field] / summary.baseline[field]).toFixed(2);
  console.log(
    `cached ÷ baseline: gateway CPU per request ${ratio('cpuUs')}, req/s ${ratio('rps')}, p50 ${ratio('p50')}, p99 ${ratio('p99')}`,
  );
} finally {
  await Promise.all(Object.values(rigs).map(({ rig }) => rig.stop()));
  await deleteByPrefix(redis, RUN);
  redis.disconnect();
}
