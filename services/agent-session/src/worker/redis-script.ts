import { createHash } from "node:crypto";
import type { Redis } from "ioredis";

/** A Lua script run with EVALSHA, falling back to EVAL once when Redis does not know it yet. */
export class RedisScript {
  private readonly sha: string;

  constructor(private readonly source: string) {
    this.sha = createHash("sha1").update(source).digest("hex");
  }

  /** Runs the script with `keys` and `args`; the reply is what the script returns. */
  async run(
    redis: Redis,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    try {
      return await redis.evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith("NOSCRIPT"))
        throw err;
      return redis.eval(this.source, keys.length, ...keys, ...args);
    }
  }
}
