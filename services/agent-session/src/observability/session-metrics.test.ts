import { createMetricsRegistry } from '@tollway/telemetry';
import { parseScrape, sampleSum } from '@tollway/telemetry/testing';
import { MAX_CHAT_MODELS, OTHER_MODEL, WorkerMetrics } from './session-metrics';

it('gives the first MAX_CHAT_MODELS models of chat calls a series each and folds the rest into _OTHER', async () => {
  const registry = createMetricsRegistry('test');
  const metrics = new WorkerMetrics(registry);
  const extra = 6;
  for (let i = 0; i < MAX_CHAT_MODELS + extra; i++) {
    metrics.chatCallEnded(`model-${i}`, 0.1, { inputTokens: 3, outputTokens: 1 });
    metrics.chatCallEnded(`model-${i}`, 0.1, { errorType: '429' });
  }
  const scraped = parseScrape(await registry.metrics());
  const models = new Set(
    scraped.samples
      .filter((sample) => sample.name === 'gen_ai_client_token_usage_count')
      .map((sample) => sample.labels.gen_ai_request_model),
  );
  expect(models.size).toBe(MAX_CHAT_MODELS + 1);
  expect(models.has(`model-${MAX_CHAT_MODELS}`)).toBe(false);
  const other = { gen_ai_operation_name: 'chat', gen_ai_request_model: OTHER_MODEL };
  expect(sampleSum(scraped, 'gen_ai_client_token_usage_sum', { ...other, gen_ai_token_type: 'input' })).toBe(3 * extra);
  expect(sampleSum(scraped, 'gen_ai_client_operation_duration_seconds_count', { ...other, error_type: '429' })).toBe(
    extra,
  );
  expect(
    sampleSum(scraped, 'gen_ai_client_operation_duration_seconds_count', {
      gen_ai_request_model: 'model-0',
      error_type: '',
    }),
  ).toBe(1);
});
