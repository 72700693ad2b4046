import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import request from 'supertest';
import {
  createAccountStore,
  createKeyAuthenticator,
  type AccountStore,
  type KeyAuthenticator,
} from '@tollway/accounts';
import { createLogger } from '@tollway/service-kit';
import { startWorker, type RunningWorker } from '../../src/worker/start-worker';
import { deleteKeys, startReplica, testPrefix, type ApiReplica } from '../api/api-harness';
import { startGatewayProcess, startTestWorker, testWorkerConfig, waitFor, type GatewayProcess } from './worker-harness';

/**
 * Agent turns are billed to the organization that owns the session: the worker calls the real
 * gateway with a service key (`SERVICE_API_KEYS`) and names the session's organization, so one
 * organization's turns meet its own budgets and credit and never spend another's.
 */
const prefix = testPrefix();
const serviceKey = `svc-${randomBytes(30).toString('base64url')}`;
const budgets = { requests: 100, input_tokens: 100_000, output_tokens: 100_000 };
let gateway: GatewayProcess;
let redis: Redis;
let accounts: AccountStore;
let authenticator: KeyAuthenticator;
let api: ApiReplica;
let worker: RunningWorker;

beforeAll(async () => {
  gateway = await startGatewayProcess(prefix, { SERVICE_API_KEYS: serviceKey });
  redis = new Redis('redis://127.0.0.1:6379');
  accounts = createAccountStore({ redis, prefix });
  authenticator = createKeyAuthenticator({ redis, prefix });
  await authenticator.ready();
  api = await startReplica(prefix, { authenticator });
  worker = await startTestWorker(prefix, { GATEWAY_BASE_URL: gateway.baseUrl, GATEWAY_API_KEY: serviceKey });
}, 40_000);

afterAll(async () => {
  await worker?.close();
  await api?.close();
  await authenticator?.close();
  await gateway?.stop();
  await redis?.quit();
  await deleteKeys(prefix);
});

async function organization(credit: number): Promise<{ orgId: string; key: string }> {
  const org = await accounts.createOrganization({ name: 'sessions', budgets, credit });
  return { orgId: org.id, key: (await accounts.createKey(org.id))!.key };
}

/** Creates a session with `key`, sends one message and waits for the turn to end. */
async function runTurn(key: string): Promise<{ status: string; error: string | null }> {
  const auth = { authorization: `Bearer ${key}` };
  const created = await request(api.app).post('/sessions').set(auth).send({});
  expect(created.status).toBe(201);
  const id = created.body.session_id as string;
  const sent = await request(api.app)
    .post(`/sessions/${id}/messages`)
    .set(auth)
    .send({ content: 'Tell me about rivers.', user_params: { max_tokens: 8 } });
  expect(sent.status).toBe(202);
  const done = await request(api.app).get(`/sessions/${id}?wait=true&timeout=15`).set(auth);
  return done.body as { status: string; error: string | null };
}

async function billed(orgId: string): Promise<{ requests: number; tokens: number }> {
  const usage = await accounts.getUsage(orgId);
  const totals = usage?.totals;
  return { requests: totals?.requests ?? 0, tokens: (totals?.input_tokens ?? 0) + (totals?.output_tokens ?? 0) };
}

it("bills each organization's turns to that organization, not to the session service", async () => {
  const a = await organization(10);
  const b = await organization(10);
  expect((await runTurn(a.key)).status).toBe('idle');
  const afterA = await waitFor(async () => {
    const usage = await billed(a.orgId);
    return usage.requests >= 1 ? usage : undefined;
  });
  expect(afterA.tokens).toBeGreaterThan(0);
  expect(await billed(b.orgId)).toEqual({ requests: 0, tokens: 0 });
  expect((await runTurn(b.key)).status).toBe('idle');
  await waitFor(async () => (await billed(b.orgId)).requests >= 1);
  expect((await billed(a.orgId)).requests).toBe(afterA.requests);
});

it("an organization without credit gets its own 402 as the turn's error; no one else pays for it", async () => {
  const broke = await organization(0);
  const done = await runTurn(broke.key);
  expect(done.status).toBe('error');
  expect(done.error).toMatch(/run out of credit/);
  expect(await billed(broke.orgId)).toEqual({ requests: 0, tokens: 0 });
});

it("warns at start when its gateway key is an organization's key, which cannot act for other organizations", async () => {
  const warnings: string[] = [];
  const logger = createLogger({ service: 'billing-e2e', silent: true });
  const warn = logger.warn.bind(logger);
  logger.warn = ((message: string, ...rest: unknown[]) => {
    warnings.push(message);
    return warn(message, ...rest);
  }) as typeof logger.warn;
  const { key } = await organization(1);
  const misconfigured = await startWorker(testWorkerConfig(prefix, { GATEWAY_API_KEY: key }), { logger });
  await misconfigured.close();
  expect(warnings.filter((message) => message.includes('SERVICE_API_KEYS'))).toHaveLength(1);
});
