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
//   --semi-space-mb N   starts the gateway with node --max-semi-space-size=N (default 4, as deployed; 0: V8's default).
import http from 'node:http';
import {
  BENCH_MODEL,
  describeLoadGenerator,
  fmtMs,
  latencyAtOneConnection,
  postChat,
  sequentialLatencies,
  startChatRig,
  throughput,
} from './lib/chat-rig.mjs';
import { cpuMsOf, sampleRss } from './lib/processes.mjs';

const argv = process.argv.slice(2);
const useDist = argv.includes('--dist');
const secondsAt = argv.indexOf('--seconds');
const seconds = secondsAt === -1 ? 5 : Number(argv[secondsAt + 1]);
const semiAt = argv.indexOf('--semi-space-mb');
// V8's young generation grows to 3 × 16 MB under load; a smaller one keeps RSS down for a little
// more GC. The quickstart and the Docker image run the gateway with 4 MB, and so does this bench
// unless told otherwise (`--semi-space-mb 0` leaves V8's default).
const semiSpaceMb = semiAt === -1 ? 4 : Number(argv[semiAt + 1]);
const gatewayNodeFlags = semiSpaceMb > 0 ? [`--max-semi-space-size=${semiSpaceMb}`] : [];

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
  console.log(describeLoadGenerator());

  // Warm both paths (JIT, connection pools) before measuring.
  await sequentialLatencies(engineUrl, plainBody, KEY, 2000);
  await sequentialLatencies(gatewayUrl, plainBody, KEY, 2000);
  await sequentialLatencies(engineUrl, streamBody, KEY, 100);
  await sequentialLatencies(gatewayUrl, streamBody, KEY, 100);

  // (a) one connection, one request at a time.
  const direct = await latencyAtOneConnection(engineUrl, plainBody, KEY, seconds);
  const via = await latencyAtOneConnection(gatewayUrl, plainBody, KEY, seconds);
  console.log('\n(a) latency at 1 connection (ms)');
  console.log(`    engine direct  p50 ${fmtMs(direct.p50)}  p99 ${fmtMs(direct.p99)}`);
  console.log(`    via gateway    p50 ${fmtMs(via.p50)}  p99 ${fmtMs(via.p99)}`);
  console.log(
    `    added          p50 ${fmtMs(via.p50 - direct.p50)}  p99 ${fmtMs(via.p99 - direct.p99)}   (goal ≤ 0.3 / ≤ 2)`,
  );

  // (b) 32 connections.
  // A 1 s warm-up each, outside the CPU accounting.
  await throughput(engineUrl, plainBody, KEY, 32, 1);
  const directRps = await withCpu(() => throughput(engineUrl, plainBody, KEY, 32, seconds));
  await throughput(gatewayUrl, plainBody, KEY, 32, 1);
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
