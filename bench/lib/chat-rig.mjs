// The rig the gateway benchmarks share: the simulated engine answering at once, a gateway whose
// catalog serves one model from it over HTTP, and the HTTP load helpers that measure both.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { quantile, startService } from './processes.mjs';
import { haveWrk, wrkPost } from './wrk.mjs';
import { oneConnectionLatencies } from './one-connection.mjs';

/** The node flags of the gateway's `start` script, so a bench runs the gateway as it is deployed. */
export { gatewayStartFlags } from '../../scripts/gateway-start-flags.mjs';

/** The one model the rig's catalog serves. */
export const BENCH_MODEL = 'bench/instant';

/** A second model, served by the gateway's in-process simulated engine, answering at once. */
export const IN_PROCESS_MODEL = 'bench/in-process';

/** Catalog lines (for `extraCatalogLines`) of IN_PROCESS_MODEL: 16 tokens, no wait, no EOS. */
export const IN_PROCESS_CATALOG_LINES = [
  `  - id: ${IN_PROCESS_MODEL}`,
  '    owned_by: bench',
  '    created: 1767225600',
  '    price_per_million: { input: 1, output: 2 }',
  '    engine:',
  '      kind: simulated',
  '      time_to_first_token_ms: 0',
  '      time_per_output_token_ms: 0',
  '      max_concurrency: 100000',
  '      ignore_eos: true',
];

const root = new URL('../..', import.meta.url).pathname;
const gatewayDir = join(root, 'services/inference-gateway');

/**
 * Starts the instant simulated engine and a gateway in front of it.
 * `useDist` runs the compiled services; `simArgs` adds engine flags; `modelLines` adds catalog
 * lines to the model (e.g. `capacity: 100`); `extraCatalogLines` adds other models (catalog lines
 * under `models:`); `gatewayEnv` and `gatewayNodeFlags` go to the gateway.
 * Returns `{ sim, gateway, engineUrl, gatewayUrl, stop() }`.
 */
export async function startChatRig({
  useDist,
  simArgs = [],
  modelLines = [],
  extraCatalogLines = [],
  gatewayEnv = {},
  gatewayNodeFlags = [],
}) {
  const entry = (ts, js) => join(gatewayDir, useDist ? js : ts);
  const work = mkdtempSync(join(tmpdir(), 'tollway-bench-'));
  let sim;
  let gateway;
  const stop = async () => {
    await Promise.all([gateway?.stop(), sim?.stop()]);
    rmSync(work, { recursive: true, force: true });
  };
  try {
    sim = await startInstantEngine({ useDist, simArgs });
    const catalog = join(work, 'catalog.yaml');
    writeBenchCatalog(catalog, sim.port, { modelLines, extraCatalogLines });
    gateway = await startBenchGateway(entry('src/main.ts', 'dist/main.js'), {
      cwd: gatewayDir,
      catalog,
      env: gatewayEnv,
      flags: gatewayNodeFlags,
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

/**
 * Starts a gateway entry point `file` (its package directory `cwd`) on a free port of 127.0.0.1,
 * serving `catalog` (not watched), with `env` on top and node `flags`. Resolves the service.
 */
export function startBenchGateway(file, { cwd, catalog, env = {}, flags = [] }) {
  return startService(file, {
    execArgv: flags,
    cwd,
    env: {
      GATEWAY_PORT: '0',
      GATEWAY_HOST: '127.0.0.1',
      CATALOG_PATH: catalog,
      CATALOG_WATCH: 'false',
      LOG_LEVEL: 'info',
      ...env,
    },
  });
}

/**
 * Starts the simulated engine as its own process, answering at once (no time to first token, none
 * per token, no concurrency limit); `simArgs` adds flags (e.g. `--flush-each-event`). Resolves the
 * service (`port`, `child`, `stop()`).
 */
export function startInstantEngine({ useDist, simArgs = [] }) {
  const file = useDist ? 'dist/engines/simulated/main-sim.js' : 'src/engines/simulated/main-sim.ts';
  return startService(join(gatewayDir, file), {
    args: ['--port', '0', '--ttft-ms', '0', '--tpot-ms', '0', '--max-concurrency', '100000', ...simArgs],
    cwd: gatewayDir,
  });
}

/**
 * Starts bare-proxy.mjs (a pass-through node:http proxy, no governance) in front of the engine on
 * `enginePort`. Resolves the service (`port`, `child`, `stop()`).
 */
export function startBareProxy(enginePort) {
  return startService(join(root, 'bench/lib/bare-proxy.mjs'), { args: [String(enginePort)] });
}

/**
 * Catalog lines (under `models:`) of a model `id` served over HTTP by the engine on `enginePort`
 * (or one replica per port of an array), with `modelLines` (e.g. `capacity: 100`) added to the
 * model and `engineLines` (e.g. `routing: { policy: sticky }`) to its engine.
 */
export function httpModelCatalogLines(id, enginePort, modelLines = [], engineLines = []) {
  return [
    `  - id: ${id}`,
    '    owned_by: bench',
    '    created: 1767225600',
    ...modelLines.map((line) => `    ${line}`),
    '    engine:',
    '      kind: openai-compatible',
    ...engineLines.map((line) => `      ${line}`),
    '      replicas:',
    ...[enginePort].flat().map((port) => `        - base_url: http://127.0.0.1:${port}/v1`),
  ];
}

/**
 * Writes the rig's catalog to `path`: BENCH_MODEL served over HTTP by the engine on `enginePort`,
 * with `modelLines` added to the model and `extraCatalogLines` (other models) after it.
 */
export function writeBenchCatalog(path, enginePort, { modelLines = [], extraCatalogLines = [] } = {}) {
  writeFileSync(
    path,
    ['models:', ...httpModelCatalogLines(BENCH_MODEL, enginePort, modelLines), ...extraCatalogLines, ''].join('\n'),
  );
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

/**
 * The load generator: wrk when it is installed (`apt-get install wrk`), else the Node client and
 * autocannon, which cost more CPU per request than the gateway and so understate what it serves.
 */
export const LOAD_GENERATOR = process.env.BENCH_LOAD_GENERATOR ?? (haveWrk() ? 'wrk' : 'autocannon');

/** Prints which load generator runs, and what that means for the figures. */
export function describeLoadGenerator() {
  const oneConnection = '1 connection: one sequential socket, each request timed';
  if (LOAD_GENERATOR === 'wrk') return `load: wrk, 1 thread; ${oneConnection}`;
  const why = process.env.BENCH_LOAD_GENERATOR ? 'BENCH_LOAD_GENERATOR' : 'wrk not found: `apt-get install wrk`';
  return `load: autocannon (${why}; it costs more CPU per request than the gateway, so rates are capped); ${oneConnection}`;
}

/**
 * p50 and p99 (ms) of requests one at a time on one keep-alive connection, over `seconds`, timed by
 * the exact sequential client of one-connection.mjs (not wrk: at one connection its latencies are
 * not consistent with its own rate on these VMs; see there).
 */
export async function latencyAtOneConnection(url, body, key, seconds) {
  const { latencies, non2xx } = await oneConnectionLatencies(url, body, key, seconds);
  if (non2xx > 0) throw new Error(`${url}: ${non2xx} non-2xx`);
  return { p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99), total: latencies.length };
}

/** Requests per second at `connections` for `seconds` (after a warm-up of `warmup` seconds, if any; `true` = 1 s). */
export async function throughput(url, body, key, connections, seconds, { warmup = false } = {}) {
  if (LOAD_GENERATOR === 'wrk') {
    if (warmup) await wrkPost(url, body, key, { connections, seconds: Number(warmup) });
    return wrkPost(url, body, key, { connections, seconds });
  }
  const options = {
    url,
    method: 'POST',
    connections,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body,
  };
  if (warmup) await autocannon({ ...options, duration: Number(warmup) });
  const result = await autocannon({ ...options, duration: seconds });
  return { rps: result.requests.average, total: result.requests.total, errors: result.errors, non2xx: result.non2xx };
}

/** Milliseconds with three decimals. */
export function fmtMs(ms) {
  return ms.toFixed(3);
}

/**
 * Creates an organization with budgets and credit too large to refuse during a bench (every
 * check still runs) and a key for it, through the admin API at `gatewayPort`. Resolves the key.
 */
export async function createBenchOrgKey(gatewayPort, adminToken) {
  const admin = async (path, payload) => {
    const res = await fetch(`http://127.0.0.1:${gatewayPort}/admin/v1${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify(payload),
    });
    if (!res.ok) throw new Error(`admin POST ${path}: ${res.status} ${await res.text()}`);
    return res.json();
  };
  const org = await admin('/organizations', {
    name: 'bench',
    budgets: { requests: 100_000_000, input_tokens: 10_000_000_000, output_tokens: 10_000_000_000 },
    credit: 1_000_000,
  });
  const { key } = await admin(`/organizations/${org.id}/keys`, { name: 'bench' });
  return key;
}

/** Deletes every key under `prefix` with the ioredis client `redis`. */
export async function deleteByPrefix(redis, prefix) {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}
