#!/usr/bin/env node
// Gateway overhead against the simulated engine answering at once (issue 3's performance goals):
//  (a) added latency at one connection, gateway vs engine directly, p50 and p99;
//  (b) non-streamed requests per second at 32 connections, gateway vs engine directly;
//  (c) SSE chunks per second relayed, gateway vs engine directly;
//  and the gateway's peak RSS over the whole run.
// Every figure is measured in the same run against the engine-direct baseline. On a shared machine
// rates swing with other load, so CPU time per request / per chunk (from /proc) is printed too:
// it barely depends on what else runs, and compares the gateway's own work with the engine's.
// Usage: node bench/gateway-latency.mjs [--dist] [--seconds 5] [--semi-space-mb N]
//   --dist              runs the compiled services (after `pnpm build`) instead of the TypeScript sources;
//   --semi-space-mb N   starts the gateway with node --max-semi-space-size=N.
import http from 'node:http';
import { BENCH_MODEL, fmtMs, postChat, sequentialLatencies, startChatRig, throughput } from './lib/chat-rig.mjs';
import { cpuMsOf, quantile, sampleRss } from './lib/processes.mjs';

const argv = process.argv.slice(2);
const useDist = argv.includes('--dist');
const secondsAt = argv.indexOf('--seconds');
const seconds = secondsAt === -1 ? 5 : Number(argv[secondsAt + 1]);
const semiAt = argv.indexOf('--semi-space-mb');
// V8's young generation grows to 3 × 16 MB under load; a smaller one keeps RSS down for a little more GC.
const gatewayNodeFlags = semiAt === -1 ? [] : [`--max-semi-space-size=${Number(argv[semiAt + 1])}`];

const KEY = 'bench-key';
const FRAME_START = Buffer.from('data: ');

const plainBody = JSON.stringify({
  model: BENCH_MODEL,
  messages: [{ role: 'user', content: 'Say hello to the benchmark.' }],
  max_tokens: 16,
});
const streamBody = JSON.stringify({
  model: BENCH_MODEL,
  messages: [{ role: 'user', content: 'Write a long story.' }],
  max_tokens: 250,
  stream: true,
  stream_options: { include_usage: true },
});

let rig;
let sim;
let gateway;
try {
  rig = await startChatRig({
    useDist,
    simArgs: ['--ignore-eos'],
    modelLines: ['price_per_million: { input: 1, output: 1 }'],
    gatewayEnv: { API_KEYS: KEY },
    gatewayNodeFlags,
  });
  ({ sim, gateway } = rig);
  const stopRss = sampleRss(gateway.child.pid);
  const { engineUrl, gatewayUrl } = rig;
  console.log(
    `engine :${sim.port}  gateway :${gateway.port} ${gatewayNodeFlags.join(' ')}  ${useDist ? 'compiled' : 'tsx'}  ${seconds}s per measure`,
  );

  // Warm both paths (JIT, connection pools) before measuring.
  await sequentialLatencies(engineUrl, plainBody, KEY, 2000);
  await sequentialLatencies(gatewayUrl, plainBody, KEY, 2000);
  await sequentialLatencies(engineUrl, streamBody, KEY, 100);
  await sequentialLatencies(gatewayUrl, streamBody, KEY, 100);

  // (a) one connection, one request at a time.
  const count = Math.max(2000, seconds * 1000);
  const direct = await sequentialLatencies(engineUrl, plainBody, KEY, count);
  const via = await sequentialLatencies(gatewayUrl, plainBody, KEY, count);
  const p = (values, q) => quantile(values, q);
  console.log('\n(a) latency at 1 connection (ms)');
  console.log(`    engine direct  p50 ${fmtMs(p(direct, 0.5))}  p99 ${fmtMs(p(direct, 0.99))}`);
  console.log(`    via gateway    p50 ${fmtMs(p(via, 0.5))}  p99 ${fmtMs(p(via, 0.99))}`);
  console.log(
    `    added          p50 ${fmtMs(p(via, 0.5) - p(direct, 0.5))}  p99 ${fmtMs(p(via, 0.99) - p(direct, 0.99))}   (goal ≤ 0.3 / ≤ 2)`,
  );

  // (b) 32 connections.
  const directRps = await withCpu(() => throughput(engineUrl, plainBody, KEY, 32, seconds));
  const viaRps = await withCpu(() => throughput(gatewayUrl, plainBody, KEY, 32, seconds));
  const perRequest = (run, pid) => ((run.cpu[pid] * 1000) / run.result.total).toFixed(0);
  console.log('\n(b) non-streamed requests/s at 32 connections');
  console.log(
    `    engine direct  ${Math.round(directRps.result.rps)} req/s  (${directRps.result.errors} errors, ${directRps.result.non2xx} non-2xx)  engine CPU ${perRequest(directRps, 'sim')} µs/request`,
  );
  console.log(
    `    via gateway    ${Math.round(viaRps.result.rps)} req/s  (${viaRps.result.errors} errors, ${viaRps.result.non2xx} non-2xx)  gateway CPU ${perRequest(viaRps, 'gateway')} µs/request, engine ${perRequest(viaRps, 'sim')}`,
  );
  console.log(
    `    ratio          ${(viaRps.result.rps / directRps.result.rps).toFixed(2)} of direct   (goal ≥ 8000 req/s)`,
  );

  // (c) SSE relay.
  const directChunks = await withCpu(() => chunkRate(engineUrl, streamBody, 8));
  const viaChunks = await withCpu(() => chunkRate(gatewayUrl, streamBody, 8));
  const perChunk = (run, pid) => ((run.cpu[pid] * 1000) / run.result.frames).toFixed(2);
  console.log('\n(c) SSE chunks/s at 8 streaming connections (250-token streams)');
  console.log(
    `    engine direct  ${Math.round(directChunks.result.rate)} chunks/s  engine CPU ${perChunk(directChunks, 'sim')} µs/chunk`,
  );
  console.log(
    `    via gateway    ${Math.round(viaChunks.result.rate)} chunks/s  gateway CPU ${perChunk(viaChunks, 'gateway')} µs/chunk, engine ${perChunk(viaChunks, 'sim')}`,
  );
  console.log(
    `    ratio          ${(viaChunks.result.rate / directChunks.result.rate).toFixed(2)} of direct   (goal ≥ 100000 chunks/s)`,
  );

  const peak = stopRss();
  console.log(`\nRSS of the gateway, peak under load: ${(peak / 1024 / 1024).toFixed(1)} MB   (goal ≤ 150 MB)`);
} finally {
  await rig?.stop();
}

/** Runs `measure` and adds the CPU ms the gateway and the engine spent meanwhile. */
async function withCpu(measure) {
  const before = { gateway: cpuMsOf(gateway.child.pid), sim: cpuMsOf(sim.child.pid) };
  const result = await measure();
  return {
    result,
    cpu: { gateway: cpuMsOf(gateway.child.pid) - before.gateway, sim: cpuMsOf(sim.child.pid) - before.sim },
  };
}

/** SSE `data:` frames received per second over `connections` streaming clients. */
async function chunkRate(url, body, connections) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  let frames = 0;
  // Counts frame starts in the raw bytes; a marker split across two reads is rare enough to ignore.
  const count = (data) => {
    for (let at = data.indexOf(FRAME_START); at !== -1; at = data.indexOf(FRAME_START, at + 6)) frames++;
  };
  const run = async (until) => {
    while (Date.now() < until) {
      const { status } = await postChat(url, body, KEY, agent, count);
      if (status !== 200) throw new Error(`${url} answered ${status}`);
    }
  };
  const started = Date.now();
  await Promise.all(Array.from({ length: connections }, () => run(started + seconds * 1000)));
  const elapsed = (Date.now() - started) / 1000;
  agent.destroy();
  return { rate: frames / elapsed, frames };
}
