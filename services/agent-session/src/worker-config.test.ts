import { loadWorkerConfig } from './worker-config';

describe('loadWorkerConfig: durations', () => {
  const load = (env: Record<string, string>) => loadWorkerConfig({ env, argv: [] });

  it('applies the documented defaults', () => {
    const config = load({});
    expect(config.turnTimeoutMs).toBe(600_000);
    expect(config.reaperIntervalMs).toBe(1000);
    expect(config.webhookTimeoutMs).toBe(10_000);
    expect(config.shutdownGraceMs).toBe(5000);
  });

  // Node runs a longer timer after 1 ms: a 35-day turn timeout failed every turn at once, and a
  // 35-day reaper interval ran the reaper every millisecond.
  it.each([
    'TURN_TIMEOUT_MS',
    'REAPER_INTERVAL_MS',
    'GATEWAY_TIMEOUT_MS',
    'WEBHOOK_TIMEOUT_MS',
    'WORKER_SHUTDOWN_GRACE_MS',
  ])('%s takes the longest delay a timer waits and refuses one ms more, naming the variable', (name) => {
    expect(() => load({ [name]: '2147483647' })).not.toThrow();
    expect(() => load({ [name]: '3000000000' })).toThrow(new RegExp(`${name}: must be at most 2147483647 ms`));
  });
});

describe('loadWorkerConfig: WEBHOOK_ALLOWED_HOSTS', () => {
  it('takes host names, addresses and CIDRs', () => {
    const config = loadWorkerConfig({
      env: { WEBHOOK_ALLOWED_HOSTS: 'hooks.internal, 10.0.0.0/8,fd00::/8, 127.0.0.1' },
      argv: [],
    });
    expect(config.webhookAllowedHosts).toEqual(['hooks.internal', '10.0.0.0/8', 'fd00::/8', '127.0.0.1']);
  });

  it.each(['10.0.0.0/99', 'hooks/8', '10.0.0.0/'])('refuses the CIDR %s at start, naming the variable', (entry) => {
    expect(() => loadWorkerConfig({ env: { WEBHOOK_ALLOWED_HOSTS: `127.0.0.1,${entry}` }, argv: [] })).toThrow(
      /WEBHOOK_ALLOWED_HOSTS: each CIDR/,
    );
  });

  it.each(['exa mple.com', 'hooks.internal 10.0.0.0/8', 'a\tb'])(
    'refuses the entry %j, which no host matches, naming the variable',
    (entry) => {
      expect(() => loadWorkerConfig({ env: { WEBHOOK_ALLOWED_HOSTS: `127.0.0.1,${entry}` }, argv: [] })).toThrow(
        /WEBHOOK_ALLOWED_HOSTS: an entry must not hold blanks/,
      );
    },
  );
});
