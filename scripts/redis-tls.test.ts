/**
 * Every process on a managed-style Redis: TLS only (no plain port), signed by a private CA, a
 * client certificate required, and an ACL user instead of the default one. The CLI makes the
 * organization, a gateway answers a chat completion for its key, and a session's turn runs
 * through the session API, the worker and the gateway. Each process refuses to start on Redis
 * settings that do not fit together, naming the variable.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Redis } from 'ioredis';
import { createRedis } from '../packages/service-kit/src/redis';
import { startTlsRedis, type TlsRedis } from '../packages/service-kit/src/testing/redis-tls';
import { entryArgs, freshEntry, httpJson, runCli, SIM_MODEL, startPlatform, type Platform } from './platform-processes';

const PREFIX = 'tls-test:';
let server: TlsRedis;
let platform: Platform;
let redis: Redis;
let key: string;

beforeAll(async () => {
  server = await startTlsRedis({ name: 'tollway', password: 'tls:p@ss/word' });
  const env = { ...server.env, REDIS_PREFIX: PREFIX };
  const entry = freshEntry();
  const org = await runCli(env, ['orgs', 'create', '--name', 'TLS', '--credit', '100'], entry);
  key = String((await runCli(env, ['keys', 'create', String(org.id)], entry)).key);
  platform = await startPlatform({ env, workerKey: key, workerConcurrency: 1, entry });
  redis = createRedis(server.connection, { name: 'tls-test' });
}, 120_000);

afterAll(async () => {
  redis?.disconnect();
  await platform?.stop();
  await server?.stop();
});

it('a gateway answers a chat completion for a key the CLI made', async () => {
  const res = await httpJson(`${platform.gatewayUrls[0]}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: SIM_MODEL, messages: [{ role: 'user', content: 'Hello.' }], max_tokens: 4 }),
  });
  expect(res.status).toBe(200);
});

it('a turn runs through the session API, the worker and the gateway', async () => {
  const json = { 'content-type': 'application/json' };
  const created = await httpJson(`${platform.apiUrl}/sessions`, { method: 'POST', headers: json, body: '{}' });
  expect(created.status).toBe(201);
  const id = (created.body as { session_id: string }).session_id;
  const sent = await httpJson(`${platform.apiUrl}/sessions/${id}/messages`, {
    method: 'POST',
    headers: json,
    body: JSON.stringify({ content: 'Hello.', user_params: { max_tokens: 4 } }),
  });
  expect(sent.status).toBe(202);
  const done = await httpJson(`${platform.apiUrl}/sessions/${id}?wait=true&timeout=20`, {}, 30_000);
  expect(done.body).toMatchObject({ status: 'idle', error: null, response: { role: 'assistant' } });
});

it('every process is connected over TLS as the ACL user', async () => {
  const clients = (await redis.client('LIST')) as string;
  const names = new Set<string>();
  for (const line of clients.trim().split('\n')) {
    expect(line).toMatch(/ user=tollway /);
    names.add(/ name=(\S*)/.exec(line)?.[1] ?? '');
  }
  for (const name of ['gateway', 'gateway:admission', 'agent-session:api', 'agent-session:worker']) {
    expect(names).toContain(name);
  }
});

const execFileAsync = promisify(execFile);

it.each([
  ['gateway', 'services/inference-gateway', 'main'],
  ['CLI', 'services/inference-gateway', 'cli/main-cli'],
  ['session API', 'services/agent-session', 'main-api'],
  ['session worker', 'services/agent-session', 'main-worker'],
])(
  'the %s refuses to start on Redis settings that do not fit, naming the variable',
  async (_name, service, main) => {
    const args = [...entryArgs(service, main, freshEntry()), ...(main === 'cli/main-cli' ? ['orgs', 'list'] : [])];
    const env = { ...process.env, REDIS_URL: 'redis://127.0.0.1:1', REDIS_SENTINELS: '127.0.0.1:1' };
    const failed = await execFileAsync(process.execPath, args, { env, timeout: 60_000 }).then(
      () => null,
      (err: { code: number; stdout: string; stderr: string }) => err,
    );
    expect(failed?.code).toBe(1);
    expect(`${failed?.stdout}${failed?.stderr}`).toMatch(/REDIS_SENTINEL_NAME: is required with REDIS_SENTINELS/);
  },
  60_000,
);
