import { Redis, type RedisOptions } from 'ioredis';

/**
 * Longest a command of a fail-fast client waits for its reply, ms, queued during a reconnect
 * included. Kept under a second so a request meeting a Redis outage gets its 503 within one,
 * instead of waiting out the reconnect back-off (which took 3–5 s).
 */
export const REDIS_COMMAND_TIMEOUT_MS = 750;

/** Options of createRedis. */
export interface RedisFactoryOptions {
  /** Connection name shown by `CLIENT LIST`, e.g. `gateway:admission`. */
  name: string;
  /**
   * `null` lets commands wait for a reconnect indefinitely (what BullMQ requires of its
   * connections); the default, 2, fails a command fast so a request gets a clean error.
   */
  maxRetriesPerRequest?: number | null;
  /**
   * Reply timeout of each command, ms; default REDIS_COMMAND_TIMEOUT_MS, none for clients with
   * `maxRetriesPerRequest: null` (blocking queue commands must be able to wait).
   */
  commandTimeoutMs?: number;
  extra?: RedisOptions;
}

/**
 * An ioredis client for `url` (redis://host:port/db), with bounded reconnect back-off; it
 * reconnects by itself for as long as Redis is away.
 */
export function createRedis(url: string, options: RedisFactoryOptions): Redis {
  const failFast = options.maxRetriesPerRequest !== null;
  return new Redis(url, {
    connectionName: options.name,
    maxRetriesPerRequest: options.maxRetriesPerRequest === undefined ? 2 : options.maxRetriesPerRequest,
    commandTimeout: failFast ? (options.commandTimeoutMs ?? REDIS_COMMAND_TIMEOUT_MS) : undefined,
    enableAutoPipelining: true,
    retryStrategy: (times) => Math.min(50 * 2 ** times, 2000),
    ...options.extra,
  });
}
