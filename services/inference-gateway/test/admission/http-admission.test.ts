import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { Redis } from 'ioredis';
import { createAccountStore, deleteKeysWithPrefix, type Budgets } from '@tollway/accounts';
import { RateLimitHeaders } from '@tollway/contracts';
import type { AccountsWiring } from '../../src/admission/accounts-wiring';
import {
  catalogModels,
  errorOf,
  postSmallChat,
  startAccountsGateway,
  type AccountsGateway,
} from '../helpers/gateway-harness';

/** Every 401 / 402 / 429 row of the spec and the 200 headers, over HTTP, through the real wiring. */
const prefix = `test-${randomUUID()}:`;
const redis = new Redis('redis://127.0.0.1:6379');
const store = createAccountStore({ redis, prefix });
const simulated = (extra: Record<string, unknown> = {}) => ({
  kind: 'simulated',
  time_to_first_token_ms: 0,
  time_per_output_token_ms: 0,
  ...extra,
});
const models = catalogModels([
  { id: 'test/fast', owned_by: 'test', created: 1, price_per_million: { input: 1, output: 2 }, engine: simulated() },
  {
    id: 'test/single',
    owned_by: 'test',
    created: 1,
    capacity: 1,
    price_per_million: { input: 1, output: 2 },
    engine: simulated({ time_per_output_token_ms: 50 }),
  },
]);
let gateway: AccountsGateway;
let baseUrl: string;
let wiring: AccountsWiring;

beforeAll(async () => {
  gateway = await startAccountsGateway(models, redis, { REDIS_PREFIX: prefix, CAPACITY_RETRY_AFTER_MS: '1500' });
  ({ baseUrl, wiring } = gateway);
});

afterAll(async () => {
  await gateway.close();
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
});

const LARGE: Budgets = { requests: 1000, input_tokens: 1_000_000, output_tokens: 1_000_000 };

async function keyFor(
  budgets: Partial<Budgets> = {},
  credit = 100,
): Promise<{ orgId: string; key: string; keyId: string }> {
  const org = await store.createOrganization({ name: 'http', budgets: { ...LARGE, ...budgets }, credit });
  const created = await store.createKey(org.id);
  return { orgId: org.id, key: created!.key, keyId: created!.id };
}

function chat(key: string | null, body: Record<string, unknown> = {}, signal?: AbortSignal): Promise<Response> {
  return postSmallChat(baseUrl, key, body, { signal });
}

async function usageOf(orgId: string, requests: number) {
  const deadline = Date.now() + 3000;
  for (;;) {
    const usage = await store.getUsage(orgId);
    if ((usage?.totals.requests ?? 0) >= requests || Date.now() > deadline) return usage!;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('401', () => {
  it.each([
    ['missing', null],
    ['malformed', 'not-a-key'],
    ['unknown', `tw-${'x'.repeat(43)}`],
  ])('%s key → 401 envelope without code, on every endpoint', async (_label, key) => {
    for (const res of [
      await chat(key),
      await fetch(`${baseUrl}/v1/models`, { headers: key ? { authorization: `Bearer ${key}` } : {} }),
    ]) {
      expect(res.status).toBe(401);
      const error = await errorOf(res);
      expect(error.type).toBe('invalid_request_error');
      expect(error.message).toMatch(/API key/);
      expect(error).not.toHaveProperty('code');
    }
  });

  it('revoked key → 401', async () => {
    const { key, keyId } = await keyFor();
    expect((await chat(key)).status).toBe(200);
    await store.revokeKey(keyId);
    // The gateway learns of it over pub/sub, which may land just after the next request: the
    // README's bound is a second (milliseconds in practice; replicas.test.ts measures it).
    const revokedAt = Date.now();
    let res = await chat(key);
    while (res.status === 200 && Date.now() - revokedAt < 1000) {
      await res.text();
      await new Promise((resolve) => setTimeout(resolve, 10));
      res = await chat(key);
    }
    expect(res.status).toBe(401);
    expect(await errorOf(res)).not.toHaveProperty('code');
  });
});

describe('200', () => {
  it('carries the six x-ratelimit headers as the spec defines them', async () => {
    const { key } = await keyFor({ requests: 10, input_tokens: 1_000_000, output_tokens: 100 });
    const res = await chat(key, { max_tokens: 40 });
    expect(res.status).toBe(200);
    const headers = Object.fromEntries(res.headers.entries());
    expect(RateLimitHeaders.safeParse(headers).success).toBe(true);
    expect(headers['x-ratelimit-limit-requests']).toBe('10');
    expect(headers['x-ratelimit-remaining-requests']).toBe('9');
    expect(headers['x-ratelimit-reset-requests']).toBe('6s');
    // output (60 of 100 left) is nearer its limit than input
    expect(headers['x-ratelimit-limit-tokens']).toBe('100');
    expect(headers['x-ratelimit-remaining-tokens']).toBe('60');
    expect(headers['x-ratelimit-reset-tokens']).toBe('24s');
    await res.text();
  });

  it('streams carry them too', async () => {
    const { key } = await keyFor({ requests: 5 });
    const res = await chat(key, { stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-ratelimit-remaining-requests')).toBe('4');
    await res.text();
  });
});

describe('default output reservation', () => {
  it('is capped at a small output budget instead of refusing a request without max_tokens', async () => {
    const { key } = await keyFor({ output_tokens: 50 });
    const res = await chat(key, { max_tokens: undefined });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-ratelimit-limit-tokens')).toBe('50');
    expect(res.headers.get('x-ratelimit-remaining-tokens')).toBe('0');
    await res.text();
  });
});

describe('429 rate_limit_exceeded', () => {
  it('requests budget empty', async () => {
    const { key } = await keyFor({ requests: 1 });
    await (await chat(key)).text();
    const res = await chat(key);
    expect(res.status).toBe(429);
    expect(await errorOf(res)).toMatchObject({ type: 'requests', code: 'rate_limit_exceeded', param: null });
    expect(res.headers.get('x-should-retry')).toBe('true');
    expect(Number(res.headers.get('retry-after-ms'))).toBeGreaterThan(59_000);
    expect(res.headers.get('retry-after')).toBe(String(Math.ceil(Number(res.headers.get('retry-after-ms')) / 1000)));
  });

  it('input_tokens budget empty', async () => {
    const { key } = await keyFor({ input_tokens: 15 });
    await (await chat(key)).text();
    const res = await chat(key);
    expect(res.status).toBe(429);
    expect(await errorOf(res)).toMatchObject({ type: 'input_tokens', code: 'rate_limit_exceeded' });
    expect(res.headers.get('x-should-retry')).toBe('true');
    expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(res.headers.get('retry-after-ms')).toMatch(/^\d+$/);
  });

  it('output_tokens budget empty', async () => {
    const { key } = await keyFor({ output_tokens: 100 });
    const held = await chat(key, { max_tokens: 60, model: 'test/single', stream: true });
    const res = await chat(key, { max_tokens: 60 });
    expect(res.status).toBe(429);
    expect(await errorOf(res)).toMatchObject({ type: 'output_tokens', code: 'rate_limit_exceeded' });
    expect(res.headers.get('x-should-retry')).toBe('true');
    await held.text();
  });

  it('a request larger than a whole budget: x-should-retry false and a message saying so', async () => {
    const { key } = await keyFor({ output_tokens: 100 });
    const res = await chat(key, { max_tokens: 101 });
    expect(res.status).toBe(429);
    const error = await errorOf(res);
    expect(error).toMatchObject({ type: 'output_tokens', code: 'rate_limit_exceeded' });
    expect(error.message).toMatch(/can never be admitted.*Do not retry/);
    expect(res.headers.get('x-should-retry')).toBe('false');
    expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(res.headers.get('retry-after-ms')).toMatch(/^\d+$/);
  });
  it('counts the tool definitions and images of a request as input: 78 KB of tools do not pass a budget of 1000', async () => {
    const { key } = await keyFor({ input_tokens: 1000 });
    const tools = Array.from({ length: 50 }, (_, i) => ({
      type: 'function',
      function: {
        name: `tool_${i}`,
        description: 'Looks up the weather for a city with many words of description '.repeat(20),
        parameters: { type: 'object', properties: { city: { type: 'string' } } },
      },
    }));
    const withTools = await chat(key, { tools, tool_choice: 'none' });
    expect(withTools.status).toBe(429);
    expect(await errorOf(withTools)).toMatchObject({ type: 'input_tokens', code: 'rate_limit_exceeded' });
    expect(withTools.headers.get('x-should-retry')).toBe('false');
    // Two images (765 tokens each at the default detail) are more than 1000 too; one is not.
    const image = { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } };
    const content = (images: number) => [{ type: 'text', text: 'What is this?' }, ...Array(images).fill(image)];
    expect((await chat(key, { messages: [{ role: 'user', content: content(2) }] })).status).toBe(429);
    const one = await chat(key, { messages: [{ role: 'user', content: content(1) }] });
    expect(one.status).toBe(200);
    expect(Number(one.headers.get('x-ratelimit-remaining-tokens'))).toBeLessThan(1000 - 765);
  });
});

describe('402 insufficient_quota', () => {
  it('an organization without credit', async () => {
    const { key } = await keyFor({}, 0);
    const res = await chat(key);
    expect(res.status).toBe(402);
    expect(await errorOf(res)).toMatchObject({ code: 'insufficient_quota', type: 'invalid_request_error' });
    expect(res.headers.get('x-should-retry')).toBe('false');
  });
});

describe('429 provider_overloaded', () => {
  it('a model at capacity', async () => {
    const { key } = await keyFor();
    const client = new AbortController();
    const held = await chat(key, { model: 'test/single', stream: true, max_tokens: 100 }, client.signal);
    expect(held.status).toBe(200);
    const res = await chat(key, { model: 'test/single' });
    expect(res.status).toBe(429);
    expect(await errorOf(res)).toMatchObject({ code: 'provider_overloaded' });
    expect(res.headers.get('retry-after')).toBe('2');
    expect(res.headers.get('retry-after-ms')).toBe('1500');
    expect(res.headers.get('x-should-retry')).toBe('true');
    client.abort();
    await held.text().catch(() => undefined);
  });
});

describe('settlement', () => {
  it('refunds the unused output reservation and charges usage × price', async () => {
    const { key, orgId } = await keyFor({ output_tokens: 1000 }, 1);
    const first = await chat(key, { max_tokens: 500 });
    const produced = ((await first.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens;
    expect(produced).toBeLessThan(500);
    const usage = await usageOf(orgId, 1);
    expect(usage.totals.output_tokens).toBe(produced);
    const org = await store.getOrganization(orgId);
    expect(org!.credit).toBeCloseTo(1 - (usage.totals.input_tokens * 1 + produced * 2) / 1e6, 12);
    const second = await chat(key, { max_tokens: 100 });
    const remaining = Number(second.headers.get('x-ratelimit-remaining-tokens'));
    // 1000 − produced − 100, plus at most a token or two refilled in between.
    expect(remaining).toBeGreaterThanOrEqual(900 - produced);
    expect(remaining).toBeLessThanOrEqual(902 - produced);
    await second.text();
  });

  it('a client that disconnects mid-stream is charged what the engine produced, not zero', async () => {
    const { key, orgId } = await keyFor();
    const client = new AbortController();
    const res = await chat(key, { model: 'test/single', stream: true, max_tokens: 100 }, client.signal);
    const reader = res.body!.getReader();
    let text = '';
    while ((text.match(/"content"/g) ?? []).length < 4) text += new TextDecoder().decode((await reader.read()).value);
    client.abort();
    const usage = await usageOf(orgId, 1);
    expect(usage.totals.output_tokens).toBeGreaterThanOrEqual(3);
    expect(usage.totals.output_tokens).toBeLessThan(100);
  });
});

describe('OpenAPI', () => {
  it('documents the admin API in GET /openapi.json', async () => {
    const doc = (await (await fetch(`${baseUrl}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, unknown>>;
      components: { schemas: Record<string, unknown> };
    };
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/admin/v1/organizations',
        '/admin/v1/organizations/{org_id}',
        '/admin/v1/organizations/{org_id}/keys',
        '/admin/v1/organizations/{org_id}/keys/{key_id}',
        '/admin/v1/organizations/{org_id}/usage',
      ]),
    );
    expect(Object.keys(doc.paths['/admin/v1/organizations/{org_id}']!)).toEqual(
      expect.arrayContaining(['get', 'patch', 'delete']),
    );
    expect(doc.components.schemas).toHaveProperty('CreateOrganizationRequest');
    expect(doc.components.schemas).toHaveProperty('OrganizationUsage');
  });

  it('documents the session limits (bounds, null = default) and the live turn counts', async () => {
    type Schema = {
      properties: Record<string, Schema & { anyOf?: Schema[] }>;
      required?: string[];
      maximum?: number;
      minimum?: number;
      type?: string;
      additionalProperties?: boolean;
    };
    const doc = (await (await fetch(`${baseUrl}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { description?: string }>>;
      components: { schemas: Record<string, Schema> };
    };
    const { Organization, UpdateOrganizationRequest, CreateOrganizationRequest } = doc.components.schemas;
    expect(Organization!.required).toContain('session_limits');
    expect(Organization!.required).not.toContain('turns');
    expect(Object.keys(Organization!.properties.turns!.properties)).toEqual(['sessions', 'running', 'waiting']);
    const limits = UpdateOrganizationRequest!.properties.session_limits!;
    expect(limits.additionalProperties).toBe(false);
    expect(limits.required ?? []).toEqual([]);
    const bounds = Object.fromEntries(
      Object.entries(limits.properties).map(([name, schema]) => {
        const number = schema.anyOf?.find((s) => s.type === 'integer');
        return [name, [number?.minimum, number?.maximum, schema.anyOf?.some((s) => s.type === 'null')]];
      }),
    );
    expect(bounds).toEqual({
      sessions: [1, 1_000_000_000, true],
      running_turns: [1, 1_000_000, true],
      waiting_turns: [1, 1_000_000_000, true],
      weight: [1, 1000, true],
    });
    expect(CreateOrganizationRequest!.properties.session_limits).toEqual(limits);
    const patch = doc.paths['/admin/v1/organizations/{org_id}']!.patch!;
    expect(patch.description).toContain('ORG_MAX_RUNNING_TURNS');
    expect(doc.paths['/admin/v1/organizations/{org_id}']!.get!.description).toContain('`turns`');
  });

  it('serves a document, admin paths included, that validates as OpenAPI 3.1', async () => {
    const doc: unknown = await (await fetch(`${baseUrl}/openapi.json`)).json();
    // The contracts package's validator script (swagger-parser is ESM-only, so it runs outside Jest).
    const validator = path.join(__dirname, '../../../../packages/contracts/src/__fixtures__/validate-openapi.mjs');
    const output = execFileSync(process.execPath, [validator], { input: JSON.stringify([doc]) }).toString();
    expect(JSON.parse(output)).toEqual([null]);
  });
});

describe('admin API without ADMIN_TOKEN', () => {
  it('is not mounted', async () => {
    const res = await fetch(`${baseUrl}/admin/v1/organizations`, { headers: { authorization: 'Bearer anything' } });
    expect(res.status).toBe(404);
    expect(wiring.adminRouter).toBeUndefined();
  });
});
