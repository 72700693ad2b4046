// The rig the gateway benchmarks share: the simulated engine answering at once, a gateway whose
// catalog serves one model from it over HTTP, and the HTTP load helpers that measure both.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { startService } from './processes.mjs';

/** The one model the rig's catalog serves. */
export const BENCH_MODEL = 'bench/instant';

const root = new URL('../..', import.meta.url).pathname;
const gatewayDir = join(root, 'services/inference-gateway');

/**
 * Starts the instant simulated engine and a gateway in front of it.
 * `useDist` runs the compiled services; `simArgs` adds engine flags; `modelLines` adds catalog
 * lines to the model (e.g. `capacity: 100`); `gatewayEnv` and `gatewayNodeFlags` go to the gateway.
 * Returns `{ sim, gateway, engineUrl, gatewayUrl, stop() }`.
 */
export async function startChatRig({ useDist, simArgs = [], modelLines = [], gatewayEnv = {}, gatewayNodeFlags = [] }) {
  const entry = (ts, js) => join(gatewayDir, useDist ? js : ts);
  const work = mkdtempSync(join(tmpdir(), 'tollway-bench-'));
  let sim;
  let gateway;
  const stop = async () => {
    await Promise.all([gateway?.stop(), sim?.stop()]);
    rmSync(work, { recursive: true, force: true });
  };
  try {
    sim = await startService(entry('src/engines/simulated/main-sim.ts', 'dist/engines/simulated/main-sim.js'), {
      args: ['--port', '0', '--ttft-ms', '0', '--tpot-ms', '0', '--max-concurrency', '100000', ...simArgs],
      cwd: gatewayDir,
    });
    const catalog = join(work, 'catalog.yaml');
    writeFileSync(
      catalog,
      [
        'models:',
        `  - id: ${BENCH_MODEL}`,
        '    owned_by: bench',
        '    created: 1767225600',
        ...modelLines.map((line) => `    ${line}`),
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
        LOG_LEVEL: 'info',
        ...gatewayEnv,
      },
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    sim,
    gateway,
    engineUrl: `http://127.0.0.1:${sim.port}/v1/chat/completions`,
    gatewayUrl: `http://127.0.0.1:${gateway.port}/v1/chat/completions`,
    stop,
  };
}

/** One POST of `body` with bearer `key`; `onData` sees the response bytes. Resolves `{ status }`. */
export function postChat(url, body, key, agent, onData) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          authorization: `Bearer ${key}`,
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

/** `n` requests one after another on one keep-alive connection; sorted latencies in ms. */
export async function sequentialLatencies(url, body, key, n) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const latencies = new Array(n);
  for (let i = 0; i < n; i++) {
    const started = process.hrtime.bigint();
    const { status } = await postChat(url, body, key, agent);
    latencies[i] = Number(process.hrtime.bigint() - started) / 1e6;
    if (status !== 200) throw new Error(`${url} answered ${status}`);
  }
  agent.destroy();
  return latencies.sort((a, b) => a - b);
}

/** Requests per second with autocannon at `connections` for `seconds` (after a 1 s warm-up when asked). */
export async function throughput(url, body, key, connections, seconds, { warmup = false } = {}) {
  const options = {
    url,
    method: 'POST',
    connections,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body,
  };
  if (warmup) await autocannon({ ...options, duration: 1 });
  const result = await autocannon({ ...options, duration: seconds });
  return { rps: result.requests.average, total: result.requests.total, errors: result.errors, non2xx: result.non2xx };
}

/** Milliseconds with three decimals. */
export function fmtMs(ms) {
  return ms.toFixed(3);
}
