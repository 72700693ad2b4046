import type { Redis } from 'ioredis';

/** Options of SignInLimiter. */
export interface SignInLimiterOptions {
  redis: Redis;
  prefix: string;
  /** Failed sign-ins one client address may make per window. */
  maxFailures: number;
  /** Window length, ms, counted from the first failure. */
  windowMs: number;
}

/**
 * Counts failed console sign-ins per client address in Redis, so the limit holds across gateway
 * replicas: after `maxFailures` failures the address is refused until its window ends. Successful
 * sign-ins are not counted and do not reset the count (a guesser holding one valid key gains nothing).
 */
export class SignInLimiter {
  constructor(private readonly options: SignInLimiterOptions) {}

  /** 0 when `address` may try; otherwise the ms until it may try again. */
  async retryAfterMs(address: string): Promise<number> {
    const key = this.key(address);
    const [[, count], [, ttl]] = (await this.options.redis.multi().get(key).pttl(key).exec()) as [
      [unknown, string | null],
      [unknown, number],
    ];
    if (Number(count ?? 0) < this.options.maxFailures) return 0;
    return ttl > 0 ? ttl : this.options.windowMs;
  }

  /** Records one failure of `address`. */
  async recordFailure(address: string): Promise<void> {
    const key = this.key(address);
    await this.options.redis.multi().set(key, 0, 'PX', this.options.windowMs, 'NX').incr(key).exec();
  }

  private key(address: string): string {
    return `${this.options.prefix}console:sign-in-failures:${address}`;
  }
}
