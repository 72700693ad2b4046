#!/usr/bin/env node
// What REDIS_WAIT_REPLICAS costs (the wait for a replica behind each 202 and each settlement):
// one Redis through Sentinel (a primary, one replica on loopback, three sentinels), and side by
// side a session API and a gateway with REDIS_WAIT_REPLICAS=0, and the same with 1, on it. In
// alternating rounds of the same load, each client loops: send a message (timed until its 202),
// wait for the turn (the echo agent answers at once); and each chat client loops on POST
// /v1/chat/completions with every request admitted and settled in Redis (ADMISSION_SLICES=false,
// the most settlements), then with local admission (the default: settlements batched). Prints
// p50/p99 and rates of each, and their ratio (wait / no wait).
// Usage: node --conditions=@tollway/source --import tsx bench/redis-wait.mjs
//          [--rounds 3] [--seconds 4] [--clients 16] [--dist]
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import http from 'node:http';
import { benchArgs } from './lib/args.mjs';
import { quantile } from './lib/processes.mjs';
import { startRedisSentinelGroup } from '../packages/service-kit/src/testing/redis-sentinels.ts';
import { PlatformProcesses, runCli, SIM_MODEL } from '../scripts/platform-processes.ts';

const { rounds, seconds, clients, dist } = benchArgs(
  'node --conditions=@tollway/source --import tsx bench/redis-wait.mjs [--rounds 3] [--seconds 4] [--clients 16] [--dist]',
  { numbers: { rounds: 3, seconds: 4, clients: 16 }, flags: ['dist'] },
);
const entry = dist ? 'dist' : 'source';
const root = new URL('..', import.meta.url).pathname;
const echoAgent = join(root, 'services/agent-session', dist ? 'dist/agents/echo.agent.js' : 'src/agents/echo.agent.ts');
const agent = new http.Agent({ keepAlive: true, maxSockets: clients * 4 });

/** One request; resolves with its status and latency (ms). */
function send(url, method, body, headers = {}) {
  return new Promise((resolve) => {
    const started = performance.now();
    const req = http.request(
      url,
      { method, agent, headers: { 'content-type': 'application/json', ...headers } },
      (res) => {
        const chunks = [];
        res.on('data', (chunk) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode, ms: performance.now() - started, body: Buffer.concat(chunks).toString() }),
        );
      },
    );
    req.on('error', () => resolve({ status: 0, ms: performance.now() - started, body: '' }));
    req.end(body);
  });
}

/** `clients` loops of `step` for `seconds`; returns every latency `step` reported, and how many failed. */
async function load(step) {
  const latencies = [];
  let failed = 0;
  const until = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: clients }, async (_, client) => {
      const state = {};
      while (performance.now() < until) {
        const ms = await step(client, state);
        if (ms === null) failed += 1;
        else latencies.push(ms);
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  return { latencies, failed };
}

const group = await startRedisSentinelGroup({ replicas: 1 });
const env = { ...group.env, REDIS_PREFIX: `bench-wait-${randomUUID()}:` };
const processes = new PlatformProcesses(env, entry);
try {
  const plenty = ['--requests', '100000000', '--input-tokens', '100000000', '--output-tokens', '100000000'];
  const org = await runCli(env, ['orgs', 'create', '--name', 'Bench wait', ...plenty, '--credit', '1000000'], entry);
  const key = String((await runCli(env, ['keys', 'create', String(org.id)], entry)).key);
  const modes = {};
  for (const replicas of ['0', '1']) {
    const waitEnv = { REDIS_WAIT_REPLICAS: replicas };
    modes[replicas] = {
      api: await processes.sessionApi(waitEnv),
      gateway: await processes.gateway({ ...waitEnv, ADMISSION_SLICES: 'false' }),
      sliced: await processes.gateway(waitEnv),
    };
  }
  processes.worker(8, { AGENT_MODULE: echoAgent });
  await processes.ready(modes['0'].api);

  const chatBody = JSON.stringify({ model: SIM_MODEL, messages: [{ role: 'user', content: 'Bench.' }], max_tokens: 2 });
  const results = { 0: { sends: [], chat: [], sliced: [] }, 1: { sends: [], chat: [], sliced: [] } };
  for (let round = 0; round < rounds; round++) {
    for (const replicas of round % 2 === 0 ? ['0', '1'] : ['1', '0']) {
      const { api, gateway, sliced } = modes[replicas];
      const sends = await load(async (_client, state) => {
        state.id ??= JSON.parse((await send(`${api}/sessions`, 'POST', '{}')).body).session_id;
        const sent = await send(`${api}/sessions/${state.id}/messages`, 'POST', JSON.stringify({ content: 'hi' }));
        await send(`${api}/sessions/${state.id}?wait=true&timeout=5`, 'GET');
        return sent.status === 202 ? sent.ms : null;
      });
      const chatOn = (url) =>
        load(async () => {
          const res = await send(`${url}/v1/chat/completions`, 'POST', chatBody, { authorization: `Bearer ${key}` });
          return res.status === 200 ? res.ms : null;
        });
      results[replicas].sends.push(sends);
      results[replicas].chat.push(await chatOn(gateway));
      results[replicas].sliced.push(await chatOn(sliced));
    }
  }

  const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  const figures = (runs) => ({
    p50: median(runs.map((run) => quantile(run.latencies, 0.5))),
    p99: median(runs.map((run) => quantile(run.latencies, 0.99))),
    rate: median(runs.map((run) => run.latencies.length / seconds)),
    failed: runs.reduce((sum, run) => sum + run.failed, 0),
  });
  console.log(`${rounds} rounds of ${seconds} s per mode, ${clients} clients; medians over rounds`);
  for (const [name, label] of [
    ['sends', 'send (POST /messages until its 202)'],
    ['chat', 'chat completion, every request admitted and settled in Redis (ADMISSION_SLICES=false)'],
    ['sliced', 'chat completion, local admission (the default: settlements batched)'],
  ]) {
    const off = figures(results[0][name]);
    const on = figures(results[1][name]);
    console.log(`${label}:`);
    for (const [mode, f] of [
      ['REDIS_WAIT_REPLICAS=0', off],
      ['REDIS_WAIT_REPLICAS=1', on],
    ]) {
      console.log(
        `  ${mode}: p50 ${f.p50.toFixed(2)} ms, p99 ${f.p99.toFixed(2)} ms, ${f.rate.toFixed(0)}/s, ${f.failed} failed`,
      );
    }
    console.log(
      `  ratio (wait / no wait): p50 ×${(on.p50 / off.p50).toFixed(2)}, p99 ×${(on.p99 / off.p99).toFixed(2)}, rate ×${(on.rate / off.rate).toFixed(2)}`,
    );
  }
} finally {
  agent.destroy();
  await processes.stop();
  await group.stop();
}
