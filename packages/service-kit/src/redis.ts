import { Redis, type RedisOptions } from 'ioredis';

/** Options of createRedis. */
export interface RedisFactoryOptions {
  /** Connection name shown by `CLIENT LIST`, e.g. `gateway:admission`. */
  name: string;
  /**
   * `null` lets commands wait for a reconnect indefinitely (what BullMQ requires of its
   * connections); the default, 2, fails a command fast so a request gets a clean error.
   */
  maxRetriesPerRequest?: number | null;
  extra?: RedisOptions;
}

/** An ioredis client for `url` (redis://host:port/db), with bounded reconnect back-off. */
export function createRedis(url: string, options: RedisFactoryOptions): Redis {
  return new Redis(url, {
    connectionName: options.name,
    maxRetriesPerRequest: options.maxRetriesPerRequest === undefined ? 2 : options.maxRetriesPerRequest,
    enableAutoPipelining: true,
    retryStrategy: (times) => Math.min(50 * 2 ** times, 2000),
    ...options.extra,
  });
}
