/**
 * Session API benchmark: session creates/s, long-poll wake-up latency after a turn ends,
 * 10,000 concurrent long-polls on one API process, Redis memory per idle session with 10 short
 * messages, and turns/s through one worker (concurrency 4) running an agent that answers at once.
 *
 *   node --conditions=@tollway/source --import tsx bench/sessions-api.mjs \
 *     [--only creates,wake,hold,memory,turns] [--duration 5] [--waiters 10000] [--profile DIR]
 *
 * `--profile DIR` writes a CPU profile of every spawned process into DIR.
 *
 * Spawns its own API (and worker) processes on a fresh Redis key prefix, which it deletes at the end.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import { SessionStore } from '../services/agent-session/src/store/session-store.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const serviceDir = path.join(here, '..', 'services', 'agent-session');
const args = parseArgs(process.argv.slice(2));
const only = new Set((args.only ?? 'memory,creates,wake,hold,turns').split(','));
const durationSeconds = Number(args.duration ?? 5);
const waiterCount = Number(args.waiters ?? 10_000);
const prefix = `bench-${randomUUID()}:`;
const redis = new Redis('redis://127.0.0.1:6379');
// Each phase gets its own key prefix (and so its own queue): no phase inherits another's backlog.
let phasePrefix = prefix;
let store = new SessionStore({ redis, prefix });
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
const children = [];
const results = {};

function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) out[argv[i].replace(/^--/, '')] = argv[i + 1];
  return out;
}

function enterPhase(name) {
  phasePrefix = `${prefix}${name}:`;
  store = new SessionStore({ redis, prefix: phasePrefix });
}

function spawnProcess(entry, port, env, extraArgs = []) {
  const child = spawn(
    process.execPath,
    [
      ...(args.profile ? ['--cpu-prof', `--cpu-prof-dir=${args.profile}`] : []),
      '--conditions=@tollway/source',
      '--import',
      'tsx',
      path.join(serviceDir, 'src', entry),
      ...extraArgs,
    ],
    {
      cwd: serviceDir,
      env: { ...process.env, REDIS_PREFIX: phasePrefix, LOG_LEVEL: 'warn', SESSIONS_PORT: String(port), ...env },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  children.push(child);
  return child;
}

async function startApi(port, extraArgs = []) {
  const child = spawnProcess('main-api.ts', port, {}, ['--no-auth', '--max-sessions', '100000000', ...extraArgs]);
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    if ((await call(base, 'GET', '/healthz').catch(() => null))?.status === 200) return { base, child };
    await sleep(100);
  }
  throw new Error('the API did not start');
}

async function stop(child) {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * One HTTP request on the shared keep-alive agent, or on its own connection with `ownConnection`
 * (Node's Agent removes a socket from its pool by linear search, so 10,000 pooled long-polls would
 * measure the client, not the server).
 */
function call(base, method, pathname, body, { attempt = 1, ownConnection = false, onSent } = {}) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers = payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {};
    const req = http.request(`${base}${pathname}`, { method, agent: ownConnection ? false : agent, headers }, (res) => {
      const chunks = [];
      res.on('data', (chunk) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        resolve({ status: res.statusCode, body: text ? JSON.parse(text) : null });
      });
      res.on('error', reject);
    });
    // A reset on a kept-alive socket means the request never reached the server; a GET is safe to repeat.
    req.on('error', (err) =>
      err.code === 'ECONNRESET' && (req.reusedSocket || (method === 'GET' && attempt < 3))
        ? call(base, method, pathname, body, { attempt: attempt + 1, ownConnection, onSent }).then(resolve, reject)
        : reject(err),
    );
    if (onSent) req.once('finish', onSent);
    req.end(payload);
  });
}

/** Runs `task(i)` for i < count with at most `limit` in flight. */
async function pool(count, limit, task) {
  let next = 0;
  const out = new Array(count);
  await Promise.all(
    Array.from({ length: Math.min(limit, count) }, async () => {
      while (next < count) {
        const i = next++;
        out[i] = await task(i);
      }
    }),
  );
  return out;
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

async function runningSessions(base, count) {
  const ids = await pool(count, 100, async () => (await call(base, 'POST', '/sessions')).body.session_id);
  await pool(count, 100, async (i) => {
    const res = await call(base, 'POST', `/sessions/${ids[i]}/messages`, { content: 'hi' });
    if (res.status !== 202) throw new Error(`send answered ${res.status}`);
  });
  const turns = new Map((await store.listRunningTurns()).map((t) => [t.sessionId, t.turnId]));
  return ids.map((id) => ({ id, turnId: turns.get(id) }));
}

const reply = { role: 'assistant', content: 'done' };
const finish = ({ id, turnId }) => store.finishTurn(id, turnId, { kind: 'success', append: [reply], response: reply });

async function benchMemory() {
  enterPhase('memory');
  const { base, child } = await startApi(18301);
  const count = 1000;
  const state = Array.from({ length: 10 }, (_, i) => ({
    role: i % 2 ? 'assistant' : 'user',
    content: `short message ${i}`,
  }));
  const ids = await pool(count, 50, async () => (await call(base, 'POST', '/sessions', { state })).body.session_id);
  let perSessionKeys = 0;
  for (const id of ids) {
    perSessionKeys += Number(await redis.memory('USAGE', `${phasePrefix}{sessions}:s:${id}`, 'SAMPLES', 0));
    perSessionKeys += Number(await redis.memory('USAGE', `${phasePrefix}{sessions}:h:${id}`, 'SAMPLES', 0));
  }
  const indexes =
    Number(await redis.memory('USAGE', `${phasePrefix}{sessions}:activity`, 'SAMPLES', 0)) +
    Number(await redis.memory('USAGE', `${phasePrefix}{sessions}:no-org`, 'SAMPLES', 0));
  results.memory = {
    sessions: count,
    bytes_per_session_keys: Math.round(perSessionKeys / count),
    bytes_per_session_with_indexes: Math.round((perSessionKeys + indexes) / count),
  };
  await stop(child);
}

async function benchCreates() {
  enterPhase('creates');
  const { base, child } = await startApi(18302);
  const result = await autocannon({
    url: `${base}/sessions`,
    method: 'POST',
    connections: 50,
    duration: durationSeconds,
  });
  results.creates = {
    per_second: Math.round(result.requests.average),
    p99_ms: result.latency.p99,
    non_2xx: result.non2xx,
    errors: result.errors,
  };
  await stop(child);
}

/**
 * Wake-up latency: from just before the turn-ending script is sent to Redis until the long-poll's
 * response has arrived. `single`: turns end one at a time (2 ms apart) while 50 long-polls are
 * held; `burst`: 50 turns end at the same instant.
 */
async function benchWake() {
  enterPhase('wake');
  const { base, child } = await startApi(18303);
  const single = [];
  const burst = [];
  for (let round = 0; round < 20; round++) {
    const sessions = await runningSessions(base, 50);
    const arrived = new Map();
    const done = sessions.map(({ id }) =>
      call(base, 'GET', `/sessions/${id}?wait=true&timeout=30`).then((res) => {
        arrived.set(id, performance.now());
        if (res.body.status !== 'idle') throw new Error(`long-poll answered ${res.body.status}`);
      }),
    );
    await sleep(200);
    const started = new Map();
    const asBurst = round % 2 === 1;
    if (asBurst) {
      await Promise.all(sessions.map((session) => (started.set(session.id, performance.now()), finish(session))));
    } else {
      for (const session of sessions) {
        started.set(session.id, performance.now());
        await finish(session);
        await sleep(2);
      }
    }
    await Promise.all(done);
    for (const { id } of sessions) (asBurst ? burst : single).push(arrived.get(id) - started.get(id));
  }
  const summary = (values) => {
    values.sort((a, b) => a - b);
    return {
      samples: values.length,
      p50_ms: +percentile(values, 50).toFixed(2),
      p99_ms: +percentile(values, 99).toFixed(2),
      max_ms: +values[values.length - 1].toFixed(2),
    };
  };
  results.wake = { single: summary(single), burst_of_50: summary(burst) };
  await stop(child);
}

function rssMb(pid) {
  return import('node:fs').then((fs) => {
    const match = /VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Math.round(Number(match[1]) / 1024) : null;
  });
}

async function benchHold() {
  enterPhase('hold');
  const { base, child } = await startApi(18304);
  const sessions = await runningSessions(base, waiterCount);
  const rssBefore = await rssMb(child.pid);
  let answered = 0;
  let broken = 0;
  let sent = 0;
  const arrivals = [];
  const done = [];
  // Opened in batches so the listen backlog is not flooded; every one stays open until its turn ends.
  for (let i = 0; i < sessions.length; i += 500) {
    for (const { id } of sessions.slice(i, i + 500)) {
      done.push(
        call(base, 'GET', `/sessions/${id}?wait=true&timeout=300`, undefined, {
          ownConnection: true,
          onSent: () => sent++,
        }).then(
          (res) => {
            answered++;
            arrivals.push(performance.now());
            return res;
          },
          (err) => {
            broken++;
            return { status: 0, body: null, error: err };
          },
        ),
      );
    }
    await sleep(20);
  }
  const opening = performance.now();
  while (sent < waiterCount && performance.now() - opening < 60_000) await sleep(50);
  const allSentMs = Math.round(performance.now() - opening);
  await sleep(3000);
  const heldAfter3s = waiterCount - answered - broken;
  const rssHeld = await rssMb(child.pid);
  const started = performance.now();
  await pool(sessions.length, 200, (i) => finish(sessions[i]));
  const finishedMs = performance.now() - started;
  const responses = await Promise.all(done);
  results.hold = {
    waiters: waiterCount,
    all_requests_sent_in_ms: allSentMs,
    held_3s_later: heldAfter3s,
    api_rss_mb_before: rssBefore,
    api_rss_mb_holding: rssHeld,
    turns_ended_in_ms: Math.round(finishedMs),
    all_answered_in_ms: Math.round(performance.now() - started),
    answered_p50_ms: Math.round(
      percentile(
        arrivals.sort((a, b) => a - b),
        50,
      ) - started,
    ),
    answered_p90_ms: Math.round(percentile(arrivals, 90) - started),
    answered_idle: responses.filter((res) => res.status === 200 && res.body.status === 'idle').length,
    connection_errors: responses.filter((res) => res.error).length,
  };
  await stop(child);
}

async function benchTurns() {
  enterPhase('turns');
  const { base, child } = await startApi(18305);
  const worker = spawnProcess('main-worker.ts', 0, {
    AGENT_MODULE: path.join(serviceDir, 'src', 'agents', 'echo.agent.ts'),
    WORKER_CONCURRENCY: '4',
  });
  for (let i = 0; i < 300; i++) {
    if ((await call(base, 'GET', '/health')).body.max_workers >= 4) break;
    await sleep(100);
  }
  const clients = 32;
  const ids = await pool(clients, clients, async () => (await call(base, 'POST', '/sessions')).body.session_id);
  let completed = 0;
  let failed = 0;
  const latencies = [];
  const deadline = performance.now() + durationSeconds * 1000;
  await Promise.all(
    ids.map(async (id) => {
      while (performance.now() < deadline) {
        const started = performance.now();
        const sent = await call(base, 'POST', `/sessions/${id}/messages`, { content: 'ping' });
        if (sent.status !== 202) {
          failed++;
          continue;
        }
        const res = await call(base, 'GET', `/sessions/${id}?wait=true&timeout=30`);
        if (res.body.status === 'idle') completed++;
        else failed++;
        latencies.push(performance.now() - started);
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  results.turns = {
    clients,
    per_second: Math.round(completed / durationSeconds),
    failed,
    p50_ms: +percentile(latencies, 50).toFixed(2),
    p99_ms: +percentile(latencies, 99).toFixed(2),
  };
  await stop(worker);
  await stop(child);
}

async function deletePrefix() {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 5000);
    if (keys.length > 0) await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
}

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    for (const child of children) child.kill('SIGKILL');
    process.exit(1);
  });
}

const phases = { memory: benchMemory, creates: benchCreates, wake: benchWake, hold: benchHold, turns: benchTurns };
try {
  for (const [name, run] of Object.entries(phases)) {
    if (!only.has(name)) continue;
    try {
      await run();
    } catch (err) {
      results[name] = { failed: `${err.code ?? ''} ${err.message}`.trim(), stack: err.stack };
      for (const child of children) await stop(child);
    }
  }
  console.log(JSON.stringify(results, null, 2));
} finally {
  for (const child of children) await stop(child);
  agent.destroy();
  await deletePrefix();
  await redis.quit();
}
