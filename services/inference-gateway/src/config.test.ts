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

describe('gateway config: SHUTDOWN_GRACE_MS', () => {
  const load = (value?: string) =>
    loadGatewayConfig({ env: value === undefined ? {} : { SHUTDOWN_GRACE_MS: value }, argv: [] });

  it('defaults to 30 000 and takes 1 s up to a day', () => {
    expect(load().shutdownGraceMs).toBe(30_000);
    expect(load('1000').shutdownGraceMs).toBe(1000);
    expect(load('86400000').shutdownGraceMs).toBe(86_400_000);
  });

  // Past 2^31 - 1 ms node's timers fire at once: a SIGTERM would exit before draining anything.
  it.each(['999', '86400001', '100000000000000000000', '1.5', 'soon'])('refuses %s, naming the variable', (value) => {
    expect(() => load(value)).toThrow(/SHUTDOWN_GRACE_MS/);
  });
});

describe('gateway config: ADMIN_TOKEN', () => {
  const load = (value: string) => loadGatewayConfig({ env: { ADMIN_TOKEN: value }, argv: [] });

  it('takes an operator credential of 16 characters or more; empty is unset (compose passes it so)', () => {
    expect(load('x'.repeat(16)).adminToken).toBe('x'.repeat(16));
    expect(load('').adminToken).toBeUndefined();
  });

  // The admin API has no counter of failed bearers: a short token could be guessed.
  it.each(['admin', 'x'.repeat(15), 'x'.repeat(1025)])('refuses %j, naming the variable', (value) => {
    expect(() => load(value)).toThrow(/ADMIN_TOKEN/);
  });
});

describe('gateway config: durations', () => {
  it.each(['UPSTREAM_TIMEOUT_MS', 'AUTH_CACHE_TTL_MS', 'CAPACITY_LEASE_MS', 'CONSOLE_SESSION_TTL_MS'])(
    '%s takes the longest delay a timer waits and refuses one ms more',
    (name) => {
      expect(() => loadGatewayConfig({ env: { [name]: '2147483647' }, argv: [] })).not.toThrow();
      expect(() => loadGatewayConfig({ env: { [name]: '2147483648' }, argv: [] })).toThrow(
        new RegExp(`${name}: must be at most 2147483647 ms`),
      );
    },
  );
});
