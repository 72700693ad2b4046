import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';

/** A Lua script run by EVALSHA, falling back to EVAL once when Redis has not seen it (NOSCRIPT). */
export interface LuaScript {
  /** SHA-1 of the source, for EVALSHA in a pipeline the caller builds. */
  readonly sha: string;
  readonly source: string;
  run(redis: Redis, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown>;
}

/** Wraps Lua source so each call is one round trip (EVALSHA; EVAL after a restart flushed the cache). */
export function luaScript(source: string): LuaScript {
  const sha = createHash('sha1').update(source).digest('hex');
  return {
    sha,
    source,
    async run(redis, keys, args) {
      try {
        return await redis.evalsha(sha, keys.length, ...keys, ...args);
      } catch (err) {
        if (isNoScript(err)) {
          return redis.eval(source, keys.length, ...keys, ...args);
        }
        throw err;
      }
    },
  };
}

/** True for Redis's answer to an EVALSHA of a script it does not hold (restart, SCRIPT FLUSH). */
export function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}
