#!/usr/bin/env node
// Session event streams (issue 36), on the built services against a Redis of their own:
//   1. time from sending a message to its first message.delta at a reader, against the gateway's
//      own time to first token (its gen_ai_server_time_to_first_token_seconds) in the same turns;
//   2. a turn's Redis commands (INFO before and after, less the idle rate) without a reader (send
//      + long-poll) and with one (the stream opened before the send, read to turn.completed);
//   3. memory and CPU per reader of one API process with --readers readers of one session: RSS
//      with the readers connected and idle, and API CPU over the same turns without and with them.
// With --base DIR (a checkout of another build, built), 2. also counts a turn without a reader on
// that build's API and worker, in the same run: what streaming adds to a turn no one reads.
// Usage: pnpm build && node bench/session-events.mjs [--turns 30] [--readers 1000] [--tokens 200] [--base DIR]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchArgs } from './lib/args.mjs';
import { cpuMsOf, quantile, rssOf, startService, stopProcess } from './lib/processes.mjs';
import { sessionClient, startBenchRedis } from './lib/session-rig.mjs';

const { turns, readers, tokens, base } = benchArgs(
  'node bench/session-events.mjs [--turns 30] [--readers 1000] [--tokens 200] [--base DIR]',
  { numbers: { turns: 30, readers: 1000, tokens: 200 }, strings: { base: null } },
);
const root = new URL('..', import.meta.url).pathname;
// Ports of this bench's services; its Redis is one of its own (INFO counts only this run's commands).
const PORTS = { gateway: 24080, api: 24081, baseApi: 24082 };
const MODEL = 'bench/sim';
const KEY = `tw-bench-${'k'.repeat(40)}`;
const prefix = 'bench-events:';
const dir = mkdtempSync(join(tmpdir(), 'tollway-bench-events-'));
const children = [];

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function startServices(redisUrl) {
  const catalog = join(dir, 'catalog.json');
  // A model that takes 60 ms to its first token, then 4 ms a token: a hosted model's shape.
  writeFileSync(
    catalog,
    JSON.stringify({
      models: [
        {
          id: MODEL,
          owned_by: 'bench',
          created: 1,
          capacity: 512,
          price_per_million: { input: 0.1, output: 0.1 },
          engine: { kind: 'simulated', time_to_first_token_ms: 60, time_per_output_token_ms: 4 },
        },
      ],
    }),
  );
  const common = { REDIS_URL: redisUrl, REDIS_PREFIX: prefix, LOG_LEVEL: 'warn', ACCESS_LOG: 'false' };
  const gateway = await startService(join(root, 'services/inference-gateway/dist/main.js'), {
    env: {
      ...common,
      LOG_LEVEL: 'info',
      GATEWAY_PORT: String(PORTS.gateway),
      GATEWAY_HOST: '127.0.0.1',
      DEV_API_KEY: KEY,
      CATALOG_PATH: catalog,
      CATALOG_WATCH: 'false',
    },
  });
  children.push(gateway.child);
  return { gateway, ...(await startSessionServices(root, redisUrl, PORTS.api, prefix)) };
}

/** The session API (no auth) and one worker (concurrency 4, the default chat agent) of the build in `dir`. */
async function startSessionServices(dir, redisUrl, port, keyPrefix) {
  const common = { REDIS_URL: redisUrl, REDIS_PREFIX: keyPrefix, ACCESS_LOG: 'false' };
  const api = await startService(join(dir, 'services/agent-session/dist/main-api.js'), {
    args: ['--no-auth', '--max-sessions', '1000000'],
    env: {
      ...common,
      LOG_LEVEL: 'info',
      SESSIONS_PORT: String(port),
      SESSIONS_HOST: '127.0.0.1',
      HTTP_MAX_CONNECTIONS: '20000',
    },
  });
  const worker = spawn(process.execPath, [join(dir, 'services/agent-session/dist/main-worker.js')], {
    env: {
      ...process.env,
      ...common,
      LOG_LEVEL: 'warn',
      WORKER_CONCURRENCY: '4',
      GATEWAY_BASE_URL: `http://127.0.0.1:${PORTS.gateway}/v1`,
      GATEWAY_API_KEY: KEY,
      AGENT_DEFAULT_MODEL: MODEL,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(api.child, worker);
  await sleep(1500);
  return { api, worker };
}

// The API runs without auth: the clients' key is ignored.
const clients = {
  [PORTS.api]: sessionClient([`http://127.0.0.1:${PORTS.api}`], ''),
  [PORTS.baseApi]: sessionClient([`http://127.0.0.1:${PORTS.baseApi}`], ''),
};

function call(method, path, body, port = PORTS.api) {
  return clients[port].call(method, path, body);
}

/**
 * One event stream on a connection of its own: `opened` once its first frame has come,
 * `firstDelta` the time (performance.now) its first message.delta came, `ended` at its end.
 */
function openStream(path, { method = 'GET', body, onFrame } = {}) {
  const state = { frames: 0, firstDeltaAt: null, events: [] };
  let resolveOpened;
  const opened = new Promise((resolve) => (resolveOpened = resolve));
  const ended = new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: PORTS.api,
        method,
        path,
        agent: false,
        headers: { accept: 'text/event-stream', ...(body ? { 'content-type': 'application/json' } : {}) },
      },
      (res) => {
        let buffered = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          buffered += chunk;
          for (let end = buffered.indexOf('\n\n'); end !== -1; end = buffered.indexOf('\n\n')) {
            const frame = buffered.slice(0, end);
            buffered = buffered.slice(end + 2);
            state.frames++;
            if (state.frames === 1) resolveOpened();
            const type = /^event: (.*)$/m.exec(frame)?.[1];
            if (type === 'message.delta' && state.firstDeltaAt === null) state.firstDeltaAt = performance.now();
            if (type) state.events.push(type);
            onFrame?.(frame);
          }
        });
        res.on('end', () => resolve(state));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    state.close = () => {
      state.closed = true;
      req.destroy();
    };
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
  // A stream the bench closes itself ends in an error nobody waits for.
  ended.catch((err) => {
    if (!state.closed) throw err;
  });
  return { state, opened, ended };
}

async function newSession(port = PORTS.api) {
  return (await call('POST', '/sessions', undefined, port)).body.session_id;
}

const message = () => ({ content: 'Tell me a story.', user_params: { max_tokens: tokens } });

/** The gateway's own TTFT histogram for the bench model: { sum, count }. */
async function gatewayTtft() {
  const text = await new Promise((resolve, reject) =>
    http
      .get(`http://127.0.0.1:${PORTS.gateway}/metrics`, (res) => {
        let body = '';
        res.on('data', (chunk) => (body += chunk));
        res.on('end', () => resolve(body));
      })
      .on('error', reject),
  );
  const read = (name) =>
    text
      .split('\n')
      .filter((line) => line.startsWith(name) && line.includes(`gen_ai_request_model="${MODEL}"`))
      .reduce((total, line) => total + Number(line.split(' ').at(-1)), 0);
  return {
    sum: read('gen_ai_server_time_to_first_token_seconds_sum'),
    count: read('gen_ai_server_time_to_first_token_seconds_count'),
  };
}

async function firstDeltaPhase() {
  // A warm-up turn of each kind (the first call of a fresh worker, agent process and gateway).
  const warm = await newSession();
  await openStream(`/sessions/${warm}/messages`, { method: 'POST', body: message() }).ended;
  const before = await gatewayTtft();
  const watched = [];
  const sentAndStreamed = [];
  for (let i = 0; i < turns; i++) {
    const sessionId = await newSession();
    // The stream opened first, then the send (202): send → first delta.
    const stream = openStream(`/sessions/${sessionId}/events`);
    await stream.opened;
    const sentAt = performance.now();
    const sent = await call('POST', `/sessions/${sessionId}/messages`, message());
    if (sent.status !== 202) throw new Error(`send answered ${sent.status}`);
    const state = await stream.ended;
    watched.push(state.firstDeltaAt - sentAt);
    // Send and stream in one call (Accept: text/event-stream).
    const startedAt = performance.now();
    const one = openStream(`/sessions/${sessionId}/messages`, { method: 'POST', body: message() });
    const oneState = await one.ended;
    sentAndStreamed.push(oneState.firstDeltaAt - startedAt);
  }
  const after = await gatewayTtft();
  const gatewayMs = ((after.sum - before.sum) / (after.count - before.count)) * 1000;
  return { watched, sentAndStreamed, gatewayMs, gatewayCalls: after.count - before.count };
}

/** The rig's counters as { stats: calls by command, total }. */
async function commandStats(redis) {
  const { commands, byCommand } = await redis.counters();
  return {
    total: commands,
    stats: Object.fromEntries(Object.entries(byCommand).map(([name, { calls }]) => [name, calls])),
  };
}

function diff(after, before) {
  const out = {};
  for (const [name, calls] of Object.entries(after.stats)) {
    const delta = calls - (before.stats[name] ?? 0);
    if (delta > 0 && name !== 'info') out[name] = delta;
  }
  return { stats: out, total: after.total - before.total };
}

/** Commands per turn of `run` (K turns), less what the processes do idle over the same time. */
async function commandsPerTurn(redis, run) {
  const idleBefore = await commandStats(redis);
  await sleep(3000);
  const idle = diff(await commandStats(redis), idleBefore);
  const idleRate = idle.total / 3000;
  const before = await commandStats(redis);
  const startedAt = performance.now();
  await run();
  const elapsed = performance.now() - startedAt;
  const used = diff(await commandStats(redis), before);
  const perTurn = (used.total - idleRate * elapsed) / turns;
  const byCommand = Object.fromEntries(
    Object.entries(used.stats)
      .map(([name, calls]) => [
        name,
        Math.round(((calls - (idle.stats[name] ?? 0) * (elapsed / 3000)) / turns) * 10) / 10,
      ])
      .filter(([, calls]) => calls >= 0.05)
      .sort((a, b) => b[1] - a[1]),
  );
  return { perTurn, byCommand, idleRate };
}

/** `turns` turns on one session of the API at `port`, each sent and then long-polled to its end. */
async function unreadTurns(port) {
  const sessionId = await newSession(port);
  for (let i = 0; i < turns; i++) {
    await call('POST', `/sessions/${sessionId}/messages`, message(), port);
    const done = await call('GET', `/sessions/${sessionId}?wait=true&timeout=30`, undefined, port);
    if (done.body.status !== 'idle') throw new Error(`turn ended ${done.body.status}`);
  }
}

async function redisPhase(redis) {
  let baseline = null;
  if (base) {
    const started = await startSessionServices(base, redis.url, PORTS.baseApi, 'bench-events-base:');
    await unreadTurns(PORTS.baseApi);
    baseline = await commandsPerTurn(redis, () => unreadTurns(PORTS.baseApi));
    await Promise.all([stopProcess(started.api.child), stopProcess(started.worker)]);
  }
  const without = await commandsPerTurn(redis, () => unreadTurns(PORTS.api));
  const watched = await newSession();
  const withReader = await commandsPerTurn(redis, async () => {
    for (let i = 0; i < turns; i++) {
      const stream = openStream(`/sessions/${watched}/events`);
      await stream.opened;
      await call('POST', `/sessions/${watched}/messages`, message());
      const state = await stream.ended;
      if (state.events.at(-1) !== 'turn.completed') throw new Error(`stream ended with ${state.events.at(-1)}`);
    }
  });
  return { baseline, without, withReader };
}

async function readersPhase(api) {
  const pid = api.child.pid;
  const run = async (sessionId) => {
    const cpuBefore = cpuMsOf(pid);
    for (let i = 0; i < turns; i++) {
      await call('POST', `/sessions/${sessionId}/messages`, message());
      await call('GET', `/sessions/${sessionId}?wait=true&timeout=60`);
    }
    return cpuMsOf(pid) - cpuBefore;
  };
  // The same turns, read by no one, then by `readers` readers of their session.
  const unread = await newSession();
  const cpuWithout = await run(unread);
  const sessionId = await newSession();
  await sleep(1000);
  const rssBefore = rssOf(pid);
  let delivered = 0;
  const streams = [];
  for (let i = 0; i < readers; i += 50) {
    const batch = Array.from({ length: Math.min(50, readers - i) }, () =>
      openStream(`/sessions/${sessionId}/events?follow=true`, { onFrame: () => delivered++ }),
    );
    await Promise.all(batch.map((stream) => stream.opened));
    streams.push(...batch);
  }
  await sleep(2000);
  const rssConnected = rssOf(pid);
  delivered = 0;
  const cpuWith = await run(sessionId);
  await sleep(500);
  const rssAfter = rssOf(pid);
  for (const stream of streams) stream.state.close();
  return {
    memoryPerReader: (rssConnected - rssBefore) / readers,
    rssGrowthDuringTurns: rssAfter - rssConnected,
    cpuWithout,
    cpuWith,
    cpuPerReaderPerTurnUs: ((cpuWith - cpuWithout) / readers / turns) * 1000,
    eventsPerReaderPerTurn: delivered / readers / turns,
  };
}

const ms = (value) => `${value.toFixed(1)} ms`;

async function main() {
  const redis = await startBenchRedis();
  const { api } = await startServices(redis.url);
  try {
    const first = await firstDeltaPhase();
    const p50 = quantile(
      [...first.watched].sort((a, b) => a - b),
      0.5,
    );
    const p90 = quantile(
      [...first.watched].sort((a, b) => a - b),
      0.9,
    );
    const oneP50 = quantile(
      [...first.sentAndStreamed].sort((a, b) => a - b),
      0.5,
    );
    console.log(
      `\n1. Send → first message.delta (${turns} turns each; model: 60 ms to first token, 4 ms a token; ${tokens} tokens asked)`,
    );
    console.log(`   gateway's own time to first token (mean of ${first.gatewayCalls} calls): ${ms(first.gatewayMs)}`);
    console.log(
      `   stream opened, then POST (202):  p50 ${ms(p50)}, p90 ${ms(p90)}  → p50 / gateway TTFT = ${(p50 / first.gatewayMs).toFixed(2)}`,
    );
    console.log(
      `   POST with Accept: text/event-stream: p50 ${ms(oneP50)}  → ${(oneP50 / first.gatewayMs).toFixed(2)} × gateway TTFT`,
    );

    const commands = await redisPhase(redis);
    console.log(
      `\n2. Redis commands per turn (INFO, ${turns} turns each, less the idle rate of ${(commands.without.idleRate * 1000).toFixed(1)}/s)`,
    );
    console.log(
      `   without a reader (send + long-poll):     ${commands.without.perTurn.toFixed(1)}  ${JSON.stringify(commands.without.byCommand)}`,
    );
    console.log(
      `   with one reader (stream, then send):     ${commands.withReader.perTurn.toFixed(1)}  ${JSON.stringify(commands.withReader.byCommand)}`,
    );
    console.log(`   ratio with / without: ${(commands.withReader.perTurn / commands.without.perTurn).toFixed(2)}`);
    if (commands.baseline) {
      console.log(
        `   base build (${base}), without a reader: ${commands.baseline.perTurn.toFixed(1)}  ${JSON.stringify(commands.baseline.byCommand)}`,
      );
      console.log(
        `   this build / base build, without a reader: ${(commands.without.perTurn / commands.baseline.perTurn).toFixed(2)}`,
      );
    }

    const load = await readersPhase(api);
    console.log(
      `\n3. ${readers} readers of one session on one API process (${turns} turns, ${load.eventsPerReaderPerTurn.toFixed(1)} frames per reader per turn)`,
    );
    console.log(
      `   memory per connected reader: ${(load.memoryPerReader / 1024).toFixed(1)} KiB; RSS growth over the turns: ${(load.rssGrowthDuringTurns / 2 ** 20).toFixed(1)} MiB`,
    );
    console.log(
      `   API CPU over the turns: ${load.cpuWithout} ms unread, ${load.cpuWith} ms read (ratio ${(load.cpuWith / Math.max(1, load.cpuWithout)).toFixed(1)})`,
    );
    console.log(`   CPU per reader per turn: ${load.cpuPerReaderPerTurnUs.toFixed(1)} µs`);
  } finally {
    await Promise.all(children.map((child) => stopProcess(child)));
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
    for (const client of Object.values(clients)) client.close();
  }
}

main().catch((err) => {
  console.error(err);
  for (const child of children) child.kill('SIGKILL');
  process.exit(1);
});
