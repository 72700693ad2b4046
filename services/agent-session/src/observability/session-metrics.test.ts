import { createMetricsRegistry } from '@tollway/telemetry';
import { parseScrape, sampleSum } from '@tollway/telemetry/testing';
import { OTHER_MODEL } from './model-label';
import { MAX_CHAT_MODELS, registerApiMetrics, WorkerMetrics } from './session-metrics';

it('gives the first MAX_CHAT_MODELS models of chat calls a series each and folds the rest into _OTHER', async () => {
  const registry = createMetricsRegistry('test');
  const metrics = new WorkerMetrics(registry);
  const extra = 6;
  for (let i = 0; i < MAX_CHAT_MODELS + extra; i++) {
    metrics.chatCallEnded(`test/model-${i}`, 0.1, { inputTokens: 3, outputTokens: 1 });
    metrics.chatCallEnded(`test/model-${i}`, 0.1, { errorType: '429' });
  }
  const scraped = parseScrape(await registry.metrics());
  const models = new Set(
    scraped.samples
      .filter((sample) => sample.name === 'gen_ai_client_token_usage_count')
      .map((sample) => sample.labels.gen_ai_request_model),
  );
  expect(models.size).toBe(MAX_CHAT_MODELS + 1);
  expect(models.has(`test/model-${MAX_CHAT_MODELS}`)).toBe(false);
  const other = { gen_ai_operation_name: 'chat', gen_ai_request_model: OTHER_MODEL };
  expect(sampleSum(scraped, 'gen_ai_client_token_usage_sum', { ...other, gen_ai_token_type: 'input' })).toBe(3 * extra);
  expect(sampleSum(scraped, 'gen_ai_client_operation_duration_seconds_count', { ...other, error_type: '429' })).toBe(
    extra,
  );
  expect(
    sampleSum(scraped, 'gen_ai_client_operation_duration_seconds_count', {
      gen_ai_request_model: 'test/model-0',
      error_type: '',
    }),
  ).toBe(1);
});

it('bounds model labels: an id that is no model id, or of 60 KB, is _OTHER, and /metrics stays small', async () => {
  const registry = createMetricsRegistry('test');
  const metrics = new WorkerMetrics(registry);
  const huge = `author/${'m'.repeat(60_000)}`;
  for (let i = 0; i < 20; i++) {
    metrics.chatCallEnded(`${huge}${i}`, 0.1, { inputTokens: 1, outputTokens: 1 });
    metrics.chatCallEnded(`no slash ${i}`, 0.1, { inputTokens: 1, outputTokens: 1 });
  }
  metrics.chatCallEnded(`a/${'b'.repeat(254)}`, 0.1, { inputTokens: 1, outputTokens: 1 });
  const text = await registry.metrics();
  expect(text.length).toBeLessThan(100_000); // two series; each 60 KB label would add about 4 MB
  const models = new Set(parseScrape(text).samples.map((sample) => sample.labels.gen_ai_request_model));
  expect([...models].filter(Boolean).sort()).toEqual([OTHER_MODEL, `a/${'b'.repeat(254)}`].sort());
});

it("gives a series only to a model a call succeeded with: names that only fail cannot take the catalog's slots", async () => {
  const registry = createMetricsRegistry('test');
  const metrics = new WorkerMetrics(registry);
  for (let i = 0; i < MAX_CHAT_MODELS + 6; i++) metrics.chatCallEnded(`bogus/model-${i}`, 0.1, { errorType: '404' });
  metrics.chatCallEnded('tollway/sim-b', 0.1, { inputTokens: 3, outputTokens: 1 });
  metrics.chatCallEnded('tollway/sim-b', 0.1, { errorType: '429' });
  const scraped = parseScrape(await registry.metrics());
  const duration = 'gen_ai_client_operation_duration_seconds_count';
  expect(sampleSum(scraped, duration, { gen_ai_request_model: 'tollway/sim-b', error_type: '' })).toBe(1);
  expect(sampleSum(scraped, duration, { gen_ai_request_model: 'tollway/sim-b', error_type: '429' })).toBe(1);
  expect(sampleSum(scraped, duration, { gen_ai_request_model: OTHER_MODEL, error_type: '404' })).toBe(
    MAX_CHAT_MODELS + 6,
  );
  expect(scraped.samples.some((sample) => sample.labels.gen_ai_request_model?.startsWith('bogus/'))).toBe(false);
});

it('shows the running workers of the scrape itself, read once with max_workers', async () => {
  const registry = createMetricsRegistry('test');
  const stats = { maxWorkers: 4, runningWorkers: 0 };
  let reads = 0;
  registerApiMetrics(registry, {
    sessionsByStatus: async () => ({ idle: 0, running: 0, error: 0 }),
    queueCounts: async () => ({ waiting: 0, active: 0, delayed: 0 }),
    workerStats: async () => {
      reads++;
      return { ...stats };
    },
    longPollWaiters: () => 0,
  });
  for (const running of [3, 0, 2]) {
    stats.runningWorkers = running;
    const scraped = parseScrape(await registry.metrics());
    expect(sampleSum(scraped, 'tollway_workers_running')).toBe(running);
    expect(sampleSum(scraped, 'tollway_workers_max')).toBe(4);
  }
  expect(reads).toBe(3);
});
