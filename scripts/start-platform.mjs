#!/usr/bin/env node
// The quickstart behind `pnpm start` (after `pnpm build`) and `pnpm dev` (`--dev`: from the
// TypeScript sources through tsx). Starts the inference gateway and the session API with an
// embedded worker against one Redis, prefixes their output, waits until both answer /readyz,
// then prints the URLs, the dev API key and the console's admin token. Ctrl-C stops both; if
// either dies, so does the other.
//
// Environment: GATEWAY_PORT (8080), SESSIONS_PORT (8081), REDIS_URL (redis://127.0.0.1:6379; or
// REDIS_SENTINELS and the rest of the Redis settings, passed on to the services as they are),
// DEV_API_KEY (default: read from or created in .tollway/dev-key), ADMIN_TOKEN (default: read from
// or created in .tollway/admin-token), SERVICE_API_KEY (the embedded worker's key for the gateway,
// which bills each turn to its session's organization; default: read from or created in
// .tollway/service-key), TOLLWAY_STATE_DIR (.tollway),
// START_TIMEOUT_MS (60000). Everything else in the environment is passed on to both services.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gatewayStartFlags } from './gateway-start-flags.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DEV = process.argv.includes('--dev');
const DEV_KEY_PATTERN = /^tw-[A-Za-z0-9_-]{43}$/;

const env = process.env;
const gatewayPort = port('GATEWAY_PORT', 8080);
const sessionsPort = port('SESSIONS_PORT', 8081);
const redisUrl = env.REDIS_URL || 'redis://127.0.0.1:6379';
const stateDir = resolve(ROOT, env.TOLLWAY_STATE_DIR || '.tollway');
const startTimeoutMs = positiveInteger('START_TIMEOUT_MS', 60_000);
// The gateway drains for up to its SHUTDOWN_GRACE_MS, then charges what it relayed; killing it
// sooner would cut streams without their closing event and lose their settlement.
const STOP_WAIT_MS = (Number(env.SHUTDOWN_GRACE_MS) || 30_000) + 5_000;
const useColor = process.stdout.isTTY && !env.NO_COLOR;

function fail(message) {
  console.error(`start-platform: ${message}`);
  process.exit(1);
}

function positiveInteger(name, fallback) {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value < 1) fail(`${name} must be a whole number of ms above 0, got "${raw}"`);
  return value;
}

function port(name, fallback) {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1 || value > 65535)
    fail(`${name} must be a port number (1-65535), got "${raw}"`);
  return value;
}

/**
 * A secret from the environment variable `name`, else from `.tollway/<file>` (created on first
 * start, readable by its owner only); `valid` checks what the file holds, `describe` names it.
 */
function secret(name, file, valid, describe, create) {
  if (env[name]) return env[name];
  const path = join(stateDir, file);
  if (existsSync(path)) {
    const value = readFileSync(path, 'utf8').trim();
    if (!valid(value)) fail(`${path} does not hold ${describe}; delete it to get a new one`);
    return value;
  }
  const value = create();
  try {
    mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    writeFileSync(path, `${value}\n`, { mode: 0o600 });
    chmodSync(path, 0o600);
  } catch (err) {
    fail(`cannot keep ${describe} in ${path} (TOLLWAY_STATE_DIR): ${err.code ?? err.message}`);
  }
  return value;
}

/** The dev organization's key: DEV_API_KEY, or .tollway/dev-key. */
function devKey() {
  return secret(
    'DEV_API_KEY',
    'dev-key',
    (value) => DEV_KEY_PATTERN.test(value),
    'a dev key (tw- + 43 base64url characters)',
    () => `tw-${randomBytes(32).toString('base64url')}`,
  );
}

/** The console's operator token: ADMIN_TOKEN, or .tollway/admin-token. */
function adminToken() {
  return secret(
    'ADMIN_TOKEN',
    'admin-token',
    (value) => value.length >= 16,
    'an admin token (16+ characters)',
    () => randomBytes(32).toString('base64url'),
  );
}

/**
 * The key the embedded worker calls the gateway with: SERVICE_API_KEY, or .tollway/service-key.
 * A service key: each turn is billed to the organization that owns its session (gateway README).
 */
function serviceKey() {
  return secret(
    'SERVICE_API_KEY',
    'service-key',
    (value) => /^[\x21-\x7e]{32,256}$/.test(value),
    'a service key (32-256 printable characters)',
    () => `tws-${randomBytes(32).toString('base64url')}`,
  );
}

/** From sources (`--dev`), the console is built once if it never was; `pnpm start` builds it with the rest. */
function ensureConsoleBuilt() {
  if (!DEV || existsSync(join(ROOT, 'packages', 'console', 'dist', 'index.html'))) return;
  console.log('start-platform: building the console (packages/console) once');
  execFileSync('pnpm', ['--filter', '@tollway/console', 'run', 'build'], { cwd: ROOT, stdio: 'ignore' });
}

/**
 * Resolves when a connection to Redis opens (a redis:// or rediss:// URL, or the path of a unix
 * socket, as the services take), rejects after one second otherwise.
 */
function probeRedis(url) {
  let address;
  if (url.startsWith('/')) address = { path: url };
  else {
    const { hostname, port: p } = new URL(url);
    address = { host: hostname.replace(/^\[|\]$/g, '') || '127.0.0.1', port: Number(p || 6379) };
  }
  return new Promise((ok, ko) => {
    const socket = connect(address);
    const timer = setTimeout(() => socket.destroy(new Error('timed out')), 1000);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.end();
      ok();
    });
    socket.once('error', (err) => {
      clearTimeout(timer);
      ko(err);
    });
  });
}

/** Resolves when nothing listens on `port` yet, so /readyz can only be answered by our services. */
function ensurePortFree(name, port) {
  return new Promise((ok) => {
    const server = createServer();
    server.once('error', (err) =>
      fail(`${name}=${port} is not free (${err.code ?? err.message}); stop what listens there or choose another port`),
    );
    server.listen(port, '0.0.0.0', () => server.close(() => ok()));
  });
}

/** Node arguments to run a service entry point: compiled JS, or TypeScript sources through tsx. */
function entry(pkgDir, builtFile, sourceFile) {
  if (DEV) return ['--conditions=@tollway/source', '--import', 'tsx', join(ROOT, pkgDir, sourceFile)];
  const file = join(ROOT, pkgDir, builtFile);
  if (!existsSync(file)) fail(`${file} is missing: run \`pnpm build\` first (or \`pnpm dev\` to run from sources)`);
  return [file];
}

const children = new Map();
let stopping = false;

function prefixLines(stream, label, color, target) {
  const tag = useColor ? `\x1b[${color}m${label}\x1b[0m ` : `${label} `;
  let pending = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk) => {
    const lines = (pending + chunk).split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) target.write(`${tag}${line}\n`);
  });
  stream.on('end', () => {
    if (pending) target.write(`${tag}${pending}\n`);
  });
}

function start(name, color, args, extraEnv) {
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { ...env, REDIS_URL: redisUrl, ...extraEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group: a terminal Ctrl-C reaches only this script, which forwards it once.
    // (A second SIGINT would skip the services' graceful shutdown.)
    detached: true,
  });
  const label = `[${name}]`.padEnd(11);
  prefixLines(child.stdout, label, color, process.stdout);
  prefixLines(child.stderr, label, color, process.stderr);
  children.set(name, child);
  child.on('exit', (code, signal) => {
    children.delete(name);
    if (!stopping) {
      console.error(`start-platform: ${name} exited (${signal ?? `code ${code}`}); stopping the platform`);
      stop(code || 1);
    } else if (children.size === 0) process.exit(process.exitCode ?? 0);
  });
  return child;
}

function stop(code, signal = 'SIGTERM') {
  if (stopping) return;
  stopping = true;
  process.exitCode = code;
  if (children.size === 0) process.exit(code);
  for (const child of children.values()) child.kill(signal);
  if (signal === 'SIGINT' || signal === 'SIGTERM') {
    console.error(
      `start-platform: stopping; requests in flight may take up to ${Math.round(STOP_WAIT_MS / 1000)} s (Ctrl-C again stops at once)`,
    );
  }
  // A child that ignores the signal does not keep the terminal hostage; one that drains is let be.
  setTimeout(() => killAll(code), STOP_WAIT_MS).unref();
}

function killAll(code) {
  for (const child of children.values()) child.kill('SIGKILL');
  process.exit(code);
}

async function waitReady(name, url, deadline) {
  while (Date.now() < deadline) {
    if (stopping) return false;
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      if (res.ok) return true;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  console.error(`start-platform: ${name} did not become ready at ${url} within ${startTimeoutMs} ms`);
  return false;
}

function banner(key, token) {
  const gateway = `http://127.0.0.1:${gatewayPort}`;
  const sessions = `http://127.0.0.1:${sessionsPort}`;
  const bold = (s) => (useColor ? `\x1b[1m${s}\x1b[0m` : s);
  console.log(`
${bold('Tollway is running.')}

  Inference API  ${gateway}/v1        (OpenAPI: ${gateway}/openapi.json)
  Session API    ${sessions}           (OpenAPI: ${sessions}/openapi.json)
  Dev API key    ${key}
                 (stored in ${join(stateDir, 'dev-key')}; keep it out of version control)
  Console        ${gateway}/console/
  Admin token    ${token}
                 (sign in to the console with it; stored in ${join(stateDir, 'admin-token')})

Try it:

  export OPENAI_BASE_URL=${gateway}/v1
  export OPENAI_API_KEY=${key}

  curl -s $OPENAI_BASE_URL/chat/completions -H "Authorization: Bearer $OPENAI_API_KEY" \\
    -H 'content-type: application/json' \\
    -d '{"model":"tollway/sim-chat","messages":[{"role":"user","content":"Hello"}]}'

  # with the openai SDK, in a project that has it (npm install openai):
  node --input-type=module -e "
    import OpenAI from 'openai';
    const client = new OpenAI();   // reads OPENAI_BASE_URL and OPENAI_API_KEY
    const reply = await client.chat.completions.create({
      model: 'tollway/sim-chat', messages: [{ role: 'user', content: 'Hello' }] });
    console.log(reply.choices[0].message.content);"

  curl -s -X POST ${sessions}/sessions -H "Authorization: Bearer $OPENAI_API_KEY"

Press Ctrl-C to stop.
`);
}

function gatewayFlags() {
  try {
    return gatewayStartFlags().flags;
  } catch (err) {
    return fail(err.message);
  }
}

async function main() {
  try {
    // Through Sentinel REDIS_URL's host is not used: the services find the primary themselves,
    // and /readyz says when they cannot.
    if (!env.REDIS_SENTINELS) await probeRedis(redisUrl);
  } catch (err) {
    fail(
      `Redis does not answer at ${redisUrl} (${err.message}). Start one, e.g. ` +
        '`redis-server --port 6379` or `docker compose up -d redis`, or set REDIS_URL.',
    );
  }
  await ensurePortFree('GATEWAY_PORT', gatewayPort);
  await ensurePortFree('SESSIONS_PORT', sessionsPort);
  const key = devKey();
  const token = adminToken();
  const service = serviceKey();
  ensureConsoleBuilt();
  const gatewayArgs = entry('services/inference-gateway', 'dist/main.js', 'src/main.ts');
  const sessionsArgs = entry('services/agent-session', 'dist/main-api.js', 'src/main-api.ts');

  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => (stopping ? killAll(130) : stop(0, signal)));
  process.on('exit', () => {
    for (const child of children.values()) child.kill('SIGKILL');
  });

  // The flags the gateway is deployed with (a small young generation, a tighter old one, the
  // collector on the main thread alone: see the gateway README, "Configuration").
  start('gateway', '36', [...gatewayFlags(), ...gatewayArgs], {
    GATEWAY_PORT: String(gatewayPort),
    DEV_API_KEY: key,
    ADMIN_TOKEN: token,
    SERVICE_API_KEYS: service,
  });
  start('sessions', '35', [...sessionsArgs, '--embedded-worker'], {
    SESSIONS_PORT: String(sessionsPort),
    DEV_API_KEY: key,
    GATEWAY_API_KEY: service,
    GATEWAY_BASE_URL: `http://127.0.0.1:${gatewayPort}/v1`,
  });

  const deadline = Date.now() + startTimeoutMs;
  const ready = await Promise.all([
    waitReady('gateway', `http://127.0.0.1:${gatewayPort}/readyz`, deadline),
    waitReady('sessions', `http://127.0.0.1:${sessionsPort}/readyz`, deadline),
  ]);
  if (stopping) return;
  if (!ready.every(Boolean)) return stop(1);
  banner(key, token);
}

await main();
