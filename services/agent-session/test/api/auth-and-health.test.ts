import { brotliCompressSync } from 'node:zlib';
import { Redis } from 'ioredis';
import request from 'supertest';
import {
  createAccountStore,
  createKeyAuthenticator,
  deleteOrganizationRecord,
  type KeyAuthenticator,
} from '@tollway/accounts';
import { HealthResponse } from '@tollway/contracts';
import { sessionKeys } from '../../src/store/session-keys';
import { WorkerRegistration } from '../../src/worker/worker-registry';
import { deleteKeys, startReplica, testPrefix, type ApiReplica } from './api-harness';

const prefix = testPrefix();
const budgets = { requests: 100, input_tokens: 1000, output_tokens: 1000 };
let redis: Redis;
let authenticator: KeyAuthenticator;
let api: ApiReplica;
let keyA: string;
let keyB: string;
let adminKeyA: string;

beforeAll(async () => {
  redis = new Redis('redis://127.0.0.1:6379');
  const accounts = createAccountStore({ redis, prefix });
  const orgA = await accounts.createOrganization({ name: 'A', budgets, credit: 1 });
  const orgB = await accounts.createOrganization({ name: 'B', budgets, credit: 1 });
  keyA = (await accounts.createKey(orgA.id))!.key;
  keyB = (await accounts.createKey(orgB.id))!.key;
  adminKeyA = (await accounts.createKey(orgA.id, 'admin', 'admin'))!.key;
  authenticator = createKeyAuthenticator({ redis, prefix });
  await authenticator.ready();
  api = await startReplica(prefix, { authenticator });
});

afterAll(async () => {
  await authenticator.close();
  await api.close();
  await redis.quit();
  await deleteKeys(prefix);
});

const as = (key: string) => ({ Authorization: `Bearer ${key}` });

describe('inbound auth (on by default)', () => {
  it('answers 401 without a key, with a malformed header and with an unknown key', async () => {
    for (const headers of [
      {},
      { Authorization: keyA },
      { Authorization: 'Bearer tw-unknown-key-000000000000' },
      { Authorization: 'Basic abc' },
    ]) {
      const res = await request(api.app).post('/sessions').set(headers);
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('unauthorized');
      expect(res.headers['www-authenticate']).toBe('Bearer');
    }
    expect((await request(api.app).get('/sessions')).status).toBe(401);
  });

  it('asks for the key before it reads the body: no inflating or parsing for a caller without one', async () => {
    // 40 bytes of brotli that inflate to 10 MiB of JSON, and a body that is not JSON at all.
    const bomb = brotliCompressSync(Buffer.from(`[${'0,'.repeat(5 * 1024 * 1024 - 1)}0]`));
    const inflated = await request(api.app)
      .post('/sessions')
      .set({ 'content-type': 'application/json', 'content-encoding': 'br' })
      .send(bomb);
    expect([inflated.status, inflated.body.error.code]).toEqual([401, 'unauthorized']);
    const garbage = await request(api.app).post('/sessions').set('content-type', 'application/json').send('{not json');
    expect(garbage.status).toBe(401);
    // With the key, the same body is read and refused for what it is.
    const keyed = await request(api.app)
      .post('/sessions')
      .set({ ...as(keyA), 'content-type': 'application/json' })
      .send('{not json');
    expect([keyed.status, keyed.body.error.code]).toEqual([400, 'invalid_json']);
  });

  it("refuses an organization's admin key (it manages the organization; agents run with keys that call models)", async () => {
    for (const res of [
      await request(api.app).post('/sessions').set(as(adminKeyA)),
      await request(api.app).get('/sessions').set(as(adminKeyA)),
    ]) {
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('unauthorized');
    }
  });

  it("scopes sessions to the key's organization: another org's session is 404 and not listed", async () => {
    const created = await request(api.app).post('/sessions').set(as(keyA));
    expect(created.status).toBe(201);
    const id = created.body.session_id as string;
    expect((await request(api.app).get(`/sessions/${id}`).set(as(keyA))).status).toBe(200);

    for (const res of [
      await request(api.app).get(`/sessions/${id}`).set(as(keyB)),
      await request(api.app).get(`/sessions/${id}?wait=true`).set(as(keyB)),
      await request(api.app).get(`/sessions/${id}/messages`).set(as(keyB)),
      await request(api.app).post(`/sessions/${id}/messages`).set(as(keyB)).send({ content: 'x' }),
      await request(api.app).delete(`/sessions/${id}`).set(as(keyB)),
    ]) {
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('session_not_found');
    }
    // Nor can another organization create a session over it with PUT.
    const put = await request(api.app)
      .put(`/sessions/${id}`)
      .set(as(keyB))
      .send({ state: [{ role: 'user', content: 'taken over' }] });
    expect(put.status).toBeGreaterThanOrEqual(400);
    expect(put.status).toBeLessThan(500);
    expect((await request(api.app).get('/sessions').set(as(keyB))).body).toEqual([]);
    expect((await request(api.app).get('/sessions').set(as(keyA))).body).toEqual([
      { session_id: id, total_messages: 0, status: 'idle' },
    ]);
    expect((await request(api.app).get(`/sessions/${id}/messages`).set(as(keyA))).body).toEqual([]);
    expect((await request(api.app).post(`/sessions/${id}/messages`).set(as(keyA)).send({ content: 'x' })).status).toBe(
      202,
    );
    expect((await request(api.app).delete(`/sessions/${id}`).set(as(keyA))).status).toBe(204);
  });

  it('refuses the keys of an organization whose delete died before revoking them, cached or not', async () => {
    const accounts = createAccountStore({ redis, prefix });
    const org = await accounts.createOrganization({ name: 'Half deleted', budgets, credit: 1 });
    const key = (await accounts.createKey(org.id))!.key;
    expect((await request(api.app).get('/sessions').set(as(key))).status).toBe(200); // cached now
    // The delete's first step, and none of the revocations after it: the process was killed there.
    await deleteOrganizationRecord(redis, accounts.keys, org.id, Date.now());
    let status = 200;
    for (let tries = 0; tries < 100 && status === 200; tries++) {
      status = (await request(api.app).get('/sessions').set(as(key))).status;
    }
    expect(status).toBe(401);
    // A replica that never saw the key refuses it at once.
    const fresh = createKeyAuthenticator({ redis, prefix });
    await fresh.ready();
    const other = await startReplica(prefix, { authenticator: fresh });
    expect((await request(other.app).post('/sessions').set(as(key))).status).toBe(401);
    await other.close();
    await fresh.close();
  });

  it('asks for a key before it tells which methods a session path serves', async () => {
    const session = await request(api.app).post('/sessions').set(as(keyA));
    const path = `/sessions/${session.body.session_id as string}`;
    const anonymous = await request(api.app).patch(path);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.allow).toBeUndefined();
    expect((await request(api.app).options(path)).status).toBe(401);
    const refused = await request(api.app).patch(path).set(as(keyB));
    expect(refused.status).toBe(405);
    expect(refused.headers.allow).toBe('GET, HEAD, DELETE');
    expect((await request(api.app).options(path).set(as(keyA))).status).toBe(204);
  });

  it('leaves the health and description endpoints open', async () => {
    expect((await request(api.app).get('/health')).status).toBe(200);
    expect((await request(api.app).get('/healthz')).body).toEqual({ status: 'ok' });
    expect((await request(api.app).get('/readyz')).body).toEqual({ status: 'ready' });
    const openapi = await request(api.app).get('/openapi.json');
    expect(openapi.status).toBe(200);
    expect(openapi.body.paths['/sessions/{session_id}/messages']).toBeDefined();
  });
});

describe('GET /health', () => {
  it('reports live workers from the registry and the session count', async () => {
    const before = HealthResponse.parse((await request(api.app).get('/health')).body);
    const registration = new WorkerRegistration({ redis, prefix, workerId: 'w1', concurrency: 4, ttlMs: 10_000 });
    await registration.heartbeat();
    // A lease as a claim takes it, for a turn executing now.
    const leases = sessionKeys(prefix).leases;
    await redis.zadd(leases, Date.now() + 60_000, 's:t:o');
    await request(api.app).post('/sessions').set(as(keyB));
    try {
      const res = await request(api.app).get('/health');
      expect(res.status).toBe(200);
      expect(HealthResponse.parse(res.body)).toEqual({
        status: 'ok',
        max_workers: 4,
        running_workers: 1,
        total_sessions: before.total_sessions + 1,
      });
    } finally {
      await redis.zrem(leases, 's:t:o');
      await registration.deregister();
    }
  });
});
