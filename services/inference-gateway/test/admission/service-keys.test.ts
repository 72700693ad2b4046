import { randomBytes, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { createAccountStore, deleteKeysWithPrefix, type Budgets } from '@tollway/accounts';
import { RateLimitHeaders } from '@tollway/contracts';
import { createLogger } from '@tollway/service-kit';
import { wireAccounts } from '../../src/admission/accounts-wiring';
import { loadGatewayConfig } from '../../src/config';
import {
  catalogModels,
  errorOf,
  postSmallChat,
  startAccountsGateway,
  type AccountsGateway,
} from '../helpers/gateway-harness';

/**
 * Service keys (`SERVICE_API_KEYS`): the agent session service's workers call models for the
 * organization that owns the session, named in `x-tollway-organization`, and the gateway meters
 * that organization, over HTTP through the real wiring.
 */
const prefix = `test-${randomUUID()}:`;
const redis = new Redis('redis://127.0.0.1:6379');
const store = createAccountStore({ redis, prefix });
const SERVICE_KEY = `svc-${randomBytes(24).toString('base64url')}`;
const STATIC_KEY = 'static-key-0123456789';
const models = catalogModels([
  {
    id: 'test/fast',
    owned_by: 'test',
    created: 1,
    price_per_million: { input: 1, output: 2 },
    engine: { kind: 'simulated', time_to_first_token_ms: 0, time_per_output_token_ms: 0 },
  },
]);
let gateway: AccountsGateway;
let baseUrl: string;

beforeAll(async () => {
  gateway = await startAccountsGateway(models, redis, {
    REDIS_PREFIX: prefix,
    SERVICE_API_KEYS: SERVICE_KEY,
    API_KEYS: STATIC_KEY,
  });
  baseUrl = gateway.baseUrl;
});

afterAll(async () => {
  await gateway.close();
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
});

const LARGE: Budgets = { requests: 1000, input_tokens: 1_000_000, output_tokens: 1_000_000 };

async function organization(budgets: Partial<Budgets> = {}, credit = 100): Promise<{ orgId: string; key: string }> {
  const org = await store.createOrganization({ name: 'billed', budgets: { ...LARGE, ...budgets }, credit });
  return { orgId: org.id, key: (await store.createKey(org.id))!.key };
}

function chat(key: string, organizationHeader?: string, body: Record<string, unknown> = {}): Promise<Response> {
  const headers: Record<string, string> =
    organizationHeader === undefined ? {} : { 'x-tollway-organization': organizationHeader };
  return postSmallChat(baseUrl, key, body, { headers });
}

/** The organization's usage once `requests` requests are settled (or whatever is there after 3 s). */
async function requestsBilled(orgId: string, requests: number): Promise<number> {
  const deadline = Date.now() + 3000;
  for (;;) {
    const billed = (await store.getUsage(orgId))?.totals.requests ?? 0;
    if (billed >= requests || Date.now() > deadline) return billed;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The requests billed to an organization so far (for one that should have none: no waiting). */
async function billedNow(orgId: string): Promise<number> {
  return (await store.getUsage(orgId))?.totals.requests ?? 0;
}

/** A 401 in the spec's shape: the envelope, `invalid_request_error`, no `code`. */
async function expect401(res: Response, message: RegExp): Promise<void> {
  expect(res.status).toBe(401);
  const error = await errorOf(res);
  expect(error.type).toBe('invalid_request_error');
  expect(error).not.toHaveProperty('code');
  expect(error.message).toMatch(message);
}

describe('a service key acting for an organization', () => {
  it('is metered as that organization: its usage, its x-ratelimit headers, no one else billed', async () => {
    const billed = await organization({ requests: 10 });
    const bystander = await organization();
    const json = await chat(SERVICE_KEY, billed.orgId);
    expect(json.status).toBe(200);
    const headers = Object.fromEntries(json.headers.entries());
    expect(RateLimitHeaders.safeParse(headers).success).toBe(true);
    expect(headers['x-ratelimit-remaining-requests']).toBe('9');
    await json.text();
    const stream = await chat(SERVICE_KEY, billed.orgId, { stream: true });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('x-ratelimit-remaining-requests')).toBe('8');
    expect(await stream.text()).toContain('data: [DONE]');
    expect(await requestsBilled(billed.orgId, 2)).toBe(2);
    const usage = await store.getUsage(billed.orgId);
    expect(usage!.totals.input_tokens).toBeGreaterThan(0);
    expect(usage!.totals.output_tokens).toBeGreaterThan(0);
    expect(await billedNow(bystander.orgId)).toBe(0);
  });

  it("meets that organization's budgets and credit: 429 when its requests budget is spent, 402 without credit", async () => {
    const oneRequest = await organization({ requests: 1 });
    await (await chat(SERVICE_KEY, oneRequest.orgId)).text();
    const refused = await chat(SERVICE_KEY, oneRequest.orgId);
    expect(refused.status).toBe(429);
    expect(await errorOf(refused)).toMatchObject({ type: 'requests', code: 'rate_limit_exceeded' });
    const broke = await organization({}, 0);
    const unpaid = await chat(SERVICE_KEY, broke.orgId);
    expect(unpaid.status).toBe(402);
    expect(await errorOf(unpaid)).toMatchObject({ code: 'insufficient_quota' });
    expect(await billedNow(broke.orgId)).toBe(0);
  });

  it('lists models with the header (the express routes read it too)', async () => {
    const { orgId } = await organization();
    const res = await fetch(`${baseUrl}/v1/models`, {
      headers: { authorization: `Bearer ${SERVICE_KEY}`, 'x-tollway-organization': orgId },
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { data: unknown[] }).data.length).toBeGreaterThan(0);
  });
});

describe('refused with 401', () => {
  it('a service key without the header: it belongs to no organization (chat and models)', async () => {
    await expect401(await chat(SERVICE_KEY), /x-tollway-organization/);
    await expect401(
      await fetch(`${baseUrl}/v1/models`, { headers: { authorization: `Bearer ${SERVICE_KEY}` } }),
      /x-tollway-organization/,
    );
  });

  it.each([
    ['empty', ''],
    ['too long', 'o'.repeat(65)],
    ['with a space', 'org one'],
    ['two ids (a repeated header is joined)', 'org_a, org_b'],
    ['a path', '../org'],
  ])('a service key naming %s', async (_label, value) => {
    await expect401(await chat(SERVICE_KEY, value), /x-tollway-organization header: not an organization id/);
  });

  it('a service key naming an organization that does not exist (or no longer does)', async () => {
    await expect401(await chat(SERVICE_KEY, 'org_nobody'), /organization 'org_nobody': there is no such organization/);
    const gone = await organization();
    await store.deleteOrganization(gone.orgId);
    await expect401(await chat(SERVICE_KEY, gone.orgId), /no such organization/);
    // An organization key that outlived its organization is an invalid key, as a revoked one.
    await expect401(await chat(gone.key), /^Invalid API key provided/);
  });

  it('an organization key naming another organization: nothing is billed to either', async () => {
    const caller = await organization();
    const victim = await organization();
    await expect401(await chat(caller.key, victim.orgId), new RegExp(`organization '${victim.orgId}'`));
    await expect401(await chat(caller.key, victim.orgId, { stream: true }), /cannot act for it/);
    const models = await fetch(`${baseUrl}/v1/models`, {
      headers: { authorization: `Bearer ${caller.key}`, 'x-tollway-organization': victim.orgId },
    });
    expect(models.status).toBe(401);
    // Its own organization is what it would be billed to anyway: accepted.
    const own = await chat(caller.key, caller.orgId);
    expect(own.status).toBe(200);
    await own.text();
    expect(await requestsBilled(caller.orgId, 1)).toBe(1);
    // Settled after the refused requests, so theirs would be in by now.
    expect(await billedNow(victim.orgId)).toBe(0);
  });

  it('a static API_KEYS key naming an organization (it has none to act for)', async () => {
    const { orgId } = await organization();
    await expect401(await chat(STATIC_KEY, orgId), /cannot act for it/);
    const plain = await chat(STATIC_KEY);
    expect(plain.status).toBe(200);
    await plain.text();
  });
});

describe('configuration', () => {
  it('refuses service keys shorter than 32 characters or with spaces', () => {
    expect(() => loadGatewayConfig({ env: { SERVICE_API_KEYS: 'short' }, argv: [] })).toThrow(/32-256 printable/);
    expect(() =>
      loadGatewayConfig({ env: { SERVICE_API_KEYS: `${'a'.repeat(20)} ${'b'.repeat(20)}` }, argv: [] }),
    ).toThrow(/32-256 printable/);
    // Blanks between the items are trimmed; blanks around the whole value are refused, as for
    // every setting (service-kit's loadConfig).
    expect(
      loadGatewayConfig({ env: { SERVICE_API_KEYS: `${SERVICE_KEY} , ${'k'.repeat(32)}` }, argv: [] }).serviceApiKeys,
    ).toEqual([SERVICE_KEY, 'k'.repeat(32)]);
    expect(() => loadGatewayConfig({ env: { SERVICE_API_KEYS: ` ${SERVICE_KEY}` }, argv: [] })).toThrow(
      /SERVICE_API_KEYS: must not start or end with blanks/,
    );
  });

  it('refuses to start with a key that is both a service key and a static key', async () => {
    const config = loadGatewayConfig({
      env: { REDIS_PREFIX: prefix, SERVICE_API_KEYS: SERVICE_KEY, API_KEYS: `${STATIC_KEY},${SERVICE_KEY}` },
      argv: [],
    });
    const logger = createLogger({ service: 'service-keys-test', silent: true });
    await expect(wireAccounts(config, redis, logger)).rejects.toThrow(/SERVICE_API_KEYS/);
  });
});
