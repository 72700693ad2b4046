// A whole Tollway platform of one build, for the session benchmarks: a private redis-server of its
// own (so INFO counts only this platform's commands and CPU), the build's gateway with its
// simulated engine (the workers' service key; organizations made through its admin API), API
// replicas and workers of the build's session service, and a webhook receiver that records when
// each turn's callback arrives. Built code only (`pnpm build` in the build's checkout first).
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '../../packages/service-kit/dist/testing/free-port.js';
import { startService, stopProcess } from './processes.mjs';

const TIMED_AGENT = new URL('../agents/timed-chat.agent.cjs', import.meta.url).pathname;

/**
 * Starts redis-server on a free port, no persistence; with `core`, on that CPU alone (taskset).
 * Resolves `{ port, url, redis, info(), stop() }`.
 */
export async function startBenchRedis({ core } = {}) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'tollway-bench-redis-'));
  const serverArgs = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir];
  // taskset execs redis-server, so the child's pid is the server's.
  const child =
    core === undefined
      ? spawn('redis-server', serverArgs, { stdio: 'ignore' })
      : spawn('taskset', ['-c', String(core), 'redis-server', ...serverArgs], { stdio: 'ignore' });
  const url = `redis://127.0.0.1:${port}`;
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  redis.on('error', () => undefined);
  for (let i = 0; ; i++) {
    try {
      await redis.connect();
      await redis.ping();
      break;
    } catch {
      if (i > 100) throw new Error('redis-server did not start');
      redis.disconnect();
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  return {
    port,
    url,
    redis,
    /**
     * Commands processed, CPU seconds (user + system), reads of client sockets (each a batch of
     * one client's commands, however many) and wake-ups (the server's voluntary context switches:
     * each is a sleep in epoll_wait that new commands ended) so far, and per
     * command (INFO commandstats) its calls and µs (a script's µs include the commands it ran).
     */
    async counters() {
      const text = await redis.info('all');
      const field = (name) => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(text)?.[1] ?? 0);
      const byCommand = {};
      for (const [, command, calls, usec] of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
        byCommand[command] = { calls: Number(calls), usec: Number(usec) };
      }
      return {
        commands: field('total_commands_processed'),
        cpu: field('used_cpu_sys') + field('used_cpu_user'),
        reads: field('total_reads_processed'),
        wakeups: voluntarySwitches(child.pid),
        byCommand,
      };
    },
    async stop() {
      redis.disconnect();
      await stopProcess(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Redis counters between two reads, per `n` units (turns, requests), less the reads' own commands;
 * `byCommand`: each command's calls and µs per unit, busiest first.
 */
export function perUnit(before, after, n) {
  const byCommand = Object.entries(after.byCommand ?? {})
    .map(([command, { calls, usec }]) => {
      const was = before.byCommand?.[command] ?? { calls: 0, usec: 0 };
      return { command, calls: (calls - was.calls) / n, us: (usec - was.usec) / n };
    })
    .filter((entry) => entry.calls > 0 && entry.command !== 'info')
    .sort((a, b) => b.us - a.us);
  return {
    commands: (after.commands - before.commands - 1) / n,
    cpuUs: ((after.cpu - before.cpu) * 1e6) / n,
    reads: ((after.reads ?? 0) - (before.reads ?? 0) - 1) / n,
    wakeups: (after.wakeups - before.wakeups) / n,
    byCommand,
  };
}

/**
 * Moves this process (and so every process it starts from now on) off CPU `core`, which a
 * benchmark then gives Redis alone, as on a host where Redis has a core of its own (Linux).
 */
export function pinToOtherCores(core) {
  const others = Array.from({ length: availableParallelism() }, (_, i) => i).filter((i) => i !== core);
  if (others.length === 0) throw new Error('pinning needs 2 CPUs or more');
  execFileSync('taskset', ['-p', '-c', others.join(','), String(process.pid)], { stdio: 'ignore' });
}

/** A process's voluntary context switches so far (Linux; NaN elsewhere). */
function voluntarySwitches(pid) {
  try {
    return Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
  } catch {
    return NaN;
  }
}

/** Resolves once `check()` is truthy, polling every `stepMs`; rejects after `timeoutMs`. */
export async function until(check, timeoutMs = 60_000, stepMs = 50) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, stepMs));
  }
}

/**
 * Starts a platform of the build checked out at `root`: `apis` session API replicas and `workers`
 * workers of `concurrency` agent processes each, running the built-in chat agent through the
 * gateway (timed: see agents/timed-chat.agent.cjs). `redisCore`: Redis runs on that CPU alone
 * (see pinToOtherCores for the rest). Resolves the platform.
 */
export async function startSessionPlatform(
  root,
  { apis = 2, workers = 2, concurrency = 4, apiEnv = {}, redisCore } = {},
) {
  const redis = await startBenchRedis({ core: redisCore });
  const started = [];
  const hooks = await startHookReceiver();
  const serviceKey = `svc-${randomBytes(16).toString('hex')}`;
  const adminToken = `admin-${randomUUID()}`;
  const prefix = 'bench:';
  const gatewayDir = join(root, 'services/inference-gateway');
  const sessionDir = join(root, 'services/agent-session');
  const common = { REDIS_URL: redis.url, REDIS_PREFIX: prefix, LOG_LEVEL: 'warn' };
  try {
    const gatewayPort = await freePort();
    const gateway = await startService(join(gatewayDir, 'dist/main.js'), {
      cwd: gatewayDir,
      env: {
        ...common,
        LOG_LEVEL: 'info',
        GATEWAY_PORT: String(gatewayPort),
        GATEWAY_HOST: '127.0.0.1',
        ADMIN_TOKEN: adminToken,
        SERVICE_API_KEYS: serviceKey,
        CATALOG_WATCH: 'false',
      },
    });
    gateway.child.stdout.resume();
    started.push(gateway);
    const apiPorts = [];
    for (let i = 0; i < apis; i++) {
      const port = await freePort();
      const api = spawnNode(join(sessionDir, 'dist/main-api.js'), sessionDir, {
        ...common,
        SESSIONS_PORT: String(port),
        SESSIONS_HOST: '127.0.0.1',
        MAX_SESSIONS: '1000000',
        ...apiEnv,
      });
      started.push(api);
      apiPorts.push(port);
    }
    await Promise.all(apiPorts.map((port) => until(() => ready(`http://127.0.0.1:${port}/readyz`), 30_000)));
    for (let i = 0; i < workers; i++) {
      started.push(
        spawnNode(join(sessionDir, 'dist/main-worker.js'), sessionDir, {
          ...common,
          WORKER_CONCURRENCY: String(concurrency),
          GATEWAY_BASE_URL: `http://127.0.0.1:${gatewayPort}/v1`,
          GATEWAY_API_KEY: serviceKey,
          AGENT_MODULE: TIMED_AGENT,
          BENCH_INNER_AGENT: join(sessionDir, 'dist/agents/chat.agent.js'),
          WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
        }),
      );
    }
    const apiUrls = apiPorts.map((port) => `http://127.0.0.1:${port}`);
    await until(async () => (await health(apiUrls[0])).max_workers === workers * concurrency, 30_000);
    return {
      redis,
      hooks,
      apiUrls,
      gatewayUrl: `http://127.0.0.1:${gatewayPort}`,
      /** An organization with budgets no bench reaches, and a key: `{ id, key }`. */
      async organization(name) {
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
          name,
          budgets: { requests: 1e12, input_tokens: 1e12, output_tokens: 1e12 },
          credit: 1e9,
        });
        const { key } = await admin(`/organizations/${org.id}/keys`, { name });
        return { id: org.id, key };
      },
      async stop() {
        await Promise.all(started.map((service) => service.stop()));
        await hooks.close();
        await redis.stop();
      },
    };
  } catch (err) {
    await Promise.all(started.map((service) => service.stop()));
    await hooks.close();
    await redis.stop();
    throw err;
  }
}

/** Starts `file`; its output is shown with BENCH_VERBOSE=1, else dropped. */
function spawnNode(file, cwd, env) {
  const stdio = process.env.BENCH_VERBOSE === '1' ? ['ignore', 'inherit', 'inherit'] : 'ignore';
  const child = spawn(process.execPath, [file], { cwd, env: { ...process.env, ...env }, stdio });
  return { child, stop: () => stopProcess(child) };
}

async function ready(url) {
  try {
    return (await fetch(url)).ok;
  } catch {
    return false;
  }
}

async function health(url) {
  try {
    return await (await fetch(`${url}/health`)).json();
  } catch {
    return {};
  }
}

/** A webhook receiver: `arrived` maps a session id to the time (ms) its turn's callback came. */
async function startHookReceiver() {
  const arrived = new Map();
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      try {
        const payload = JSON.parse(body);
        arrived.set(payload.session_id, { at: Date.now(), status: payload.status });
      } catch {
        // not a callback
      }
      res.writeHead(204).end();
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/hook`,
    arrived,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}

/** A session API client of one organization's key, spreading its calls over the API replicas. */
export function sessionClient(apiUrls, key) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  let next = 0;
  const call = (method, path, body) =>
    new Promise((resolve, reject) => {
      const url = new URL(path, apiUrls[next++ % apiUrls.length]);
      const payload = body === undefined ? undefined : JSON.stringify(body);
      const req = http.request(
        url,
        {
          method,
          agent,
          headers: {
            authorization: `Bearer ${key}`,
            ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}),
          },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk) => (text += chunk));
          res.on('end', () => resolve({ status: res.statusCode, body: text ? JSON.parse(text) : null }));
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  return {
    call,
    async createSession() {
      const res = await call('POST', '/sessions', {});
      if (res.status !== 201) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body.session_id;
    },
    /** Sends one message; resolves the time (ms) the 202 arrived. */
    async send(id, body) {
      const res = await call('POST', `/sessions/${id}/messages`, body);
      if (res.status !== 202) throw new Error(`send: ${res.status} ${JSON.stringify(res.body)}`);
      return Date.now();
    },
    /** Long-polls until the session is no longer running; resolves the time (ms) of the answer. */
    async waitIdle(id) {
      for (;;) {
        const res = await call('GET', `/sessions/${id}?wait=true&timeout=60`);
        if (res.body?.status !== 'running') return Date.now();
      }
    },
    /** The agent's start and end (ms) of the session's last turn, from the timed agent's mark. */
    async lastTurnTimes(id) {
      const res = await call('GET', `/sessions/${id}/messages`);
      const mark = /^t(\d+)-(\d+)$/.exec(res.body?.at(-1)?.name ?? '');
      return mark ? { started: Number(mark[1]), ended: Number(mark[2]) } : null;
    },
    close: () => agent.destroy(),
  };
}

/** Runs `fn` over `items`, at most `limit` at once. */
export async function inParallel(items, limit, fn) {
  const results = new Array(items.length);
  let index = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (index < items.length) {
        const i = index++;
        results[i] = await fn(items[i], i);
      }
    }),
  );
  return results;
}

/** The `q` quantile of `values` (sorted copy). */
export function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}
