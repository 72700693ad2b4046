import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';

/**
 * A Lua script run by its SHA (EVALSHA), loaded on first use and again after a Redis restart
 * (NOSCRIPT). Keeps one round trip per call without registering commands on a shared client.
 */
export class LuaScript {
  private readonly sha: string;

  constructor(
    private readonly source: string,
    private readonly numberOfKeys: number,
  ) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }

  /** Runs the script with `keys` (exactly numberOfKeys of them) and `args`. */
  async run(redis: Redis, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown> {
    if (keys.length !== this.numberOfKeys) {
      throw new Error(`script expects ${this.numberOfKeys} keys, got ${keys.length}`);
    }
    try {
      return await redis.evalsha(this.sha, this.numberOfKeys, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return redis.eval(this.source, this.numberOfKeys, ...keys, ...args);
    }
  }
}
