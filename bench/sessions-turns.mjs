#!/usr/bin/env node
// Agent-session turn throughput (issue 5's performance goal, ≥ 500 turns/s sustained): one API
// process and one worker process (concurrency 4) running the echo agent, which answers at once.
// Each client owns a session and loops send (POST /messages, 202) + completion (long-poll
// GET ?wait=true until idle); turns/s counts completed round trips, with their latency p50/p99.
// Usage: pnpm build && node bench/sessions-turns.mjs [--dist] [--seconds 10] [--clients 32]
//   (the build for service-kit's port picker)  --dist  runs the compiled service instead of the TypeScript sources.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { join } from 'node:path';
import { nodeArgs, quantile, startService, stopProcess } from './lib/processes.mjs';
import { benchArgs } from './lib/args.mjs';
import { freePort } from '../packages/service-kit/dist/testing/free-port.js';

const {
  dist: useDist,
  seconds,
  clients,
} = benchArgs('node bench/sessions-turns.mjs [--dist] [--seconds 10] [--clients 32]', {
  numbers: { seconds: 10, clients: 32 },
  flags: ['dist'],
});
const root = new URL('..', import.meta.url).pathname;
const serviceDir = join(root, 'services/agent-session');
const entry = (ts, js) => join(serviceDir, useDist ? js : ts);
const prefix = `bench-${randomUUID()}:`;

const agent = new http.Agent({ keepAlive: true, maxSockets: clients * 2 });

function call(port, method, path, body) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent,
        headers: payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {},
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
}

/** Starts the worker and resolves once it logs that it started. */
function startWorkerProcess(env) {
  return new Promise((resolve, reject) => {
    const file = entry('src/main-worker.ts', 'dist/main-worker.js');
    const child = spawn(process.execPath, nodeArgs(file), {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (data) => (stderr += data));
    let buffered = '';
    const readStartupLines = (data) => {
      buffered += data;
      if (buffered.includes('"worker started"')) {
        buffered = '';
        // The rest of its log is read and dropped, not gathered here for the whole run.
        child.stdout.off('data', readStartupLines);
        child.stdout.resume();
        resolve(child);
      }
    };
    child.stdout.on('data', readStartupLines);
    child.once('exit', (code) => reject(new Error(`worker exited with ${code}: ${stderr}`)));
  });
}

/** CPU seconds (user + system) used so far by `pid` and, with `withChildren`, its live children. */
function cpuSeconds(pid, withChildren = false) {
  const ticks = (id) => {
    try {
      const fields = readFileSync(`/proc/${id}/stat`, 'utf8').split(') ')[1].split(' ');
      return Number(fields[11]) + Number(fields[12]);
    } catch {
      return 0;
    }
  };
  let total = ticks(pid);
  if (withChildren) {
    try {
      for (const child of readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/)) {
        if (child) total += ticks(child);
      }
    } catch {
      // no /proc (not Linux): the figure is left out
    }
  }
  return total / 100;
}

async function clientLoop(port, deadline, latencies, errors) {
  const created = await call(port, 'POST', '/sessions', {});
  const id = created.body.session_id;
  while (Date.now() < deadline) {
    const started = performance.now();
    const sent = await call(port, 'POST', `/sessions/${id}/messages`, { content: 'ping' });
    if (sent.status !== 202) {
      errors.push(`send ${sent.status}`);
      continue;
    }
    const done = await call(port, 'GET', `/sessions/${id}?wait=true&timeout=10`);
    if (done.body?.status !== 'idle') errors.push(`turn ${done.body?.status}`);
    else latencies.push(performance.now() - started);
  }
}

const env = { REDIS_PREFIX: prefix, LOG_LEVEL: 'warn' };
let api;
let worker;
try {
  const port = await freePort();
  api = await startService(entry('src/main-api.ts', 'dist/main-api.js'), {
    args: ['--no-auth', '--port', String(port), '--host', '127.0.0.1', '--max-sessions', '100000'],
    env: { ...env, LOG_LEVEL: 'info' },
    cwd: serviceDir,
  });
  worker = await startWorkerProcess({
    ...env,
    LOG_LEVEL: 'info',
    WORKER_CONCURRENCY: '4',
    AGENT_MODULE: entry('src/agents/echo.agent.ts', 'dist/agents/echo.agent.js'),
  });

  // Warm-up: one second of traffic, not counted.
  await Promise.all(Array.from({ length: clients }, () => clientLoop(port, Date.now() + 1000, [], [])));
  const latencies = [];
  const errors = [];
  const cpuBefore = { api: cpuSeconds(api.child.pid), worker: cpuSeconds(worker.pid, true) };
  const started = Date.now();
  await Promise.all(
    Array.from({ length: clients }, () => clientLoop(port, started + seconds * 1000, latencies, errors)),
  );
  const elapsed = (Date.now() - started) / 1000;
  const cpuMsPerTurn = (before, after) =>
    Number(((1000 * (after - before)) / Math.max(1, latencies.length)).toFixed(2));
  const cpu = {
    api: cpuMsPerTurn(cpuBefore.api, cpuSeconds(api.child.pid)),
    worker_and_agent_processes: cpuMsPerTurn(cpuBefore.worker, cpuSeconds(worker.pid, true)),
  };
  latencies.sort((a, b) => a - b);
  console.log(
    JSON.stringify(
      {
        bench: 'sessions-turns',
        clients,
        worker_concurrency: 4,
        seconds: Number(elapsed.toFixed(2)),
        turns: latencies.length,
        turns_per_second: Math.round(latencies.length / elapsed),
        turn_latency_ms: {
          p50: Number(quantile(latencies, 0.5).toFixed(2)),
          p99: Number(quantile(latencies, 0.99).toFixed(2)),
        },
        errors: errors.length,
        cpu_ms_per_turn: cpu,
        goal_turns_per_second: 500,
      },
      null,
      2,
    ),
  );
} finally {
  agent.destroy();
  if (worker) await stopProcess(worker);
  if (api) await api.stop();
  const cleanup = spawn('redis-cli', ['--scan', '--pattern', `${prefix}*`], { stdio: ['ignore', 'pipe', 'ignore'] });
  let keys = '';
  cleanup.stdout.on('data', (data) => (keys += data));
  await new Promise((resolve) => cleanup.on('close', resolve));
  const list = keys.split('\n').filter(Boolean);
  for (let i = 0; i < list.length; i += 500) {
    await new Promise((resolve) =>
      spawn('redis-cli', ['del', ...list.slice(i, i + 500)], { stdio: 'ignore' }).on('close', resolve),
    );
  }
}
