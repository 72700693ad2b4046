import { createHash, randomUUID } from 'node:crypto';
import express from 'express';
import request from 'supertest';
import { Redis } from 'ioredis';
import {
  createAccountStore,
  createKeyAuthenticator,
  deleteKeysWithPrefix,
  sessionSchedulerKeys,
} from '@tollway/accounts';
import {
  ApiKey,
  ApiKeyList,
  CreatedApiKey,
  Organization,
  OrganizationList,
  OrganizationUsage,
} from '@tollway/contracts';
import { createLogger, createRedis, errorMiddleware } from '@tollway/service-kit';
import { startPrivateRedis, startTcpLink, type PrivateRedis, type TcpLink } from '@tollway/service-kit/testing';
import { ADMIN_BASE_PATH, buildAdminRouter } from '../../src/routes/admin/admin.router';
import { RedisAdmission } from '../../src/admission/redis-admission';
import { redisFailureAs503 } from '../../src/app';
import { waitFor } from '../helpers/wait-for';

const prefix = `test-${randomUUID()}:`;
const redis = new Redis('redis://127.0.0.1:6379');
const store = createAccountStore({ redis, prefix });
const ADMIN_TOKEN = 'admin-secret-token';
const app = express();
app.use(ADMIN_BASE_PATH, buildAdminRouter({ store, adminToken: ADMIN_TOKEN }));
app.use(errorMiddleware(createLogger({ service: 'test', silent: true })));
const auth = { Authorization: `Bearer ${ADMIN_TOKEN}` };
const authenticator = createKeyAuthenticator({ redis, prefix });

afterAll(async () => {
  await authenticator.close();
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
});

describe('admin API guard', () => {
  it.each([undefined, 'Bearer wrong', 'Basic admin-secret-token', `Bearer ${ADMIN_TOKEN}x`])(
    'refuses Authorization %p with 401 and no code',
    async (header) => {
      const req = request(app).get('/admin/v1/organizations');
      const res = await (header ? req.set('Authorization', header) : req);
      expect(res.status).toBe(401);
      expect(res.body.error.type).toBe('invalid_request_error');
      expect(res.body.error).not.toHaveProperty('code');
    },
  );
});

describe('admin answers', () => {
  it('are never cached nor sniffed: no-store and nosniff on reads, writes and refusals alike', async () => {
    const org = await request(app)
      .post('/admin/v1/organizations')
      .set(auth)
      .send({ name: 'Headers', budgets: { requests: 1, input_tokens: 1, output_tokens: 1 } });
    const id = Organization.parse(org.body).id;
    const answers = [
      org,
      await request(app).get('/admin/v1/organizations').set(auth),
      await request(app).get(`/admin/v1/organizations/${id}/usage`).set(auth),
      await request(app).post(`/admin/v1/organizations/${id}/keys`).set(auth).send({}),
      await request(app).get(`/admin/v1/organizations/${id}/keys`).set(auth),
      await request(app).get('/admin/v1/organizations'),
      await request(app).get('/admin/v1/nowhere').set(auth),
    ];
    expect(answers.map((res) => res.status)).toEqual([201, 200, 200, 201, 200, 401, 404]);
    for (const res of answers) {
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
    }
  });
});

describe('unknown admin endpoints', () => {
  it('answer 404 not_found in the envelope, after the token check', async () => {
    const res = await request(app).delete('/admin/v1/keys/key_1').set(auth);
    expect(res.status).toBe(404);
    expect(res.body.error).toMatchObject({ code: 'not_found', type: 'invalid_request_error', param: null });
    expect(res.body.error.message).toContain('DELETE /keys/key_1');
    expect((await request(app).delete('/admin/v1/keys/key_1')).status).toBe(401);
  });
});

describe('organizations', () => {
  it('create, get, list, update (budgets, credit top-up), delete', async () => {
    const created = await request(app)
      .post('/admin/v1/organizations')
      .set(auth)
      .send({ name: 'Acme', budgets: { requests: 60, input_tokens: 1000, output_tokens: 500 }, credit: 10 });
    expect(created.status).toBe(201);
    const org = Organization.parse(created.body);
    expect(org).toMatchObject({ name: 'Acme', credit: 10, budgets: { requests: 60 } });
    expect(org.session_limits).toEqual({ sessions: null, running_turns: null, waiting_turns: null, weight: null });
    expect(created.body).not.toHaveProperty('turns');

    const full = {
      ...org,
      balances: {
        requests: { limit: 60, remaining: 60 },
        input_tokens: { limit: 1000, remaining: 1000 },
        output_tokens: { limit: 500, remaining: 500 },
      },
      turns: { sessions: 0, running: 0, waiting: 0 },
    };
    expect(Organization.parse((await request(app).get(`/admin/v1/organizations/${org.id}`).set(auth)).body)).toEqual(
      full,
    );
    const list = OrganizationList.parse((await request(app).get('/admin/v1/organizations').set(auth)).body);
    expect(list.data.map((o) => o.id)).toContain(org.id);

    const updated = await request(app)
      .patch(`/admin/v1/organizations/${org.id}`)
      .set(auth)
      .send({ budgets: { output_tokens: 900 }, credit_top_up: 5.5 });
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({
      budgets: { requests: 60, input_tokens: 1000, output_tokens: 900 },
      credit: 15.5,
    });

    const deleted = await request(app).delete(`/admin/v1/organizations/${org.id}`).set(auth);
    expect(deleted.body).toEqual({ object: 'organization.deleted', id: org.id, deleted: true });
    const gone = await request(app).get(`/admin/v1/organizations/${org.id}`).set(auth);
    expect(gone.status).toBe(404);
    expect(gone.body.error.code).toBe('organization_not_found');
    expect((await request(app).patch(`/admin/v1/organizations/${org.id}`).set(auth).send({ name: 'x' })).status).toBe(
      404,
    );
    expect((await request(app).delete(`/admin/v1/organizations/${org.id}`).set(auth)).status).toBe(404);
  });

  it('validates bodies with the contract schemas: 400 naming the field', async () => {
    const cases: Array<[unknown, string | null]> = [
      [{ name: 'A', budgets: { requests: -1, input_tokens: 1, output_tokens: 1 } }, 'budgets.requests'],
      [{ name: 'A', budgets: { requests: 1, input_tokens: 1 } }, 'budgets.output_tokens'],
      [{ budgets: { requests: 1, input_tokens: 1, output_tokens: 1 } }, 'name'],
      [{ id: 'bad id', name: 'A', budgets: { requests: 1, input_tokens: 1, output_tokens: 1 } }, 'id'],
      [{ name: 'A', budgets: { requests: 1, input_tokens: 1, output_tokens: 1 }, extra: 1 }, null],
    ];
    for (const [body, param] of cases) {
      const res = await request(app)
        .post('/admin/v1/organizations')
        .set(auth)
        .send(body as object);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_request');
      if (param) expect(res.body.error.param).toBe(param);
    }
    const broken = await request(app)
      .post('/admin/v1/organizations')
      .set(auth)
      .set('content-type', 'application/json')
      .send('{"name":');
    expect(broken.status).toBe(400);
    expect(broken.body.error.code).toBe('invalid_json');
    const empty = await request(app).patch('/admin/v1/organizations/whatever').set(auth).send({});
    expect(empty.status).toBe(400);
    // A JSON null is a body that is not an object, not "no body".
    for (const path of ['/admin/v1/organizations', '/admin/v1/organizations/whatever/keys']) {
      const nullBody = await request(app).post(path).set(auth).set('content-type', 'application/json').send('null');
      expect(nullBody.status).toBe(400);
      expect(nullBody.body.error.code).toBe('invalid_request');
    }
  });

  it('refuses a duplicate id with 409', async () => {
    const body = { id: `dup-${randomUUID()}`, name: 'A', budgets: { requests: 1, input_tokens: 1, output_tokens: 1 } };
    expect((await request(app).post('/admin/v1/organizations').set(auth).send(body)).status).toBe(201);
    const again = await request(app).post('/admin/v1/organizations').set(auth).send(body);
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('organization_exists');
  });

  it("refuses a deleted organization's id with 409 organization_id_retired: ids are not given out again", async () => {
    const body = { id: `gone-${randomUUID()}`, name: 'A', budgets: { requests: 1, input_tokens: 1, output_tokens: 1 } };
    expect((await request(app).post('/admin/v1/organizations').set(auth).send(body)).status).toBe(201);
    expect((await request(app).delete(`/admin/v1/organizations/${body.id}`).set(auth)).status).toBe(200);
    const again = await request(app)
      .post('/admin/v1/organizations')
      .set(auth)
      .send({ ...body, name: 'B' });
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: 'organization_id_retired', param: 'id' });
    expect(again.body.error.message).toContain(body.id);
    expect((await request(app).get(`/admin/v1/organizations/${body.id}`).set(auth)).status).toBe(404);
  });

  it('names the id an Idempotency-Key derives when that id is taken or retired', async () => {
    const key = `derived-${randomUUID()}`;
    const derived = `org_${createHash('sha256').update(`org:${key}`).digest('base64url').slice(0, 12).replace(/[-_]/g, 'x')}`;
    const budgets = { requests: 1, input_tokens: 1, output_tokens: 1 };
    const made = await request(app).post('/admin/v1/organizations').set(auth).send({ id: derived, name: 'A', budgets });
    expect(made.status).toBe(201);
    const taken = await request(app)
      .post('/admin/v1/organizations')
      .set(auth)
      .set('Idempotency-Key', key)
      .send({ name: 'B', budgets });
    expect([taken.status, taken.body.error.code]).toEqual([409, 'organization_exists']);
    expect(taken.body.error.message).toContain(`'${derived}'`);
    await request(app).delete(`/admin/v1/organizations/${derived}`).set(auth);
    const retired = await request(app)
      .post('/admin/v1/organizations')
      .set(auth)
      .set('Idempotency-Key', key)
      .send({ name: 'B', budgets });
    expect([retired.status, retired.body.error.code]).toEqual([409, 'organization_id_retired']);
    expect(retired.body.error.message).toContain(`'${derived}'`);
  });
});

describe('session limits', () => {
  const budgets = { requests: 1, input_tokens: 1, output_tokens: 1 };
  const defaults = { sessions: null, running_turns: null, waiting_turns: null, weight: null };
  const scheduler = sessionSchedulerKeys(prefix);
  const create = (body: object) =>
    request(app)
      .post('/admin/v1/organizations')
      .set(auth)
      .send({ name: 'Limits', budgets, ...body });
  const patch = (orgId: string, body: object, idempotencyKey?: string) => {
    const req = request(app).patch(`/admin/v1/organizations/${orgId}`).set(auth);
    return (idempotencyKey ? req.set('Idempotency-Key', idempotencyKey) : req).send(body);
  };
  const get = async (orgId: string) =>
    Organization.parse((await request(app).get(`/admin/v1/organizations/${orgId}`).set(auth)).body);

  it('are set on create, shown on every read with the live counts, changed in any subset, reset by null', async () => {
    const created = await create({ session_limits: { running_turns: 4, weight: 3 } });
    expect(created.status).toBe(201);
    const org = Organization.parse(created.body);
    expect(org.session_limits).toEqual({ ...defaults, running_turns: 4, weight: 3 });
    expect(await redis.hmget(store.keys.org(org.id), 'limit_running_turns', 'turn_weight')).toEqual(['4', '3']);

    // The session service's own keys, written as it keeps them: the reads show them as they are.
    await redis.zadd(scheduler.sessions(org.id), 1, 'sess_a', 2, 'sess_b');
    await redis.hset(scheduler.scheduler(org.id), { running: '4', waiting: '17' });
    const read = await get(org.id);
    expect(read.session_limits).toEqual({ ...defaults, running_turns: 4, weight: 3 });
    expect(read.turns).toEqual({ sessions: 2, running: 4, waiting: 17 });
    const listed = OrganizationList.parse((await request(app).get('/admin/v1/organizations').set(auth)).body).data;
    expect(listed.find((o) => o.id === org.id)).toMatchObject({
      session_limits: { running_turns: 4, weight: 3 },
      turns: { sessions: 2, running: 4, waiting: 17 },
    });

    const updated = await patch(org.id, { session_limits: { sessions: 1_000_000_000, weight: null } });
    expect(updated.status).toBe(200);
    expect(updated.body).not.toHaveProperty('turns');
    expect(Organization.parse(updated.body).session_limits).toEqual({
      ...defaults,
      sessions: 1_000_000_000,
      running_turns: 4,
    });
    expect(await redis.hexists(store.keys.org(org.id), 'turn_weight')).toBe(0);
    expect((await get(org.id)).budgets).toEqual(budgets);
    await patch(org.id, { session_limits: { sessions: null, running_turns: null } });
    expect((await get(org.id)).session_limits).toEqual(defaults);
  });

  it('refuse wrong types, numbers out of bounds, unknown limits and nesting: 400 naming the limit, nothing changed', async () => {
    const org = Organization.parse((await create({ session_limits: { weight: 2 } })).body);
    // The limits as JSON text, so a `__proto__` key reaches the server as a client would send it.
    const cases: Array<[string, string]> = [
      ['{"weight":0}', 'session_limits.weight'],
      ['{"weight":1001}', 'session_limits.weight'],
      ['{"weight":2.5}', 'session_limits.weight'],
      ['{"weight":"3"}', 'session_limits.weight'],
      ['{"weight":{"$gt":1}}', 'session_limits.weight'],
      ['{"running_turns":1000001}', 'session_limits.running_turns'],
      ['{"sessions":1e308}', 'session_limits.sessions'],
      ['{"sessions":1e309}', 'session_limits.sessions'],
      ['{"sessions":-1}', 'session_limits.sessions'],
      ['{"waiting_turns":9007199254740992}', 'session_limits.waiting_turns'],
      ['{"waiting_turns":[1]}', 'session_limits.waiting_turns'],
      ['{"turn_weight":3}', 'session_limits'],
      ['{"__proto__":{"weight":3}}', 'session_limits'],
      ['"default"', 'session_limits'],
      ['null', 'session_limits'],
    ];
    const send = (method: 'patch' | 'post', path: string, body: string) =>
      request(app)[method](path).set(auth).set('content-type', 'application/json').send(body);
    for (const [limits, param] of cases) {
      for (const res of [
        await send('patch', `/admin/v1/organizations/${org.id}`, `{"session_limits":${limits}}`),
        await send(
          'post',
          '/admin/v1/organizations',
          `{"name":"Refused","budgets":${JSON.stringify(budgets)},"session_limits":${limits}}`,
        ),
      ]) {
        expect([limits, res.status, res.body.error?.code, res.body.error?.param]).toEqual([
          limits,
          400,
          'invalid_request',
          param,
        ]);
      }
    }
    // Nested past the body's depth limit: refused before any schema.
    const deep = `{"session_limits":${'{"weight":'.repeat(40)}1${'}'.repeat(40)}}`;
    const nested = await request(app)
      .patch(`/admin/v1/organizations/${org.id}`)
      .set(auth)
      .set('content-type', 'application/json')
      .send(deep);
    expect(nested.status).toBe(400);
    expect((await get(org.id)).session_limits).toEqual({ ...defaults, weight: 2 });
    expect(
      OrganizationList.parse((await request(app).get('/admin/v1/organizations').set(auth)).body).data.filter(
        (o) => o.name === 'Refused',
      ),
    ).toEqual([]);
  });

  it('are in the idempotency fingerprint of an update: the same change replays, another is 422', async () => {
    const org = Organization.parse((await create({})).body);
    const key = randomUUID();
    expect((await patch(org.id, { session_limits: { waiting_turns: 50 } }, key)).status).toBe(200);
    const again = await patch(org.id, { session_limits: { waiting_turns: 50 } }, key);
    expect([again.status, again.headers['idempotent-replayed']]).toEqual([200, 'true']);
    for (const other of [{ waiting_turns: 51 }, { waiting_turns: null }, { weight: 50 }]) {
      const res = await patch(org.id, { session_limits: other }, key);
      expect([res.status, res.body.error.code]).toEqual([422, 'idempotency_key_reused']);
    }
    expect((await get(org.id)).session_limits).toEqual({ ...defaults, waiting_turns: 50 });
  });

  it("are the operator's to set: an organization admin reads its own limits and counts, and cannot change them", async () => {
    const withKeys = express();
    withKeys.use(ADMIN_BASE_PATH, buildAdminRouter({ store, adminToken: ADMIN_TOKEN, keys: authenticator }));
    withKeys.use(errorMiddleware(createLogger({ service: 'test', silent: true })));
    const mine = Organization.parse((await create({ session_limits: { sessions: 7 } })).body);
    const theirs = Organization.parse((await create({ session_limits: { sessions: 9 } })).body);
    const adminKey = (await store.createKey(mine.id, 'admin', 'admin'))!.key;
    const asAdmin = { Authorization: `Bearer ${adminKey}` };
    await redis.hset(scheduler.scheduler(mine.id), { running: '1' });

    const own = await request(withKeys).get(`/admin/v1/organizations/${mine.id}`).set(asAdmin);
    expect(own.status).toBe(200);
    expect(Organization.parse(own.body)).toMatchObject({
      session_limits: { ...defaults, sessions: 7 },
      turns: { sessions: 0, running: 1, waiting: 0 },
    });
    const raise = await request(withKeys)
      .patch(`/admin/v1/organizations/${mine.id}`)
      .set(asAdmin)
      .send({ session_limits: { sessions: 1_000_000 } });
    expect([raise.status, raise.body.error.code]).toEqual([403, 'permission_denied']);
    const another = await request(withKeys)
      .post('/admin/v1/organizations')
      .set(asAdmin)
      .send({ name: 'Mine too', budgets, session_limits: { weight: 1000 } });
    expect([another.status, another.body.error.code]).toEqual([403, 'permission_denied']);
    // Another organization's limits and counts are out of sight: answered as a missing one.
    const other = await request(withKeys).get(`/admin/v1/organizations/${theirs.id}`).set(asAdmin);
    expect([other.status, other.body.error.code]).toEqual([404, 'organization_not_found']);
    expect(JSON.stringify(other.body)).not.toContain('"sessions"');
    expect((await get(mine.id)).session_limits.sessions).toBe(7);
  });
});

describe('credit top-ups with Idempotency-Key', () => {
  async function newOrg(credit = 10): Promise<string> {
    const created = await request(app)
      .post('/admin/v1/organizations')
      .set(auth)
      .send({ name: 'Idem', budgets: { requests: 60, input_tokens: 1000, output_tokens: 500 }, credit });
    return Organization.parse(created.body).id;
  }
  const topUp = (orgId: string, key: string | null, body: object) => {
    const req = request(app).patch(`/admin/v1/organizations/${orgId}`).set(auth);
    return (key === null ? req : req.set('Idempotency-Key', key)).send(body);
  };
  const credit = async (orgId: string) =>
    Organization.parse((await request(app).get(`/admin/v1/organizations/${orgId}`).set(auth)).body).credit;

  it('applies the same top-up once and answers the replay with the organization as it is now', async () => {
    const orgId = await newOrg();
    const key = randomUUID();
    const first = await topUp(orgId, key, { credit_top_up: 5 });
    expect(first.status).toBe(200);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    expect(first.body.credit).toBe(15);
    const again = await topUp(orgId, key, { credit_top_up: 5 });
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(Organization.parse(again.body).credit).toBe(15);
    expect(await credit(orgId)).toBe(15);
    // Another key is another top-up; no key applies every time, as before.
    expect((await topUp(orgId, randomUUID(), { credit_top_up: 5 })).body.credit).toBe(20);
    expect((await topUp(orgId, null, { credit_top_up: 1 })).body.credit).toBe(21);
    expect((await topUp(orgId, null, { credit_top_up: 1 })).body.credit).toBe(22);
  });

  it('applies a top-up once when the same request is sent 20 times at once', async () => {
    const orgId = await newOrg(0);
    const key = randomUUID();
    const answers = await Promise.all(Array.from({ length: 20 }, () => topUp(orgId, key, { credit_top_up: 2.5 })));
    expect(answers.map((res) => res.status)).toEqual(Array(20).fill(200));
    expect(answers.filter((res) => res.headers['idempotent-replayed'] !== 'true')).toHaveLength(1);
    expect(await credit(orgId)).toBe(2.5);
  });

  it('refuses another update under a key already used: 422, nothing changed', async () => {
    const orgId = await newOrg();
    const key = randomUUID();
    await topUp(orgId, key, { credit_top_up: 5 });
    for (const body of [{ credit_top_up: 6 }, { credit_top_up: 5, name: 'renamed' }, { budgets: { requests: 1 } }]) {
      const res = await topUp(orgId, key, body);
      expect(res.status).toBe(422);
      expect(res.body.error).toMatchObject({
        type: 'invalid_request_error',
        code: 'idempotency_key_reused',
        param: 'Idempotency-Key',
      });
    }
    const org = Organization.parse((await request(app).get(`/admin/v1/organizations/${orgId}`).set(auth)).body);
    expect(org).toMatchObject({ name: 'Idem', credit: 15, budgets: { requests: 60 } });
    // The same key on another organization is another record.
    const other = await newOrg();
    expect((await topUp(other, key, { credit_top_up: 6 })).body.credit).toBe(16);
  });

  it('refuses a top-up that would take the credit past 1e12 either way: 400, nothing changed, no record kept', async () => {
    const orgId = await newOrg();
    await expect(topUp(orgId, null, { credit_top_up: -1e12 + 10 })).resolves.toMatchObject({ status: 200 });
    expect(await credit(orgId)).toBeCloseTo(-1e12 + 20, 2);
    const key = randomUUID();
    for (const [top, k] of [
      [-21, null],
      [-1e12, null],
      [-21, key],
    ] as const) {
      const res = await topUp(orgId, k, { credit_top_up: top });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({
        type: 'invalid_request_error',
        code: 'credit_out_of_range',
        param: 'credit_top_up',
      });
    }
    expect(await credit(orgId)).toBeCloseTo(-1e12 + 20, 2);
    // The refused request left no record: the key can make it once it fits.
    expect((await topUp(orgId, key, { credit_top_up: -20 })).status).toBe(200);
    expect(await credit(orgId)).toBeCloseTo(-1e12, 2);
    await expect(topUp(orgId, null, { credit_top_up: 1e12 })).resolves.toMatchObject({ status: 200 });
    await expect(topUp(orgId, null, { credit_top_up: 1e12 })).resolves.toMatchObject({ status: 200 });
    expect((await topUp(orgId, null, { credit_top_up: 0.01 })).body.error.code).toBe('credit_out_of_range');
    expect(await credit(orgId)).toBeCloseTo(1e12, 2);
  });

  it('refuses a key that is empty, too long or not printable ASCII: 400 naming the header', async () => {
    const orgId = await newOrg();
    for (const key of ['', 'x'.repeat(256), 'caf\u00e9', 'tab\there']) {
      const res = await topUp(orgId, key, { credit_top_up: 5 });
      expect([key.length, res.status]).toEqual([key.length, 400]);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'Idempotency-Key' });
    }
    expect((await topUp(orgId, 'x'.repeat(255), { credit_top_up: 5 })).status).toBe(200);
    expect(await credit(orgId)).toBe(15);
  });

  it('answers 404 for an organization that does not exist, and keeps no record for it', async () => {
    const key = randomUUID();
    expect((await topUp('org_missing', key, { credit_top_up: 5 })).status).toBe(404);
    const orgId = await newOrg();
    expect((await topUp(orgId, key, { credit_top_up: 5 })).body.credit).toBe(15);
  });
});

describe('creates with Idempotency-Key', () => {
  const create = (key: string | null, body: object) => {
    const req = request(app).post('/admin/v1/organizations').set(auth);
    return (key === null ? req : req.set('Idempotency-Key', key)).send(body);
  };
  const acme = { name: 'Once', budgets: { requests: 60, input_tokens: 1000, output_tokens: 500 }, credit: 10 };
  const listed = async (orgId: string) =>
    OrganizationList.parse((await request(app).get('/admin/v1/organizations').set(auth)).body).data.filter(
      (org) => org.id === orgId,
    ).length;

  it('creates once: the same create again answers the same organization, replayed', async () => {
    const key = randomUUID();
    const first = await create(key, acme);
    expect(first.status).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const org = Organization.parse(first.body);
    // Credit moves meanwhile: the replay shows the organization as it is now.
    await request(app).patch(`/admin/v1/organizations/${org.id}`).set(auth).send({ credit_top_up: 1 });
    const again = await create(key, acme);
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(Organization.parse(again.body)).toEqual({ ...org, credit: 11 });
    expect(await listed(org.id)).toBe(1);
    // Without a key, the same body makes another organization, as before.
    expect(Organization.parse((await create(null, acme)).body).id).not.toBe(org.id);
  });

  it('creates one organization when the same create is sent 20 times at once', async () => {
    const key = randomUUID();
    const answers = await Promise.all(Array.from({ length: 20 }, () => create(key, acme)));
    expect(answers.map((res) => res.status)).toEqual(Array(20).fill(201));
    expect(new Set(answers.map((res) => res.body.id)).size).toBe(1);
    expect(answers.filter((res) => res.headers['idempotent-replayed'] !== 'true')).toHaveLength(1);
    expect(await listed(answers[0]!.body.id)).toBe(1);
  });

  it('refuses another request under the key (422), a taken id (409) and a bad key (400)', async () => {
    const key = randomUUID();
    const org = Organization.parse((await create(key, acme)).body);
    for (const body of [
      { ...acme, credit: 11 },
      { ...acme, name: 'Other' },
      // Another organization under the same key, by an id of its own: refused too, nothing made.
      { ...acme, id: `other-${randomUUID()}` },
    ]) {
      const res = await create(key, body);
      expect([res.status, res.body.error.code]).toEqual([422, 'idempotency_key_reused']);
      if ('id' in body)
        expect((await request(app).get(`/admin/v1/organizations/${body.id}`).set(auth)).status).toBe(404);
    }
    // A key first used with an id of its own, then without one (or with another): refused.
    const namedFirst = randomUUID();
    expect((await create(namedFirst, { ...acme, id: `first-${randomUUID()}` })).status).toBe(201);
    for (const body of [acme, { ...acme, id: `second-${randomUUID()}` }]) {
      const res = await create(namedFirst, body);
      expect([res.status, res.body.error.code]).toEqual([422, 'idempotency_key_reused']);
    }
    // The key's record is the organization's: an update under it is another request too.
    const patch = await request(app)
      .patch(`/admin/v1/organizations/${org.id}`)
      .set(auth)
      .set('Idempotency-Key', key)
      .send({ credit_top_up: 1 });
    expect([patch.status, patch.body.error.code]).toEqual([422, 'idempotency_key_reused']);
    // An id given in the body: the key makes that create once; an id made otherwise stays 409.
    const id = `named-${randomUUID()}`;
    const named = { ...acme, id };
    expect((await create(key + '-named', named)).status).toBe(201);
    expect((await create(key + '-named', named)).headers['idempotent-replayed']).toBe('true');
    const taken = await create(randomUUID(), named);
    expect([taken.status, taken.body.error.code]).toEqual([409, 'organization_exists']);
    const bad = await create('x'.repeat(256), acme);
    expect([bad.status, bad.body.error.param]).toEqual([400, 'Idempotency-Key']);
    expect(
      OrganizationList.parse((await request(app).get('/admin/v1/organizations').set(auth)).body).data.filter(
        (o) => o.id === org.id,
      ),
    ).toHaveLength(1);
  });

  it('answers 404 to a create sent again after its organization was deleted, and does not make it again', async () => {
    const key = randomUUID();
    const org = Organization.parse((await create(key, acme)).body);
    await request(app).delete(`/admin/v1/organizations/${org.id}`).set(auth);
    const again = await create(key, acme);
    expect([again.status, again.body.error.code]).toEqual([404, 'organization_not_found']);
    expect((await request(app).get(`/admin/v1/organizations/${org.id}`).set(auth)).status).toBe(404);
  });
});

describe('keys and usage', () => {
  it('creates a working key shown once, lists it redacted, revokes it', async () => {
    const org = Organization.parse(
      (
        await request(app)
          .post('/admin/v1/organizations')
          .set(auth)
          .send({ name: 'Keys', budgets: { requests: 10, input_tokens: 10, output_tokens: 10 }, credit: 1 })
      ).body,
    );
    const created = await request(app).post(`/admin/v1/organizations/${org.id}/keys`).set(auth).send({ name: 'ci' });
    expect(created.status).toBe(201);
    const key = CreatedApiKey.parse(created.body);
    expect(key.key).toMatch(/^tw-/);
    expect(await authenticator.authenticate(key.key)).toEqual({ orgId: org.id, keyId: key.id, role: 'standard' });

    const list = ApiKeyList.parse((await request(app).get(`/admin/v1/organizations/${org.id}/keys`).set(auth)).body);
    expect(list.data).toHaveLength(1);
    expect(JSON.stringify(list)).not.toContain(key.key);
    expect(list.data[0]?.redacted).toBe(`tw-…${key.key.slice(-4)}`);

    const revoked = await request(app).delete(`/admin/v1/organizations/${org.id}/keys/${key.id}`).set(auth);
    expect(ApiKey.parse(revoked.body).revoked_at).not.toBeNull();
    expect(await authenticator.authenticate(key.key)).toBeNull();
    expect((await request(app).delete(`/admin/v1/organizations/other/keys/${key.id}`).set(auth)).status).toBe(404);
    expect((await request(app).post('/admin/v1/organizations/nope/keys').set(auth).send({})).status).toBe(404);
    expect((await request(app).get('/admin/v1/organizations/nope/keys').set(auth)).status).toBe(404);
  });

  it('refuses a key past MAX_KEYS_PER_ORGANIZATION live keys with 409 key_limit_reached, also when sent at once; a revoked key gives its place', async () => {
    const capped = express();
    const cappedStore = createAccountStore({ redis, prefix, maxKeysPerOrganization: 3 });
    capped.use(ADMIN_BASE_PATH, buildAdminRouter({ store: cappedStore, adminToken: ADMIN_TOKEN }));
    capped.use(errorMiddleware(createLogger({ service: 'test', silent: true })));
    const budgets = { requests: 10, input_tokens: 10, output_tokens: 10 };
    const org = await cappedStore.createOrganization({ name: 'Capped', budgets, credit: 1 });
    const keysOf = `/admin/v1/organizations/${org.id}/keys`;
    const made = [];
    for (let i = 0; i < 3; i++) made.push((await request(capped).post(keysOf).set(auth).send({})).body.id);
    const refused = await request(capped).post(keysOf).set(auth).send({ name: 'fourth' });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'key_limit_reached', type: 'invalid_request_error', param: null });
    expect(refused.body.error.message).toContain('holds 3 live API keys');
    expect(refused.body.error.message).toContain('MAX_KEYS_PER_ORGANIZATION');
    expect(ApiKeyList.parse((await request(capped).get(keysOf).set(auth)).body).data).toHaveLength(3);
    // Revoked, the first key gives its place to the next one, and is forgotten.
    await request(capped).delete(`${keysOf}/${made[0]}`).set(auth).expect(200);
    expect((await request(capped).post(keysOf).set(auth).send({ name: 'fourth' })).status).toBe(201);
    const listed = ApiKeyList.parse((await request(capped).get(keysOf).set(auth)).body).data;
    expect(listed.map((key) => key.id)).not.toContain(made[0]);
    expect(listed).toHaveLength(3);
    expect((await request(capped).delete(`${keysOf}/${made[0]}`).set(auth)).status).toBe(404);

    const burst = await cappedStore.createOrganization({ name: 'Burst', budgets, credit: 1 });
    const answers = await Promise.all(
      Array.from({ length: 12 }, () => request(capped).post(`/admin/v1/organizations/${burst.id}/keys`).set(auth)),
    );
    expect(answers.filter((res) => res.status === 201)).toHaveLength(3);
    expect(answers.filter((res) => res.status === 409)).toHaveLength(9);
  });

  it('reports usage recorded by settlement, per model and per minute', async () => {
    const org = Organization.parse(
      (
        await request(app)
          .post('/admin/v1/organizations')
          .set(auth)
          .send({ name: 'Usage', budgets: { requests: 10, input_tokens: 1000, output_tokens: 1000 }, credit: 1 })
      ).body,
    );
    const admission = new RedisAdmission({ redis, prefix });
    for (const model of ['a/one', 'a/one', 'b/two']) {
      const ticket = await admission.admit({
        principal: { orgId: org.id, keyId: 'k' },
        modelId: model,
        inputTokens: 5,
        reservedOutputTokens: 50,
        capacity: 4,
        pricePerMillion: { input: 1000, output: 2000 },
      });
      await ticket.settle({ prompt_tokens: 5, completion_tokens: 7 });
    }
    const res = await request(app).get(`/admin/v1/organizations/${org.id}/usage`).set(auth);
    const usage = OrganizationUsage.parse(res.body);
    expect(usage.totals).toEqual({ requests: 3, input_tokens: 15, output_tokens: 21, spend: 0.057 });
    expect(usage.by_model.map((m) => [m.model, m.requests])).toEqual([
      ['a/one', 2],
      ['b/two', 1],
    ]);
    expect(usage.by_minute.reduce((sum, m) => sum + m.requests, 0)).toBe(3);
    expect(usage.end - usage.start).toBe(3600);
    const minutes = async (query: string) =>
      request(app).get(`/admin/v1/organizations/${org.id}/usage?${query}`).set(auth);
    expect((await minutes('minutes=5')).body.end - (await minutes('minutes=5')).body.start).toBe(300);
    for (const query of [
      'minutes=0',
      'minutes=121',

      'minutes=0x10',
      'minutes=1e1',
      'minutes=%205',
      'minutes=',
      'minutes=5&minutes=6',
    ]) {
      const res = await minutes(query);
      expect([query, res.status, res.body.error?.param]).toEqual([query, 400, 'minutes']);
    }
    expect((await request(app).get('/admin/v1/organizations/nope/usage').set(auth)).status).toBe(404);
  });
});

describe('a lost answer and a Redis that does not answer', () => {
  // The gateway's own fail-fast connection (700 ms reply timeout; 1000 here, so a loaded machine
  // does not time out the calls the test does not break), through a link the test breaks, to a
  // Redis of this test's own: on the shared one, another test file's SCRIPT FLUSH (server-wide)
  // made a top-up's EVALSHA meet NOSCRIPT, whose lost answer left the script never run.
  let server: PrivateRedis;
  let link: TcpLink;
  let linked: Redis;
  let linkedApp: express.Express;
  /** The same admin API straight to that Redis, to see what it holds. */
  let direct: Redis;
  let directApp: express.Express;

  beforeAll(async () => {
    server = await startPrivateRedis();
    link = await startTcpLink(Number(new URL(server.url).port));
    linked = createRedis(`redis://127.0.0.1:${link.port}`, {
      name: 'admin-link',
      failFast: true,
      commandTimeoutMs: 1000,
    });
    direct = new Redis(server.url);
    const adminApp = (connection: Redis) => {
      const built = express();
      built.use(
        ADMIN_BASE_PATH,
        buildAdminRouter({ store: createAccountStore({ redis: connection, prefix }), adminToken: ADMIN_TOKEN }),
      );
      built.use(redisFailureAs503);
      built.use(errorMiddleware(createLogger({ service: 'test', silent: true })));
      return built;
    };
    linkedApp = adminApp(linked);
    directApp = adminApp(direct);
    await waitFor(() => linked.status === 'ready', 5_000);
  });

  afterAll(async () => {
    linked.disconnect();
    direct.disconnect();
    await link.close();
    await server.stop();
  });

  /** Breaks the link and waits for the client to have noticed and reconnected. */
  async function cutAndReconnect(): Promise<void> {
    link.cut();
    await waitFor(() => linked.status !== 'ready', 5_000);
    await waitFor(() => linked.status === 'ready', 5_000);
  }

  it('answers 503 service_unavailable with retry advice, never a 500', async () => {
    link.dropReplies();
    try {
      for (const send of [
        () => request(linkedApp).get('/admin/v1/organizations').set(auth),
        () => request(linkedApp).patch('/admin/v1/organizations/org_x').set(auth).send({ credit_top_up: 1 }),
        () => request(linkedApp).post('/admin/v1/organizations/org_x/keys').set(auth).send({}),
      ]) {
        const res = await send();
        expect(res.status).toBe(503);
        expect(res.body.error).toMatchObject({ type: 'server_error', code: 'service_unavailable' });
        expect(res.headers['retry-after']).toBe('1');
        expect(res.headers['x-should-retry']).toBe('true');
      }
    } finally {
      await cutAndReconnect();
    }
  });

  it('a create whose answer was lost leaves an organization listed if and only if it exists; sent again, it is created', async () => {
    const id = `lost-${randomUUID()}`;
    const create = () =>
      request(linkedApp)
        .post('/admin/v1/organizations')
        .set(auth)
        .send({ id, name: 'Lost create', budgets: { requests: 1, input_tokens: 1, output_tokens: 1 } });
    link.dropReplies();
    expect((await create()).status).toBe(503);
    await cutAndReconnect();
    const exists = (await request(directApp).get(`/admin/v1/organizations/${id}`).set(auth)).status === 200;
    const listed = async () =>
      OrganizationList.parse((await request(directApp).get('/admin/v1/organizations').set(auth)).body).data.filter(
        (org) => org.id === id,
      ).length;
    expect([exists, await listed()]).toEqual([exists, exists ? 1 : 0]);
    // Sent again with its id: created (or 409 if the first had been), and listed once.
    expect([201, 409]).toContain((await create()).status);
    expect(await listed()).toBe(1);
  });

  it('a create that got a 503 is sent again with its Idempotency-Key and made once', async () => {
    const key = randomUUID();
    const create = () =>
      request(linkedApp)
        .post('/admin/v1/organizations')
        .set(auth)
        .set('Idempotency-Key', key)
        .send({ name: 'Lost once', budgets: { requests: 1, input_tokens: 1, output_tokens: 1 }, credit: 3 });
    // Answers are lost from the first call on (the index's), so this create never went; the
    // replay of one that went is the test above, and the same script path.
    link.dropReplies();
    expect((await create()).status).toBe(503);
    await cutAndReconnect();
    const again = await create();
    expect(again.status).toBe(201);
    const before = OrganizationList.parse((await request(directApp).get('/admin/v1/organizations').set(auth)).body);
    expect(before.data.filter((org) => org.id === again.body.id)).toHaveLength(1);
    expect(again.body).toMatchObject({ name: 'Lost once', credit: 3 });
  });

  it('a top-up whose answer was lost is sent again with its Idempotency-Key and applied once', async () => {
    const created = await request(linkedApp)
      .post('/admin/v1/organizations')
      .set(auth)
      .send({ name: 'Lost', budgets: { requests: 60, input_tokens: 1000, output_tokens: 500 }, credit: 10 });
    const orgId = Organization.parse(created.body).id;
    const topUp = () =>
      request(linkedApp)
        .patch(`/admin/v1/organizations/${orgId}`)
        .set(auth)
        .set('Idempotency-Key', key)
        .send({ credit_top_up: 5 });
    const key = randomUUID();
    // Redis holds the update script (an update to the same name runs it): the top-up's EVALSHA
    // runs, with no NOSCRIPT to answer first.
    const rename = await request(linkedApp).patch(`/admin/v1/organizations/${orgId}`).set(auth).send({ name: 'Lost' });
    expect(rename.status).toBe(200);
    link.dropReplies();
    expect((await topUp()).status).toBe(503);
    // Redis applied it all the same: seen before the link breaks, not assumed.
    await waitFor(async () => Number(await direct.hget(store.keys.org(orgId), 'credit')) === 15, 5_000);
    await cutAndReconnect();
    const again = await topUp();
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.credit).toBe(15);
  });
});
