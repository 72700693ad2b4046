import { MAX_TIMER_MS } from '@tollway/service-kit';
import { loadSimConfig } from './sim-config';

describe('loadSimConfig', () => {
  it('takes delays in ms, fractions included, up to the longest a timer waits', () => {
    const config = loadSimConfig({ env: { SIM_TTFT_MS: '0.5' }, argv: ['--tpot-ms', String(MAX_TIMER_MS)] });
    expect(config.timeToFirstTokenMs).toBe(0.5);
    expect(config.timePerOutputTokenMs).toBe(MAX_TIMER_MS);
  });

  it.each([
    ['SIM_TTFT_MS', { SIM_TTFT_MS: String(MAX_TIMER_MS + 1) }],
    ['SIM_TPOT_MS', { SIM_TPOT_MS: '1e12' }],
    ['SIM_TPOT_MS', { SIM_TPOT_MS: '-1' }],
  ])('refuses %s out of range, naming it', (name, env) => {
    expect(() => loadSimConfig({ env, argv: [] })).toThrow(new RegExp(`${name} \\(--[a-z-]+\\):`));
  });
});
