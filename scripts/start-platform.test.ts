/**
 * The quickstart end to end: `scripts/start-platform.mjs --dev` starts the gateway and the session
 * API (with its embedded worker) from sources on free ports, under a Redis prefix of its own.
 * The key it prints must work on both services, a turn must run through the worker and the
 * gateway, and Ctrl-C must stop everything.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
// The workspace root has no dependency on the packages: the helper is taken from its source.
import { freePort } from '../packages/service-kit/src/testing/free-port';

const SCRIPT = join(__dirname, 'start-platform.mjs');
const DEFAULT_CATALOG = join(__dirname, '..', 'services', 'inference-gateway', 'catalog', 'default.catalog.yaml');
const PREFIX = `test-${randomUUID()}:`;
const stateDir = mkdtempSync(join(tmpdir(), 'tollway-start-'));
const redis = new Redis('redis://127.0.0.1:6379', { maxRetriesPerRequest: 2 });

interface Platform {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

function startPlatform(env: Record<string, string>): Platform {
  const child = spawn(process.execPath, [SCRIPT, '--dev'], {
    env: { ...process.env, REDIS_PREFIX: PREFIX, TOLLWAY_STATE_DIR: stateDir, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => text, exited };
}

async function waitFor(platform: Platform, pattern: RegExp, timeoutMs: number): Promise<RegExpExecArray> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const match = pattern.exec(platform.output());
    if (match) return match;
    if (platform.child.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`no ${pattern} in the output:\n${platform.output()}`);
}

async function stop(platform: Platform, signal: NodeJS.Signals = 'SIGINT'): Promise<number | null> {
  if (platform.child.exitCode === null) platform.child.kill(signal);
  return platform.exited;
}

async function deleteByPrefix(prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    if (keys.length) await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
}

afterAll(async () => {
  await deleteByPrefix(PREFIX);
  await redis.quit();
  rmSync(stateDir, { recursive: true, force: true });
});

describe('pnpm dev (scripts/start-platform.mjs --dev)', () => {
  let platform: Platform;
  let gateway = '';
  let sessions = '';
  let key = '';

  beforeAll(async () => {
    const [gatewayPort, sessionsPort] = [await freePort(), await freePort()];
    gateway = `http://127.0.0.1:${gatewayPort}`;
    sessions = `http://127.0.0.1:${sessionsPort}`;
    // The default catalog and a model slow enough to be streaming when Ctrl-C comes.
    const catalog = join(stateDir, 'catalog.yaml');
    const slow = `
  - id: test/sim-slow
    owned_by: test
    created: 1767225600
    price_per_million: { input: 1, output: 1 }
    engine: { kind: simulated, time_to_first_token_ms: 5, time_per_output_token_ms: 100, ignore_eos: true }
`;
    writeFileSync(catalog, readFileSync(DEFAULT_CATALOG, 'utf8') + slow);
    platform = startPlatform({
      GATEWAY_PORT: String(gatewayPort),
      SESSIONS_PORT: String(sessionsPort),
      CATALOG_PATH: catalog,
    });
    key = (await waitFor(platform, /Dev API key\s+(tw-[A-Za-z0-9_-]{43})\b/, 60_000))[1]!;
  }, 70_000);

  afterAll(async () => {
    await stop(platform);
  });

  it('keeps the printed key in the state dir, readable by its owner only', () => {
    const file = join(stateDir, 'dev-key');
    expect(readFileSync(file, 'utf8').trim()).toBe(key);
    expect(statSync(file).mode & 0o077).toBe(0);
    expect(platform.output()).toContain(`export OPENAI_BASE_URL=${gateway}/v1`);
  });

  it('serves the console, whose printed admin token (kept owner-only in the state dir) signs in', async () => {
    const token = /Admin token\s+(\S+)/.exec(platform.output())?.[1];
    expect(readFileSync(join(stateDir, 'admin-token'), 'utf8').trim()).toBe(token);
    expect(statSync(join(stateDir, 'admin-token')).mode & 0o077).toBe(0);
    expect(platform.output()).toContain(`Console        ${gateway}/console/`);
    const page = await fetch(`${gateway}/console/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<div id="app"></div>');
    const signIn = await fetch(`${gateway}/console/api/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token }),
    });
    expect(signIn.status).toBe(201);
  });

  it('serves chat completions with the dev key, and 401 without it', async () => {
    const body = JSON.stringify({ model: 'tollway/sim-chat', messages: [{ role: 'user', content: 'Hello' }] });
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${key}` };
    const ok = await fetch(`${gateway}/v1/chat/completions`, { method: 'POST', body, headers });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { object: string }).object).toBe('chat.completion');
    const refused = await fetch(`${gateway}/v1/models`);
    expect(refused.status).toBe(401);
  });

  /** Creates a session with `sessionKey`, sends it a message and waits for the turn's end. */
  async function runTurn(
    sessionKey: string,
  ): Promise<{ status: string; response: { role: string } | null; error: string | null }> {
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${sessionKey}` };
    const created = await fetch(`${sessions}/sessions`, { method: 'POST', headers, body: '{}' });
    expect(created.status).toBe(201);
    const { session_id } = (await created.json()) as { session_id: string };
    const sent = await fetch(`${sessions}/sessions/${session_id}/messages`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ content: 'Hello' }),
    });
    expect(sent.status).toBe(202);
    const done = await fetch(`${sessions}/sessions/${session_id}?wait=true&timeout=20`, { headers });
    return (await done.json()) as { status: string; response: { role: string } | null; error: string | null };
  }

  it('runs a turn through the embedded worker and the gateway', async () => {
    const session = await runTurn(key);
    expect(session).toEqual(expect.objectContaining({ status: 'idle', error: null }));
    expect(session.response?.role).toBe('assistant');
  });

  it("bills another organization's agent turn to that organization (the worker's service key, kept owner-only)", async () => {
    expect(statSync(join(stateDir, 'service-key')).mode & 0o077).toBe(0);
    const token = /Admin token\s+(\S+)/.exec(platform.output())?.[1];
    const admin = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
    const org = await fetch(`${gateway}/admin/v1/organizations`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({
        name: 'Acme',
        budgets: { requests: 100, input_tokens: 100_000, output_tokens: 100_000 },
        credit: 5,
      }),
    });
    expect(org.status).toBe(201);
    const { id } = (await org.json()) as { id: string };
    const created = await fetch(`${gateway}/admin/v1/organizations/${id}/keys`, {
      method: 'POST',
      headers: admin,
      body: '{}',
    });
    expect(created.status).toBe(201);
    const acmeKey = ((await created.json()) as { key: string }).key;
    expect(await runTurn(acmeKey)).toEqual(expect.objectContaining({ status: 'idle', error: null }));
    let requests = 0;
    for (const deadline = Date.now() + 5000; requests === 0 && Date.now() < deadline;) {
      const usage = await fetch(`${gateway}/admin/v1/organizations/${id}/usage`, { headers: admin });
      requests = ((await usage.json()) as { totals: { requests: number } }).totals.requests;
      if (requests === 0) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(requests).toBeGreaterThan(0);
  });

  it('stops both services on Ctrl-C and exits 0, after letting a stream of 17 s finish', async () => {
    const res = await fetch(`${gateway}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({
        model: 'test/sim-slow',
        stream: true,
        max_tokens: 170,
        messages: [{ role: 'user', content: 'Tell me a long story' }],
      }),
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let text = new TextDecoder().decode((await reader.read()).value);
    // The gateway drains for SHUTDOWN_GRACE_MS less 5 s (25 s); the quickstart used to kill it at 15 s.
    const exited = stop(platform, 'SIGINT');
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
      text += new TextDecoder().decode(chunk.value);
    }
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    expect(await exited).toBe(0);
    await expect(fetch(`${gateway}/healthz`)).rejects.toThrow();
    await expect(fetch(`${sessions}/healthz`)).rejects.toThrow();
  });
});

describe('start-platform refusals', () => {
  it('refuses a port that is already taken, naming it', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
    const { port } = server.address() as { port: number };
    try {
      const platform = startPlatform({ GATEWAY_PORT: String(port), SESSIONS_PORT: String(await freePort()) });
      expect(await platform.exited).toBe(1);
      expect(platform.output()).toContain(`GATEWAY_PORT=${port} is not free`);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('refuses a state dir whose dev-key file is not a key', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollway-bad-key-'));
    try {
      writeFileSync(join(dir, 'dev-key'), 'not-a-key\n');
      const platform = startPlatform({
        TOLLWAY_STATE_DIR: dir,
        GATEWAY_PORT: String(await freePort()),
        SESSIONS_PORT: String(await freePort()),
      });
      expect(await platform.exited).toBe(1);
      expect(platform.output()).toContain('does not hold a dev key');
      expect(existsSync(join(dir, 'dev-key'))).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a start timeout that is not a number, and a state dir that is a file, in one line each', async () => {
    const ports = { GATEWAY_PORT: String(await freePort()), SESSIONS_PORT: String(await freePort()) };
    const timeout = startPlatform({ ...ports, START_TIMEOUT_MS: 'abc' });
    expect(await timeout.exited).toBe(1);
    expect(timeout.output().trim()).toBe(
      'start-platform: START_TIMEOUT_MS must be a whole number of ms above 0, got "abc"',
    );
    const file = join(mkdtempSync(join(tmpdir(), 'tollway-state-file-')), 'state');
    writeFileSync(file, 'not a folder\n');
    const state = startPlatform({ ...ports, TOLLWAY_STATE_DIR: file });
    expect(await state.exited).toBe(1);
    expect(state.output()).toMatch(/^start-platform: cannot keep .* \(TOLLWAY_STATE_DIR\): (EEXIST|ENOTDIR)\n$/);
  });
});
