import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import winston from 'winston';
import { Redis } from 'ioredis';
import { createAccountStore, deleteKeysWithPrefix, type Budgets } from '@tollway/accounts';
import { AccessLog, closeServer, createLogger, listen } from '@tollway/service-kit';
import { scrape, sampleSum, type Scrape } from '@tollway/telemetry/testing';
import { wireAccounts, type AccountsWiring } from '../../src/admission/accounts-wiring';
import { buildApp } from '../../src/app';
import { CatalogStore } from '../../src/catalog/catalog-store';
import { loadGatewayConfig } from '../../src/config';
import { EngineRegistry } from '../../src/engines';
import { buildGatewayTelemetry } from '../../src/observability/gateway-telemetry';
import { PromptTokenCounter } from '../../src/tokenizer/count-tokens';
import { catalogModels, ssePayloads } from '../helpers/gateway-harness';

/**
 * `/metrics` of a gateway under traffic, parsed with a Prometheus text parser: each admission
 * outcome, the GenAI histograms and the access log move by exactly what was sent.
 */
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
    engine: simulated({ time_per_output_token_ms: 100 }),
  },
  {
    id: 'test/slow',
    owned_by: 'test',
    created: 1,
    price_per_million: { input: 1, output: 2 },
    engine: simulated({ time_per_output_token_ms: 100 }),
  },
]);
const LARGE: Budgets = { requests: 1000, input_tokens: 1_000_000, output_tokens: 1_000_000 };

/** Keeps the log records (as the JSON lines winston writes) in memory. */
const records: Array<Record<string, unknown>> = [];
const logSink = new Writable({
  write(chunk: Buffer, _encoding, done) {
    for (const line of chunk.toString().split('\n'))
      if (line) records.push(JSON.parse(line) as Record<string, unknown>);
    done();
  },
});

let server: Server;
let baseUrl: string;
let wiring: AccountsWiring;
let engines: EngineRegistry;
let catalog: CatalogStore;
let accessLog: AccessLog;

beforeAll(async () => {
  const config = loadGatewayConfig({ env: { REDIS_PREFIX: prefix, ADMISSION_SLICES: 'false' }, argv: [] });
  const logger = createLogger({ service: 'metrics-test' });
  logger.clear().add(new winston.transports.Stream({ stream: logSink }));
  catalog = new CatalogStore(models);
  engines = new EngineRegistry({ connections: 16, timeoutMs: 5000 });
  catalog.subscribe((current) => engines.sync(current));
  wiring = await wireAccounts(config, redis, logger);
  const { authenticator, admission, admissionStats } = wiring;
  // The production writer, with its gathered lines going to the same sink instead of stdout.
  accessLog = new AccessLog({ service: 'metrics-test', write: (chunk) => logSink.write(chunk) });
  const promptTokens = new PromptTokenCounter(config.promptTokenCacheEntries);
  const telemetry = buildGatewayTelemetry({
    ...{ config, logger, catalog, engines, admissionStats, accessLog },
    promptTokenStats: () => promptTokens.stats(),
  });
  const app = buildApp({ config, logger, catalog, engines, redis, authenticator, admission, telemetry, promptTokens });
  server = await listen(app, 0, '127.0.0.1');
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await closeServer(server);
  await engines.close();
  catalog.close();
  await wiring.close();
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
});

async function keyFor(budgets: Partial<Budgets> = {}, credit = 100): Promise<string> {
  const org = await store.createOrganization({ name: 'metrics', budgets: { ...LARGE, ...budgets }, credit });
  return (await store.createKey(org.id))!.key;
}

function chat(key: string, body: Record<string, unknown> = {}): Promise<Response> {
  return fetch(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({
      model: 'test/fast',
      messages: [{ role: 'user', content: 'hello there' }],
      max_tokens: 8,
      ...body,
    }),
  });
}

async function statuses(responses: Promise<Response>[]): Promise<number[]> {
  return Promise.all(
    responses.map(async (pending) => {
      const res = await pending;
      await res.arrayBuffer();
      return res.status;
    }),
  );
}

const admissions = (s: Scrape, outcome: string) => sampleSum(s, 'tollway_admission_decisions_total', { outcome });
const fast = { gen_ai_request_model: 'test/fast' };

describe('gateway /metrics', () => {
  it('counts each admission outcome, tokens, TTFT and failures exactly, and logs each request once', async () => {
    const before = await scrape(`${baseUrl}/metrics`);
    expect(before.types.get('gen_ai_server_time_to_first_token_seconds')).toBe('histogram');
    expect(before.types.get('tollway_admission_decisions_total')).toBe('counter');

    const good = await keyFor();
    const requestsKey = await keyFor({ requests: 3 });
    const inputKey = await keyFor({ input_tokens: 3 });
    const outputKey = await keyFor({ output_tokens: 4 });
    const brokeKey = await keyFor({}, 0);
    const sequential = async (key: string, n: number, body: Record<string, unknown> = {}) => {
      const out: number[] = [];
      for (let i = 0; i < n; i++) out.push(...(await statuses([chat(key, body)])));
      return out;
    };
    expect(await sequential(requestsKey, 6)).toEqual([200, 200, 200, 429, 429, 429]);
    expect(await sequential(inputKey, 3)).toEqual([429, 429, 429]);
    expect(await sequential(outputKey, 3)).toEqual([429, 429, 429]);
    expect(await sequential(brokeKey, 3)).toEqual([402, 402, 402]);
    expect(await sequential(`tw-${'x'.repeat(43)}`, 3)).toEqual([401, 401, 401]);

    // One streamed completion holds test/single (capacity 1) while three more are refused.
    const holder = await chat(good, { model: 'test/single', stream: true });
    expect(holder.status).toBe(200);
    const during = await scrape(`${baseUrl}/metrics`);
    expect(sampleSum(during, 'tollway_sse_streams_open')).toBe(1);
    expect(await sequential(good, 3, { model: 'test/single' })).toEqual([429, 429, 429]);
    const frames = ssePayloads(await holder.text());
    const streamUsage = (JSON.parse(frames.at(-2)!) as { usage: { completion_tokens: number } }).usage;

    const json = await chat(good);
    const jsonUsage = ((await json.json()) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;

    const after = await scrape(`${baseUrl}/metrics`);
    const delta = (f: (s: Scrape) => number) => f(after) - f(before);
    expect(delta((s) => admissions(s, 'admitted'))).toBe(5);
    for (const outcome of ['requests', 'input_tokens', 'output_tokens', 'insufficient_quota', 'provider_overloaded']) {
      expect([outcome, delta((s) => admissions(s, outcome))]).toEqual([outcome, 3]);
    }
    expect(delta((s) => admissions(s, 'unauthorized'))).toBe(3);
    expect(sampleSum(after, 'tollway_sse_streams_open')).toBe(0);

    // The stream is the only successful streamed request: one TTFT, and TPOT over its tokens.
    const single = {
      gen_ai_request_model: 'test/single',
      gen_ai_operation_name: 'chat',
      gen_ai_provider_name: 'simulated',
    };
    expect(delta((s) => sampleSum(s, 'gen_ai_server_time_to_first_token_seconds_count', single))).toBe(1);
    expect(delta((s) => sampleSum(s, 'gen_ai_server_time_to_first_token_seconds_count', fast))).toBe(0);
    expect(delta((s) => sampleSum(s, 'gen_ai_server_time_per_output_token_seconds_count', single))).toBe(1);
    const tpot = delta((s) => sampleSum(s, 'gen_ai_server_time_per_output_token_seconds_sum', single));
    expect(tpot).toBeGreaterThan(0.05); // 100 ms per token in the simulator
    // Successful requests of test/fast: 3 (requests key) + 1 (json), error.type empty.
    expect(
      delta((s) => sampleSum(s, 'gen_ai_server_request_duration_seconds_count', { ...fast, error_type: '' })),
    ).toBe(4);
    expect(
      delta((s) =>
        sampleSum(s, 'gen_ai_server_request_duration_seconds_count', { ...fast, error_type: 'rate_limit_exceeded' }),
      ),
    ).toBe(9);
    expect(
      delta((s) =>
        sampleSum(s, 'gen_ai_server_request_duration_seconds_count', { ...fast, error_type: 'insufficient_quota' }),
      ),
    ).toBe(3);
    expect(
      delta((s) => sampleSum(s, 'gen_ai_client_token_usage_count', { ...fast, gen_ai_token_type: 'output' })),
    ).toBe(4);
    expect(
      delta((s) => sampleSum(s, 'gen_ai_client_token_usage_sum', { ...single, gen_ai_token_type: 'output' })),
    ).toBe(streamUsage.completion_tokens);
    const fastOutput = delta((s) =>
      sampleSum(s, 'gen_ai_client_token_usage_sum', { ...fast, gen_ai_token_type: 'output' }),
    );
    expect(fastOutput).toBeGreaterThanOrEqual(jsonUsage.completion_tokens);
    expect(delta((s) => sampleSum(s, 'tollway_redis_script_calls_total', { script: 'admit' }))).toBeGreaterThanOrEqual(
      20,
    );
    // Never an organization, key or session id as a label.
    const labelNames = new Set(after.samples.flatMap((sample) => Object.keys(sample.labels)));
    for (const forbidden of ['org_id', 'organization', 'key_id', 'session_id'])
      expect(labelNames.has(forbidden)).toBe(false);

    // One access log line per chat request: 6 + 3 + 3 + 3 + 3 + 1 + 3 + 1 = 23, none with a key in it.
    accessLog.flush();
    const lines = records.filter((record) => record.message === 'request' && record.path === '/v1/chat/completions');
    expect(lines).toHaveLength(23);
    const jsonLine = lines.at(-1)!;
    expect(jsonLine).toMatchObject({ status: 200, model: 'test/fast', input_tokens: jsonUsage.prompt_tokens });
    expect(typeof jsonLine.request_id).toBe('string');
    expect(typeof jsonLine.org_id).toBe('string');
    expect(jsonLine.duration_ms).toBeGreaterThan(0);
    const text = JSON.stringify(records);
    for (const key of [good, requestsKey, brokeKey]) expect(text).not.toContain(key);
    expect(text).not.toContain('hello there');
  });

  it('counts a refused body naming a catalog model, and requests whose client left, as failures, never successes', async () => {
    const key = await keyFor();
    const slow = { gen_ai_request_model: 'test/slow' };
    const count = (s: Scrape, labels: Record<string, string>) =>
      sampleSum(s, 'gen_ai_server_request_duration_seconds_count', labels);
    const before = await scrape(`${baseUrl}/metrics`);
    expect(await statuses([chat(key, { temperature: 5 }), chat(key, { messages: [] })])).toEqual([400, 400]);

    // A stream cut after its first chunk, and a JSON answer left before it came (100 ms a token).
    const streamAbort = new AbortController();
    const stream = await fetch(`${baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: 'test/slow', messages: [{ role: 'user', content: 'hi' }], stream: true }),
      signal: streamAbort.signal,
    });
    await stream.body!.getReader().read();
    streamAbort.abort();
    const jsonAbort = AbortSignal.timeout(150);
    await expect(
      fetch(`${baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify({ model: 'test/slow', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }),
        signal: jsonAbort,
      }),
    ).rejects.toThrow();
    let after = await scrape(`${baseUrl}/metrics`);
    for (
      let i = 0;
      i < 50 &&
      count(after, { ...slow, error_type: 'client_gone' }) - count(before, { ...slow, error_type: 'client_gone' }) < 2;
      i++
    ) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      after = await scrape(`${baseUrl}/metrics`);
    }
    const delta = (f: (s: Scrape) => number) => f(after) - f(before);
    expect(delta((s) => count(s, fast))).toBe(2);
    expect(delta((s) => count(s, { ...fast, error_type: '' }))).toBe(0);
    expect(delta((s) => count(s, { ...slow, error_type: 'client_gone' }))).toBe(2);
    expect(delta((s) => count(s, { ...slow, error_type: '' }))).toBe(0);
    expect(delta((s) => sampleSum(s, 'gen_ai_server_time_to_first_token_seconds_count', slow))).toBe(0);
    expect(delta((s) => sampleSum(s, 'gen_ai_server_time_per_output_token_seconds_count', slow))).toBe(0);
    expect(sampleSum(after, 'tollway_sse_streams_open')).toBe(0);
    accessLog.flush();
    const gone = records.filter((record) => record.message === 'request' && record.error_type === 'client_gone');
    expect(gone.map((line) => [line.model, line.stream])).toEqual(
      expect.arrayContaining([
        ['test/slow', true],
        ['test/slow', false],
      ]),
    );
  });

  it('counts the prompt texts found in, and added to, the memory of token counts', async () => {
    const key = await keyFor();
    const system = `You answer questions about ${randomUUID()}.`;
    const lookups = (s: Scrape, result: string) => sampleSum(s, 'tollway_prompt_token_cache_lookups_total', { result });
    const before = await scrape(`${baseUrl}/metrics`);
    expect(before.types.get('tollway_prompt_token_cache_lookups_total')).toBe('counter');
    // A conversation sent whole each turn: 2, 4 and 6 texts, of which 0, 2 and 4 were sent before.
    const turns = [
      [
        { role: 'system', content: system },
        { role: 'user', content: 'first question' },
      ],
      [
        { role: 'assistant', content: 'first answer' },
        { role: 'user', content: 'second question' },
      ],
      [
        { role: 'assistant', content: 'second answer' },
        { role: 'user', content: 'third question' },
      ],
    ];
    const messages: Array<{ role: string; content: string }> = [];
    for (const turn of turns) {
      messages.push(...turn);
      expect(await statuses([chat(key, { messages })])).toEqual([200]);
    }
    const after = await scrape(`${baseUrl}/metrics`);
    expect(lookups(after, 'hit') - lookups(before, 'hit')).toBe(6);
    expect(lookups(after, 'miss') - lookups(before, 'miss')).toBe(6);
    expect(
      sampleSum(after, 'tollway_prompt_token_cache_entries') - sampleSum(before, 'tollway_prompt_token_cache_entries'),
    ).toBe(6);
  });

  it('serves nothing and records nothing with METRICS_ENABLED=false', async () => {
    const config = loadGatewayConfig({ env: { REDIS_PREFIX: prefix, METRICS_ENABLED: 'false' }, argv: [] });
    const logger = createLogger({ service: 'metrics-off', silent: true });
    const app = buildApp({ config, logger, catalog, engines, redis, ...wiring });
    const off = await listen(app, 0, '127.0.0.1');
    try {
      const res = await fetch(`http://127.0.0.1:${(off.address() as AddressInfo).port}/metrics`);
      expect(res.status).toBe(404);
    } finally {
      await closeServer(off);
    }
  });
});
