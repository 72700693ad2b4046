import { randomUUID } from 'node:crypto';
import express from 'express';
import request from 'supertest';
import { Redis } from 'ioredis';
import { createAccountStore, createKeyAuthenticator, deleteKeysWithPrefix } from '@tollway/accounts';
import {
  ApiKey,
  ApiKeyList,
  CreatedApiKey,
  Organization,
  OrganizationList,
  OrganizationUsage,
} from '@tollway/contracts';
import { createLogger, errorMiddleware } from '@tollway/service-kit';
import { ADMIN_BASE_PATH, buildAdminRouter } from '../../src/routes/admin/admin.router';
import { RedisAdmission } from '../../src/admission/redis-admission';

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

    expect(Organization.parse((await request(app).get(`/admin/v1/organizations/${org.id}`).set(auth)).body)).toEqual(
      org,
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
    expect(await authenticator.authenticate(key.key)).toEqual({ orgId: org.id, keyId: key.id });

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
    expect((await request(app).get(`/admin/v1/organizations/${org.id}/usage?minutes=0`).set(auth)).status).toBe(400);
    expect((await request(app).get('/admin/v1/organizations/nope/usage').set(auth)).status).toBe(404);
  });
});
