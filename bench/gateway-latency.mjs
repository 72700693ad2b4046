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
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { cpuMsOf, quantile, sampleRss, startService } from './lib/processes.mjs';

const argv = process.argv.slice(2);
const useDist = argv.includes('--dist');
const secondsAt = argv.indexOf('--seconds');
const seconds = secondsAt === -1 ? 5 : Number(argv[secondsAt + 1]);
const root = new URL('..', import.meta.url).pathname;
const gatewayDir = join(root, 'services/inference-gateway');
const entry = (ts, js) => join(gatewayDir, useDist ? js : ts);
const semiAt = argv.indexOf('--semi-space-mb');
// V8's young generation grows to 3 × 16 MB under load; a smaller one keeps RSS down for a little more GC.
const gatewayNodeFlags = semiAt === -1 ? [] : [`--max-semi-space-size=${Number(argv[semiAt + 1])}`];

const KEY = 'bench-key';
const FRAME_START = Buffer.from('data: ');
const MODEL = 'bench/instant';
const plainBody = JSON.stringify({
  model: MODEL,
  messages: [{ role: 'user', content: 'Say hello to the benchmark.' }],
  max_tokens: 16,
});
const streamBody = JSON.stringify({
  model: MODEL,
  messages: [{ role: 'user', content: 'Write a long story.' }],
  max_tokens: 250,
  stream: true,
  stream_options: { include_usage: true },
});

const work = mkdtempSync(join(tmpdir(), 'tollway-bench-'));
let sim;
let gateway;
try {
  sim = await startService(entry('src/engines/simulated/main-sim.ts', 'dist/engines/simulated/main-sim.js'), {
    args: ['--port', '0', '--ttft-ms', '0', '--tpot-ms', '0', '--max-concurrency', '100000', '--ignore-eos'],
    cwd: gatewayDir,
  });
  const catalog = join(work, 'catalog.yaml');
  writeFileSync(
    catalog,
    [
      'models:',
      `  - id: ${MODEL}`,
      '    owned_by: bench',
      '    created: 1767225600',
      '    price_per_million: { input: 1, output: 1 }',
      '    engine:',
      '      kind: openai-compatible',
      '      replicas:',
      `        - base_url: http://127.0.0.1:${sim.port}/v1`,
      '',
    ].join('\n'),
  );
  gateway = await startService(entry('src/main.ts', 'dist/main.js'), {
    execArgv: gatewayNodeFlags,
    cwd: gatewayDir,
    env: {
      GATEWAY_PORT: '0',
      GATEWAY_HOST: '127.0.0.1',
      CATALOG_PATH: catalog,
      CATALOG_WATCH: 'false',
      API_KEYS: KEY,
      LOG_LEVEL: 'info',
    },
  });
  const stopRss = sampleRss(gateway.child.pid);
  const engineUrl = `http://127.0.0.1:${sim.port}/v1/chat/completions`;
  const gatewayUrl = `http://127.0.0.1:${gateway.port}/v1/chat/completions`;
  console.log(
    `engine :${sim.port}  gateway :${gateway.port} ${gatewayNodeFlags.join(' ')}  ${useDist ? 'compiled' : 'tsx'}  ${seconds}s per measure`,
  );

  // Warm both paths (JIT, connection pools) before measuring.
  await sequential(engineUrl, plainBody, 2000);
  await sequential(gatewayUrl, plainBody, 2000);
  await sequential(engineUrl, streamBody, 100);
  await sequential(gatewayUrl, streamBody, 100);

  // (a) one connection, one request at a time.
  const count = Math.max(2000, seconds * 1000);
  const direct = await sequential(engineUrl, plainBody, count);
  const via = await sequential(gatewayUrl, plainBody, count);
  const p = (values, q) => quantile(values, q);
  console.log('\n(a) latency at 1 connection (ms)');
  console.log(`    engine direct  p50 ${fmt(p(direct, 0.5))}  p99 ${fmt(p(direct, 0.99))}`);
  console.log(`    via gateway    p50 ${fmt(p(via, 0.5))}  p99 ${fmt(p(via, 0.99))}`);
  console.log(
    `    added          p50 ${fmt(p(via, 0.5) - p(direct, 0.5))}  p99 ${fmt(p(via, 0.99) - p(direct, 0.99))}   (goal ≤ 0.3 / ≤ 2)`,
  );

  // (b) 32 connections.
  const directRps = await withCpu(() => throughput(engineUrl, plainBody, 32));
  const viaRps = await withCpu(() => throughput(gatewayUrl, plainBody, 32));
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
  await Promise.all([gateway?.stop(), sim?.stop()]);
  rmSync(work, { recursive: true, force: true });
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

function fmt(ms) {
  return ms.toFixed(3);
}

/** `n` requests one after another on one keep-alive connection; returns sorted latencies in ms. */
async function sequential(url, body, n) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const latencies = new Array(n);
  for (let i = 0; i < n; i++) {
    const started = process.hrtime.bigint();
    const { status } = await post(url, body, agent);
    latencies[i] = Number(process.hrtime.bigint() - started) / 1e6;
    if (status !== 200) throw new Error(`${url} answered ${status}`);
  }
  agent.destroy();
  return latencies.sort((a, b) => a - b);
}

function post(url, body, agent, onData) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          authorization: `Bearer ${KEY}`,
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        res.on('data', onData ?? (() => undefined));
        res.on('end', () => resolve({ status: res.statusCode }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Non-streamed requests per second with autocannon at `connections`. */
async function throughput(url, body, connections) {
  const options = {
    url,
    method: 'POST',
    connections,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
    body,
  };
  const result = await autocannon({ ...options, duration: seconds });
  return { rps: result.requests.average, total: result.requests.total, errors: result.errors, non2xx: result.non2xx };
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
      const { status } = await post(url, body, agent, count);
      if (status !== 200) throw new Error(`${url} answered ${status}`);
    }
  };
  const started = Date.now();
  await Promise.all(Array.from({ length: connections }, () => run(started + seconds * 1000)));
  const elapsed = (Date.now() - started) / 1000;
  agent.destroy();
  return { rate: frames / elapsed, frames };
}
