import { Redis, type RedisOptions } from 'ioredis';

/**
 * Longest a command of a fail-fast client waits for its reply once connected, ms. Kept under a
 * second so a request meeting a Redis outage gets its 503 within one (it used to wait out the
 * reconnect back-off, 3–5 s).
 */
export const REDIS_COMMAND_TIMEOUT_MS = 700;

/**
 * ioredis's errors for a Redis it cannot reach or that did not answer in time (refused, closed,
 * out of retries, reply timeout): the store is unavailable (503), not a bug of the server (500).
 */
const REDIS_UNAVAILABLE =
  /Connection is closed|Stream isn't writeable|ECONNREFUSED|ECONNRESET|ETIMEDOUT|MaxRetriesPerRequest|Command timed out|Command aborted/;

/** True for an error of ioredis that means Redis was unreachable or did not answer in time. */
export function isRedisUnavailable(err: unknown): boolean {
  return err instanceof Error && REDIS_UNAVAILABLE.test(`${err.name} ${err.message}`);
}

/** Reply timeouts in a row after which a fail-fast client drops its connection and makes a new one. */
export const SILENT_CONNECTION_TIMEOUTS = 3;

/**
 * A connection whose peer went silent while TCP holds (a proxy or a NAT that lost it, a half-dead
 * load balancer) never closes by itself, and ioredis would time out every command on it for as long
 * as the kernel keeps it, minutes: after SILENT_CONNECTION_TIMEOUTS reply timeouts in a row with no
 * reply between them, the client drops it and connects again, as it does when Redis closes it.
 */
function reconnectWhenSilent(redis: Redis): void {
  let timeouts = 0;
  const send = redis.sendCommand.bind(redis);
  redis.sendCommand = ((...args: Parameters<Redis['sendCommand']>) => {
    const [command] = args;
    const result = send(...args);
    command.promise.then(
      () => {
        timeouts = 0;
      },
      (err: unknown) => {
        if (!(err instanceof Error) || err.message !== 'Command timed out') return;
        if (++timeouts < SILENT_CONNECTION_TIMEOUTS || redis.status !== 'ready') return;
        timeouts = 0;
        redis.disconnect(true);
      },
    );
    return result;
  }) as Redis['sendCommand'];
}

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
   * For the clients requests wait on (see createRedis): once connected, no offline queue and a
   * reply timeout of `commandTimeoutMs`. Default false.
   */
  failFast?: boolean;
  /** Reply timeout of a fail-fast client's commands once connected, ms; default REDIS_COMMAND_TIMEOUT_MS. */
  commandTimeoutMs?: number;
  extra?: RedisOptions;
}

/**
 * An ioredis client for `url` (redis://host:port/db), with bounded reconnect back-off; it
 * reconnects by itself for as long as Redis is away.
 *
 * A fail-fast client (`failFast`) waits for its first connection like any client, so start-up
 * does not race Redis; from then on a command fails at once while the connection is down (no
 * offline queue) and after `commandTimeoutMs` without a reply, so requests get their 503 within a
 * second of an outage instead of queueing behind the reconnect. Its `duplicate()`s (subscribers)
 * start as ordinary clients.
 *
 * A fail-fast client never writes a command twice: ioredis would send again, after a reconnect,
 * the commands whose answers the broken connection lost (`autoResendUnfulfilledCommands`), and
 * Redis may have run them already: a script that charges or admits would run twice. Such a
 * command fails instead, at its reply timeout, and what it did is unknown to the caller, as after
 * any timeout. Its duplicates inherit this.
 */
export function createRedis(url: string, options: RedisFactoryOptions): Redis {
  const failFast = options.failFast === true && options.maxRetriesPerRequest !== null;
  const redis = new Redis(url, {
    connectionName: options.name,
    maxRetriesPerRequest: options.maxRetriesPerRequest === undefined ? 2 : options.maxRetriesPerRequest,
    enableAutoPipelining: true,
    autoResendUnfulfilledCommands: !failFast,
    retryStrategy: (times) => Math.min(50 * 2 ** times, 2000),
    ...options.extra,
  });
  if (!failFast) return redis;
  const { enableOfflineQueue, commandTimeout } = redis.options;
  redis.once('ready', () => {
    // ioredis reads both per command, so the switch applies from the next one.
    redis.options.enableOfflineQueue = false;
    redis.options.commandTimeout = options.commandTimeoutMs ?? REDIS_COMMAND_TIMEOUT_MS;
  });
  reconnectWhenSilent(redis);
  const duplicate = redis.duplicate.bind(redis);
  redis.duplicate = (override) => duplicate({ enableOfflineQueue, commandTimeout, ...override });
  return redis;
}
