import { Redis } from 'ioredis';
import request from 'supertest';
import { createAccountStore, createKeyAuthenticator, type KeyAuthenticator } from '@tollway/accounts';
import { createLogger } from '@tollway/service-kit';
import { startOrganizationPurge, type OrganizationPurge } from '../../src/store/organization-purge';
import { turnCancelChannel } from '../../src/store/session-store';
import { deleteKeys, startReplica, testPrefix, type ApiReplica } from './api-harness';

/**
 * A deleted organization's sessions go with it: at once on the deletion's message, and by the
 * reconciliation for a deletion whose message was missed. Real Redis, real accounts store, the
 * real API replica; sessions are made and sent to over HTTP (no worker: a sent turn stays running).
 */
const prefix = testPrefix();
const budgets = { requests: 100, input_tokens: 1000, output_tokens: 1000 };
const logger = createLogger({ service: 'organization-purge-test', silent: true });
let redis: Redis;
let subscriber: Redis;
let authenticator: KeyAuthenticator;
let api: ApiReplica;
const accounts = () => createAccountStore({ redis, prefix });
const purges: OrganizationPurge[] = [];

beforeAll(async () => {
  redis = new Redis('redis://127.0.0.1:6379');
  subscriber = new Redis('redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
  authenticator = createKeyAuthenticator({ redis, prefix });
  await authenticator.ready();
  api = await startReplica(prefix, { authenticator });
});

afterEach(async () => {
  await Promise.all(purges.splice(0).map((purge) => purge.stop()));
});

afterAll(async () => {
  await authenticator.close();
  await api.close();
  subscriber.disconnect();
  await redis.quit();
  await deleteKeys(prefix);
});

function purge(reconcileIntervalMs = 0, store = accounts()): Promise<OrganizationPurge> {
  return startOrganizationPurge({
    store: api.store,
    accounts: store,
    subscriber,
    prefix,
    reconcileIntervalMs,
    logger,
  }).then((started) => {
    purges.push(started);
    return started;
  });
}

/** An organization with a key and `count` sessions made through the API, each with one message in its history. */
async function organizationWithSessions(count: number): Promise<{ orgId: string; key: string; sessions: string[] }> {
  const org = await accounts().createOrganization({ name: 'purge', budgets, credit: 1 });
  const key = (await accounts().createKey(org.id))!.key;
  const sessions: string[] = [];
  for (let i = 0; i < count; i++) {
    const created = await request(api.app)
      .post('/sessions')
      .set('authorization', `Bearer ${key}`)
      .send({ state: [{ role: 'user', content: `secret ${i}` }] });
    expect(created.status).toBe(201);
    sessions.push(created.body.session_id as string);
  }
  return { orgId: org.id, key, sessions };
}

/** Whether anything of the session is left in Redis: its hash, its history. */
async function traces(sessionId: string): Promise<number> {
  return redis.exists(`${prefix}{sessions}:s:${sessionId}`, `${prefix}{sessions}:h:${sessionId}`);
}

async function eventually(check: () => Promise<boolean>, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

it("deletes a deleted organization's sessions and histories at once, and no one else's", async () => {
  await purge();
  const gone = await organizationWithSessions(3);
  const kept = await organizationWithSessions(2);
  expect(await accounts().deleteOrganization(gone.orgId)).toBe(true);
  await eventually(async () => (await Promise.all(gone.sessions.map(traces))).every((n) => n === 0));
  expect(await redis.exists(`${prefix}{sessions}:org:${gone.orgId}`)).toBe(0);
  for (const id of kept.sessions) expect(await traces(id)).toBe(2);
  const listed = await request(api.app).get('/sessions').set('authorization', `Bearer ${kept.key}`);
  expect(listed.body).toHaveLength(2);
  // /health counts what is left.
  const health = await request(api.app).get('/health');
  expect(health.body.total_sessions).toBeGreaterThanOrEqual(2);
  // An update publishes on the same channel: an organization that still exists keeps its sessions.
  await accounts().updateOrganization(kept.orgId, { name: 'renamed' });
  await new Promise((resolve) => setTimeout(resolve, 200));
  for (const id of kept.sessions) expect(await traces(id)).toBe(2);
});

it('cancels the running turn of a deleted organization’s session, as DELETE does', async () => {
  await purge();
  const gone = await organizationWithSessions(1);
  const [sessionId] = gone.sessions;
  const sent = await request(api.app)
    .post(`/sessions/${sessionId}/messages`)
    .set('authorization', `Bearer ${gone.key}`)
    .send({ content: 'run' });
  expect(sent.status).toBe(202);
  // A worker has the turn: the deletion tells it to stop.
  expect((await api.scheduler.claim(1, 60_000, false))[0]?.sessionId).toBe(sessionId);
  const cancels = new Redis('redis://127.0.0.1:6379');
  const cancelled: unknown[] = [];
  cancels.on('message', (_channel, message: string) => cancelled.push(JSON.parse(message)));
  await cancels.subscribe(turnCancelChannel(prefix));
  try {
    await accounts().deleteOrganization(gone.orgId);
    await eventually(async () => cancelled.length > 0);
    expect(cancelled[0]).toMatchObject({ session_id: sessionId });
    expect(await traces(sessionId!)).toBe(0);
  } finally {
    cancels.disconnect();
  }
});

it('finds the sessions of an organization deleted while no purge listened, at start and then periodically', async () => {
  const missedBeforeStart = await organizationWithSessions(2);
  await accounts().deleteOrganization(missedBeforeStart.orgId);
  const live = await organizationWithSessions(1);
  await purge(100);
  await eventually(async () => (await Promise.all(missedBeforeStart.sessions.map(traces))).every((n) => n === 0));
  expect(await traces(live.sessions[0]!)).toBe(2);
  // A deletion whose message nobody heard (published elsewhere, with no subscriber of this process).
  const missedLater = await organizationWithSessions(1);
  await redis.del(`${prefix}{org:${missedLater.orgId}}:org`);
  await eventually(async () => (await traces(missedLater.sessions[0]!)) === 0);
  expect(await traces(live.sessions[0]!)).toBe(2);
});

it('leaves the sessions alone while it cannot tell whether their organization exists', async () => {
  const unknown = await organizationWithSessions(1);
  await purge(50, {
    getOrganization: () => Promise.reject(new Error('Redis is unreachable')),
  } as unknown as ReturnType<typeof accounts>);
  await redis.publish(`${prefix}orgs:changed`, unknown.orgId);
  await new Promise((resolve) => setTimeout(resolve, 300));
  expect(await traces(unknown.sessions[0]!)).toBe(2);
});
