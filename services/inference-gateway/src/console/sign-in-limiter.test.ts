import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { SignInLimiter } from './sign-in-limiter';

const redis = new Redis('redis://127.0.0.1:6379');
const prefix = `test-${randomUUID()}:`;
const limiter = (maxFailures: number, windowMs = 60_000) => new SignInLimiter({ redis, prefix, maxFailures, windowMs });

afterAll(async () => {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

describe('SignInLimiter', () => {
  it('lets exactly the limit of attempts made at once through (each counted before any token is checked)', async () => {
    const waits = await Promise.all(Array.from({ length: 40 }, () => limiter(5).attempt('10.0.0.1')));
    expect(waits.filter((wait) => wait === 0)).toHaveLength(5);
    for (const wait of waits.filter((w) => w > 0)) {
      expect(wait).toBeGreaterThan(0);
      expect(wait).toBeLessThanOrEqual(60_000);
    }
  });

  it('gives a successful attempt back, so successes never use up the limit', async () => {
    const twice = limiter(2);
    for (let i = 0; i < 10; i++) {
      expect(await twice.attempt('10.0.0.2')).toBe(0);
      await twice.succeeded('10.0.0.2');
    }
    expect(await twice.attempt('10.0.0.2')).toBe(0);
    expect(await twice.attempt('10.0.0.2')).toBe(0);
    expect(await twice.attempt('10.0.0.2')).toBeGreaterThan(0);
  });

  it('counts each address on its own, and forgets an address when its window ends', async () => {
    const short = limiter(1, 200);
    expect(await short.attempt('10.0.0.3')).toBe(0);
    expect(await short.attempt('10.0.0.3')).toBeGreaterThan(0);
    expect(await short.attempt('10.0.0.4')).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(await short.attempt('10.0.0.3')).toBe(0);
    // Giving back after the window ended leaves no count without an expiry behind.
    await short.succeeded('10.0.0.3');
    await new Promise((resolve) => setTimeout(resolve, 250));
    await short.succeeded('10.0.0.3');
    expect(await redis.exists(`${prefix}console:sign-in-failures:10.0.0.3`)).toBe(0);
  });
});
