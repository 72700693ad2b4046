import type { Redis } from 'ioredis';
import request from 'supertest';
import { accountKeys, createAccountStore, readOrganizationTurns } from '@tollway/accounts';
import {
  deleteKeys,
  startAuthedReplica,
  startReplica,
  testPrefix,
  type ApiReplica,
  type AuthedReplica,
} from './api-harness';

/**
 * Each organization's own limits on the sessions it holds and the turns it has waiting, set in its
 * record (as the admin API, the CLI and the console write them), else the service's defaults; one
 * organization reaching its limits never moves another's. Real Redis, the real API, no worker (a
 * sent turn waits).
 */
const prefix = testPrefix();
let authed: AuthedReplica;
let api: ApiReplica;
let redis: Redis;

beforeAll(async () => {
  authed = await startAuthedReplica(prefix);
  ({ api, redis } = authed);
});

afterAll(async () => {
  await authed.close();
  await deleteKeys(prefix);
});

const organization = (fields?: Record<string, string>) => authed.organization(fields);

async function createSession(auth: string): Promise<request.Response> {
  return request(api.app).post('/sessions').set('authorization', auth).send({});
}

async function send(auth: string, id: string): Promise<request.Response> {
  return request(api.app).post(`/sessions/${id}/messages`).set('authorization', auth).send({ content: 'hi' });
}

it("refuses a session past the organization's own cap with 429, and leaves other organizations alone", async () => {
  const capped = await organization({ limit_sessions: '2' });
  const other = await organization();
  expect((await createSession(capped.auth)).status).toBe(201);
  expect((await createSession(capped.auth)).status).toBe(201);
  const refused = await createSession(capped.auth);
  expect(refused.status).toBe(429);
  expect(refused.body.error).toMatchObject({ code: 'organization_session_limit', type: 'rate_limit_error' });
  expect(refused.body.error.message).toContain('2 sessions');
  for (let i = 0; i < 3; i++) expect((await createSession(other.auth)).status).toBe(201);
  // A deletion makes room again.
  const [first] = (await request(api.app).get('/sessions').set('authorization', capped.auth)).body as Array<{
    session_id: string;
  }>;
  await request(api.app).delete(`/sessions/${first!.session_id}`).set('authorization', capped.auth).expect(204);
  expect((await createSession(capped.auth)).status).toBe(201);
});

it("refuses a send past the organization's limit of waiting turns with 429 and retry-after, changing nothing", async () => {
  const limited = await organization({ limit_waiting_turns: '2' });
  const other = await organization();
  const ids = await Promise.all(
    [1, 2, 3].map(async () => (await createSession(limited.auth)).body.session_id as string),
  );
  expect((await send(limited.auth, ids[0]!)).status).toBe(202);
  expect((await send(limited.auth, ids[1]!)).status).toBe(202);
  const refused = await send(limited.auth, ids[2]!);
  expect(refused.status).toBe(429);
  expect(refused.headers['retry-after']).toBe('1');
  expect(refused.headers['retry-after-ms']).toBe('1000');
  expect(refused.body.error).toMatchObject({ code: 'turn_queue_full', type: 'rate_limit_error', param: null });
  const session = await request(api.app).get(`/sessions/${ids[2]}`).set('authorization', limited.auth);
  expect(session.body.status).toBe('idle');
  expect((await request(api.app).get(`/sessions/${ids[2]}/messages`).set('authorization', limited.auth)).body).toEqual(
    [],
  );
  // Another organization still sends; a deleted waiting turn makes room.
  const otherId = (await createSession(other.auth)).body.session_id as string;
  expect((await send(other.auth, otherId)).status).toBe(202);
  await request(api.app).delete(`/sessions/${ids[0]}`).set('authorization', limited.auth).expect(204);
  expect((await send(limited.auth, ids[2]!)).status).toBe(202);
});

it('applies a changed limit at once on every replica: the change message drops the cached one', async () => {
  const changing = await organization({ limit_sessions: '1' });
  expect((await createSession(changing.auth)).status).toBe(201);
  expect((await createSession(changing.auth)).status).toBe(429);
  const accounts = createAccountStore({ redis, prefix });
  await redis.hset(accountKeys(prefix).org(changing.orgId), 'limit_sessions', '3');
  // As the account store does on every update: the organization's id on the change channel.
  await redis.publish(accountKeys(prefix).orgChangeChannel(), changing.orgId);
  let status = 0;
  for (let i = 0; i < 100 && status !== 201; i++) {
    status = (await createSession(changing.auth)).status;
    if (status !== 201) await new Promise((resolve) => setTimeout(resolve, 10));
  }
  expect(status).toBe(201);
  expect(await accounts.getOrganization(changing.orgId)).not.toBeNull();
});

it("a stored limit that is not a positive whole number falls back to the service's default", async () => {
  const odd = await organization({ limit_sessions: '0', limit_waiting_turns: 'lots', turn_weight: '-3' });
  expect(await authed.limits.limitsOf(odd.orgId)).toEqual({
    maxSessions: 0,
    maxRunningTurns: 0,
    maxWaitingTurns: 0,
    weight: 1,
  });
  for (let i = 0; i < 3; i++) expect((await createSession(odd.auth)).status).toBe(201);
});

it("with the defaults, the service's own cap still answers 503 as the spec says, whatever the organization", async () => {
  const smallPrefix = testPrefix();
  const small = await startReplica(smallPrefix, {
    authenticator: authed.authenticator,
    limits: authed.limits,
    maxSessions: 1,
  });
  try {
    const org = await organization();
    expect((await request(small.app).post('/sessions').set('authorization', org.auth).send({})).status).toBe(201);
    const refused = await request(small.app).post('/sessions').set('authorization', org.auth).send({});
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe('session_limit_reached');
  } finally {
    await small.close();
    await deleteKeys(smallPrefix);
  }
});

it("keeps the counts the admin API shows: an organization's sessions held, turns waiting and running", async () => {
  // A replica of its own: the turns a test worker claims here are this organization's.
  const ownPrefix = testPrefix();
  const own = await startAuthedReplica(ownPrefix);
  try {
    const org = await own.organization();
    const call = (method: 'post' | 'delete', path: string) =>
      request(own.api.app)[method](path).set('authorization', org.auth);
    const ids = await Promise.all(
      [1, 2, 3].map(async () => (await call('post', '/sessions').send({})).body.session_id),
    );
    for (const id of ids)
      expect((await call('post', `/sessions/${id}/messages`).send({ content: 'x' })).status).toBe(202);
    const counts = () => readOrganizationTurns(own.redis, ownPrefix, org.orgId);
    expect(await counts()).toEqual({ sessions: 3, running: 0, waiting: 3 });
    const claimed = await own.api.scheduler.claim(2, 10_000, false);
    expect(await counts()).toEqual({ sessions: 3, running: 2, waiting: 1 });
    await own.api.scheduler.finish(claimed[0]!, { kind: 'error', error: 'done' }, 0, 10_000);
    await call('delete', `/sessions/${ids[2]}`).expect(204);
    expect(await counts()).toEqual({ sessions: 2, running: 1, waiting: 0 });
  } finally {
    await own.close();
    await deleteKeys(ownPrefix);
  }
});
