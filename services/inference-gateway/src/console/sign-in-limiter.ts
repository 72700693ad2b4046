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

/** Gives back an attempt taken by `attempt`, unless its window already ended (no count then). */
const GIVE_BACK_LUA = `if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('DECR', KEYS[1]) end return 1`;

/**
 * Counts failed console sign-ins per client address in Redis, so the limit holds across gateway
 * replicas: after `maxFailures` failures the address is refused until its window ends. Every
 * attempt is counted before its token is checked, in one atomic step with the check of the limit,
 * so a burst of parallel guesses gets no more than `maxFailures` checked; a sign-in that succeeds
 * gives its attempt back. Successes do not reset the count (a guesser holding one valid key gains
 * nothing).
 */
export class SignInLimiter {
  constructor(private readonly options: SignInLimiterOptions) {}

  /**
   * Takes one attempt for `address`: 0 when it may check a token now (the attempt counts as a
   * failure unless `succeeded` gives it back), otherwise the ms until it may try again.
   */
  async attempt(address: string): Promise<number> {
    const key = this.key(address);
    const [, [, count], [, ttl]] = (await this.options.redis
      .multi()
      .set(key, 0, 'PX', this.options.windowMs, 'NX')
      .incr(key)
      .pttl(key)
      .exec()) as [unknown, [unknown, number], [unknown, number]];
    if (count <= this.options.maxFailures) return 0;
    return ttl > 0 ? ttl : this.options.windowMs;
  }

  /** Gives back the attempt of a sign-in that succeeded. */
  async succeeded(address: string): Promise<void> {
    await this.options.redis.eval(GIVE_BACK_LUA, 1, this.key(address));
  }

  private key(address: string): string {
    return `${this.options.prefix}console:sign-in-failures:${address}`;
  }
}
