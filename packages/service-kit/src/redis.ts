import type { ConnectionOptions } from 'node:tls';
import { Redis, type RedisOptions } from 'ioredis';
import { ConfigError } from './config';
import type { Logger } from './logger';
import {
  REDIS_CONNECTION_SOURCES,
  redisConnectionProblems,
  type RedisConnectionConfig,
  type ReplicaWait,
} from './redis-config';

/**
 * Longest a command of a fail-fast client waits for its reply once connected, ms. Kept under a
 * second so a request meeting a Redis outage gets its 503 within one (it used to wait out the
 * reconnect back-off, 3–5 s).
 */
export const REDIS_COMMAND_TIMEOUT_MS = 700;

/**
 * ioredis's errors for a Redis it cannot reach or that did not answer in time (refused, closed,
 * out of retries, reply timeout), and Redis's own for a node that cannot take the command now: a
 * primary demoted by a failover (READONLY, UNBLOCKED), one still loading its data (LOADING), a
 * replica cut from its primary (MASTERDOWN), a primary short of in-sync replicas (NOREPLICAS), no
 * sentinel answering, a write its replicas did not acknowledge in time (ReplicationShortfall). The
 * store is unavailable (503), not a bug of the server (500).
 */
const REDIS_UNAVAILABLE =
  /Connection is closed|Stream isn't writeable|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|EPIPE|MaxRetriesPerRequest|Command timed out|Command aborted|\bREADONLY\b|\bLOADING\b|\bMASTERDOWN\b|\bNOREPLICAS\b|\bUNBLOCKED\b|All sentinels are unreachable|ReplicationShortfall/;

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

/** Applies `apply` to every duplicate of `redis` too (it is applied to `redis` by the caller). */
function alsoForDuplicates(redis: Redis, apply: (copy: Redis) => void): void {
  const duplicate = redis.duplicate.bind(redis);
  redis.duplicate = (override) => {
    const copy = duplicate(override);
    apply(copy);
    return copy;
  };
}

/** Commands after which Redis closes the connection: the program is closing the client. */
const CLOSING_COMMANDS = new Set(['quit', 'shutdown']);

/**
 * ioredis gives a client up for good (status `end`: every command then fails with "Connection is
 * closed.") when its connector is told to disconnect while a connection is being made: through
 * Sentinel, the failover detector of the connection a failover broke does so when the sentinels'
 * +switch-master arrives while the client is asking them where the new primary is, so a failover
 * could leave a process without Redis until restarted. A client the program did not close (quit,
 * disconnect()) connects again, with the reconnection back-off, as after any lost connection.
 */
function reconnectWhenGivenUp(redis: Redis, mostDelayMs: number, report: ConnectionReport | null): void {
  let closing = false;
  let attempts = 0;
  const disconnect = redis.disconnect.bind(redis);
  redis.disconnect = (reconnect = false) => {
    if (!reconnect) closing = true;
    disconnect(reconnect);
  };
  const connect = redis.connect.bind(redis);
  redis.connect = (callback) => {
    // The program opening a closed client again (ioredis's own reconnections start elsewhere).
    if (redis.status === 'end') closing = false;
    return connect(callback);
  };
  const send = redis.sendCommand.bind(redis);
  redis.sendCommand = ((...args: Parameters<Redis['sendCommand']>) => {
    if (CLOSING_COMMANDS.has(args[0].name)) closing = true;
    return send(...args);
  }) as Redis['sendCommand'];
  redis.on('ready', () => {
    attempts = 0;
  });
  redis.on('end', () => {
    if (closing) return;
    attempts += 1;
    report?.('warn', 'redis client was given up by ioredis; connecting again', {});
    // Not unref'd: a process whose client ioredis gave up keeps trying, as it would while reconnecting.
    setTimeout(
      () => {
        if (!closing && redis.status === 'end') connect().catch(() => undefined);
      },
      Math.min(50 * 2 ** attempts, mostDelayMs),
    );
  });
  alsoForDuplicates(redis, (copy) => reconnectWhenGivenUp(copy, mostDelayMs, report));
}

/** Writes one line about a connection (its name added). */
type ConnectionReport = (level: 'warn' | 'info', message: string, meta: Record<string, unknown>) => void;

/** The same error of a connection is logged at most once in this long, ms (with the count of those left out). */
const CONNECTION_ERROR_LOG_EVERY_MS = 5000;

/**
 * Logs a connection's errors (a Redis away, a sentinel not answering) as warnings, the same
 * message at most once every CONNECTION_ERROR_LOG_EVERY_MS, and its return once it is ready again;
 * without a listener ioredis writes each error to stderr as "[ioredis] Unhandled error event",
 * outside the service's JSON log. Its duplicates report too, under the same name.
 */
function reportConnection(redis: Redis, report: ConnectionReport): void {
  const last = new Map<string, { at: number; left: number }>();
  let failing = false;
  redis.on('error', (err: Error) => {
    failing = true;
    const now = performance.now();
    const seen = last.get(err.message);
    if (seen && now - seen.at < CONNECTION_ERROR_LOG_EVERY_MS) {
      seen.left += 1;
      return;
    }
    if (last.size > 32) last.clear();
    last.set(err.message, { at: now, left: 0 });
    report('warn', 'redis connection error', { err: err.message, ...(seen?.left ? { repeated: seen.left } : {}) });
  });
  redis.on('ready', () => {
    if (!failing) return;
    failing = false;
    last.clear();
    report('info', 'redis connection ready again', {});
  });
  alsoForDuplicates(redis, (copy) => reportConnection(copy, report));
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
  /**
   * Where the connection's errors and recoveries go (see reportConnection); without one, ioredis
   * writes its errors to stderr.
   */
  logger?: Pick<Logger, 'warn' | 'info'>;
  extra?: RedisOptions;
}

/** Longest wait between two reconnection tries to a standalone Redis, ms. */
const RECONNECT_MOST_DELAY_MS = 2000;
/**
 * The same through Sentinel, ms: a try costs one question to a sentinel, and once the sentinels
 * have promoted a replica every client should find it within half a second, not two.
 */
const SENTINEL_RECONNECT_MOST_DELAY_MS = 500;
/** Longest a TCP (and TLS) connection to a node found through Sentinel may take, ms. */
const SENTINEL_CONNECT_TIMEOUT_MS = 2000;
/** Reply timeout of a question to a sentinel, ms: a sentinel that hangs is skipped for the next. */
const SENTINEL_COMMAND_TIMEOUT_MS = 1000;

/**
 * How long after a connection through Sentinel is ready it asks the sentinels again whether the
 * node it reached is still the primary, ms. Sentinels disagree for a moment around a failover (one
 * has switched, another not yet): a connection made then, or whose +switch-master came before it
 * listened for one, can land on a primary just demoted. That node takes writes until the sentinels
 * reconfigure it, 8-20 s later, and loses them; the second look sends the connection on.
 */
const SENTINEL_RECHECK_MS = 1500;

/** `host:port` of the primary a majority of the sentinels that answer name; null when none agree. */
async function primaryNamedBySentinels(config: RedisConnectionConfig): Promise<string | null> {
  const tls = config.redisSentinelTls ? tlsOptions(config) : undefined;
  const answers = await Promise.all(
    (config.redisSentinels ?? []).map(async ({ host, port }) => {
      const sentinel = new Redis({
        host,
        port,
        username: config.redisSentinelUsername,
        password: config.redisSentinelPassword,
        tls,
        lazyConnect: true,
        retryStrategy: () => null,
        maxRetriesPerRequest: 0,
        enableOfflineQueue: true,
        connectTimeout: SENTINEL_COMMAND_TIMEOUT_MS,
        commandTimeout: SENTINEL_COMMAND_TIMEOUT_MS,
      });
      sentinel.on('error', () => undefined);
      try {
        const reply = (await sentinel.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', config.redisSentinelName ?? '')) as
          [string, string] | null;
        return reply ? `${reply[0]}:${reply[1]}` : null;
      } catch {
        return null;
      } finally {
        sentinel.disconnect();
      }
    }),
  );
  const counts = new Map<string, number>();
  for (const answer of answers) if (answer) counts.set(answer, (counts.get(answer) ?? 0) + 1);
  const quorum = Math.floor((config.redisSentinels?.length ?? 0) / 2) + 1;
  for (const [address, count] of counts) if (count >= quorum) return address;
  return null;
}

/**
 * Through Sentinel: SENTINEL_RECHECK_MS after each (re)connection, reconnects unless the node
 * reached is the primary a majority of the sentinels name (compared by address; a sentinel that
 * announces host names is not second-guessed).
 */
function recheckPrimaryAfterConnecting(redis: Redis, config: RedisConnectionConfig): void {
  // Its duplicates (subscribers, the worker's blocking connection) look again too.
  alsoForDuplicates(redis, (copy) => recheckPrimaryAfterConnecting(copy, config));
  redis.on('ready', () => {
    const timer = setTimeout(() => {
      const socket = redis.stream;
      const here = socket?.remoteAddress
        ? `${socket.remoteAddress.replace(/^::ffff:/, '')}:${socket.remotePort}`
        : null;
      if (!here || redis.status !== 'ready') return;
      primaryNamedBySentinels(config)
        .then((named) => {
          if (named && /^[0-9.:a-fA-F]+:\d+$/.test(named) && named !== here && redis.status === 'ready') {
            redis.disconnect(true);
          }
        })
        .catch(() => undefined);
    }, SENTINEL_RECHECK_MS);
    timer.unref();
  });
}

/** The TLS options of a connection: the CA, and the client certificate and key, when given. */
function tlsOptions(config: RedisConnectionConfig): ConnectionOptions {
  const tls: ConnectionOptions = {};
  if (config.redisTlsCa !== undefined) tls.ca = config.redisTlsCa;
  if (config.redisTlsCert !== undefined) tls.cert = config.redisTlsCert;
  if (config.redisTlsKey !== undefined) tls.key = config.redisTlsKey;
  return tls;
}

/** True for Redis's refusal of a write by a replica: the primary this client knew was demoted. */
function isReadOnly(err: Error): boolean {
  return /^READONLY\b/.test(err.message);
}

/**
 * The ioredis options that say where Redis is and how to talk to it: TLS (with a private CA or a
 * client certificate) for `rediss://`, and, with sentinels, the primary's name and how to reach
 * the sentinels. The URL passed beside them brings the ACL user, the password and the database.
 */
function redisConnectionOptions(config: RedisConnectionConfig): RedisOptions {
  const tls = tlsOptions(config);
  const dataTls = config.redisUrl.startsWith('rediss://');
  const options: RedisOptions = dataTls ? { tls } : {};
  if (!config.redisSentinels) return options;
  return {
    ...options,
    sentinels: config.redisSentinels.map(({ host, port }) => ({ host, port })),
    name: config.redisSentinelName,
    sentinelUsername: config.redisSentinelUsername,
    sentinelPassword: config.redisSentinelPassword,
    ...(config.redisSentinelTls ? { sentinelTLS: tls } : {}),
    // Without it ioredis speaks plain TCP to the primary the sentinels name, rediss:// or not.
    // Sentinels answer with addresses: the primary's certificate must carry its address, or the
    // sentinels announce host names (`sentinel announce-hostnames yes`).
    enableTLSForSentinelMode: dataTls,
    connectTimeout: SENTINEL_CONNECT_TIMEOUT_MS,
    sentinelCommandTimeout: SENTINEL_COMMAND_TIMEOUT_MS,
    sentinelRetryStrategy: (times: number) => Math.min(100 * times, SENTINEL_RECONNECT_MOST_DELAY_MS),
    // Each connection listens to the sentinels' +switch-master and reconnects at once. Else a
    // switchover (SENTINEL FAILOVER, or a failover while the old primary still runs) leaves it on
    // the old primary, which takes writes, lost, until the sentinels demote it 8-20 s later.
    failoverDetector: true,
  };
}

/**
 * An ioredis client for the Redis `connection` names: a URL (redis://host:port/db, rediss:// for
 * TLS, user:password@ for an ACL user), or a service's config with REDIS_URL, Sentinel and TLS
 * settings (RedisConnectionConfig). Every connection of every process is made here, so each one
 * follows the same settings; through Sentinel it asks the sentinels for the primary at each
 * (re)connection and checks the node it reached is one. It reconnects by itself, with bounded
 * back-off, for as long as Redis is away; a write refused with READONLY (a primary demoted by a
 * failover while the connection held) makes it reconnect to the new primary.
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
export function createRedis(connection: string | RedisConnectionConfig, options: RedisFactoryOptions): Redis {
  const config = typeof connection === 'string' ? { redisUrl: connection } : connection;
  const problems = redisConnectionProblems(config);
  if (problems.length > 0) {
    const named = problems.map(({ field, message }) => `${REDIS_CONNECTION_SOURCES[field].env}: ${message}`);
    throw new ConfigError(`Invalid configuration: ${named.join('; ')}`);
  }
  const failFast = options.failFast === true && options.maxRetriesPerRequest !== null;
  const mostDelay = config.redisSentinels ? SENTINEL_RECONNECT_MOST_DELAY_MS : RECONNECT_MOST_DELAY_MS;
  const redis = new Redis(config.redisUrl, {
    connectionName: options.name,
    maxRetriesPerRequest: options.maxRetriesPerRequest === undefined ? 2 : options.maxRetriesPerRequest,
    enableAutoPipelining: true,
    autoResendUnfulfilledCommands: !failFast,
    retryStrategy: (times) => Math.min(50 * 2 ** times, mostDelay),
    // 1: reconnect; 2: reconnect and send the refused command again, as these clients do with
    // every command a broken connection left unanswered (a refused write did not run).
    reconnectOnError: (err) => (isReadOnly(err) ? (failFast ? 1 : 2) : false),
    ...redisConnectionOptions(config),
    ...options.extra,
  });
  if (config.redisSentinels) recheckPrimaryAfterConnecting(redis, config);
  const { logger, name } = options;
  const report: ConnectionReport | null = logger
    ? (level, message, meta) => logger[level](message, { redis_connection: name, ...meta })
    : null;
  if (report) reportConnection(redis, report);
  reconnectWhenGivenUp(redis, mostDelay, report);
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

/**
 * How long after a wait fell short the next waits on that connection fail at once, ms. A replica
 * away makes every wait last its whole timeout, and each holds the connection meanwhile: the
 * writes queued behind would all wait out their reply timeouts. Failing at once for a second
 * keeps the refusals quick, and the next wait after it finds out whether the replicas are back.
 */
export const REPLICA_SHORTFALL_HOLD_MS = 1000;

/** A write its replicas did not all acknowledge within the wait (Redis WAIT): it may not survive a failover. */
export class ReplicationShortfallError extends Error {
  constructor(
    readonly acknowledged: number,
    readonly wait: ReplicaWait,
    /** True when no WAIT was sent: one on this connection fell short less than REPLICA_SHORTFALL_HOLD_MS ago. */
    readonly held = false,
  ) {
    super(
      held
        ? `ReplicationShortfall: not waited for, the replicas fell short less than ${REPLICA_SHORTFALL_HOLD_MS} ms ago`
        : `ReplicationShortfall: ${acknowledged} of ${wait.replicas} replicas acknowledged the write within ${wait.timeoutMs} ms`,
    );
    this.name = 'ReplicationShortfallError';
  }
}

/** Until when (performance.now) waits on a connection fail at once, after one fell short. */
const shortUntil = new WeakMap<Redis, number>();

/**
 * Resolves once `wait.replicas` replicas hold every write `redis` (this connection) has made so
 * far (Redis WAIT); rejects with a ReplicationShortfallError when fewer did within
 * `wait.timeoutMs`, or at once for REPLICA_SHORTFALL_HOLD_MS after that, and with the
 * connection's error when it broke first. WAIT counts this connection's own writes: call it on
 * the connection that made the last write to protect (the writes before it, of any connection,
 * sit earlier in the one replication stream). It holds the connection meanwhile: commands
 * written behind it wait for its answer.
 */
export async function confirmReplicated(redis: Redis, wait: ReplicaWait): Promise<void> {
  if (performance.now() < (shortUntil.get(redis) ?? 0)) throw new ReplicationShortfallError(0, wait, true);
  const acknowledged = await redis.wait(wait.replicas, wait.timeoutMs);
  if (acknowledged >= wait.replicas) return;
  shortUntil.set(redis, performance.now() + REPLICA_SHORTFALL_HOLD_MS);
  throw new ReplicationShortfallError(acknowledged, wait);
}
