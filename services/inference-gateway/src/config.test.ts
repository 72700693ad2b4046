import { loadGatewayConfig } from './config';

describe('gateway config: PROMPT_TOKEN_CACHE_ENTRIES', () => {
  const load = (value?: string) =>
    loadGatewayConfig({ env: value === undefined ? {} : { PROMPT_TOKEN_CACHE_ENTRIES: value }, argv: [] });

  it('defaults to 4096 and takes 0 (off) up to 100 000', () => {
    expect(load().promptTokenCacheEntries).toBe(4096);
    expect(load('0').promptTokenCacheEntries).toBe(0);
    expect(load('100000').promptTokenCacheEntries).toBe(100_000);
  });

  it.each(['100001', '-1', '1.5', 'many'])('refuses %s, naming the variable', (value) => {
    expect(() => load(value)).toThrow(/PROMPT_TOKEN_CACHE_ENTRIES/);
  });
});
