import { MAX_TIMER_MS } from '@tollway/service-kit';
import { loadSimConfig } from './sim-config';

describe('loadSimConfig', () => {
  it('takes delays in ms, fractions included, up to the longest a timer waits', () => {
    const config = loadSimConfig({ env: { SIM_TTFT_MS: '0.5' }, argv: ['--tpot-ms', String(MAX_TIMER_MS)] });
    expect(config.timeToFirstTokenMs).toBe(0.5);
    expect(config.timePerOutputTokenMs).toBe(MAX_TIMER_MS);
  });

  it('switches to the prefix-caching mode with a KV cache size, its other settings defaulted', () => {
    expect(loadSimConfig({ env: {}, argv: [] }).kvCacheBlocks).toBeUndefined();
    const config = loadSimConfig({ env: { SIM_PREFILL_TOKENS_PER_S: '5000' }, argv: ['--kv-cache-blocks', '4096'] });
    expect(config).toMatchObject({
      kvCacheBlocks: 4096,
      prefillTokensPerS: 5000,
      decodeStepMs: 10,
      decodeMsPerSequence: 0.25,
      maxBatchedTokens: 2048,
    });
  });

  it.each([
    ['SIM_KV_CACHE_BLOCKS', { SIM_KV_CACHE_BLOCKS: '0' }],
    ['SIM_PREFILL_TOKENS_PER_S', { SIM_PREFILL_TOKENS_PER_S: '0' }],
    ['SIM_TTFT_MS', { SIM_TTFT_MS: String(MAX_TIMER_MS + 1) }],
    ['SIM_TPOT_MS', { SIM_TPOT_MS: '1e12' }],
    ['SIM_TPOT_MS', { SIM_TPOT_MS: '-1' }],
  ])('refuses %s out of range, naming it', (name, env) => {
    expect(() => loadSimConfig({ env, argv: [] })).toThrow(new RegExp(`${name} \\(--[a-z-]+\\):`));
  });
});
