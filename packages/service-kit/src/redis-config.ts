import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { envBoolean, durationMs, type ConfigSource } from './config';

/**
 * A Redis address as ioredis reads it: a `redis://` or `rediss://` URL with a host, or the absolute
 * path of a unix socket. Anything else is an error at start-up: ioredis would take `notaurl` for
 * a host name and every command would fail later, far from the setting that caused it.
 */
export const redisUrl = z.string().refine(isRedisAddress, {
  message:
    'must be a redis:// or rediss:// URL with a host (redis://host:6379/0), or the absolute path of a unix socket',
});

function isRedisAddress(value: string): boolean {
  if (value.trim() !== value) return false; // URL would drop the blanks; ioredis would not
  if (value.startsWith('/')) return true;
  if (!URL.canParse(value)) return false;
  const url = new URL(value);
  return (url.protocol === 'redis:' || url.protocol === 'rediss:') && url.hostname !== '';
}

/** One Sentinel's address. */
export interface SentinelAddress {
  host: string;
  port: number;
}

/** Sentinel's own port, for an entry written without one. */
const SENTINEL_DEFAULT_PORT = 26379;

/** `host`, `host:port` or `[v6]:port`; null when it is none of them. */
function parseSentinel(entry: string): SentinelAddress | null {
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([^\s:[\]/@?#]+))(?::([0-9]{1,5}))?$/.exec(entry);
  if (!match) return null;
  const port = match[3] === undefined ? SENTINEL_DEFAULT_PORT : Number(match[3]);
  if (port < 1 || port > 65535) return null;
  return { host: (match[1] ?? match[2]) as string, port };
}

/** `host:port,host:port,…` (a port left out is 26379); a bad entry is refused, naming it. */
const sentinelList = z.string().transform((value, ctx): readonly SentinelAddress[] => {
  const entries = value.split(',').map((entry) => entry.trim());
  const sentinels: SentinelAddress[] = [];
  for (const entry of entries) {
    const sentinel = parseSentinel(entry);
    if (!sentinel) {
      ctx.addIssue({
        code: 'custom',
        message: `"${entry}" is not a Sentinel address: write host:port, separated by commas (10.0.0.5:26379,[fd00::5]:26379)`,
      });
      return z.NEVER;
    }
    sentinels.push(sentinel);
  }
  return sentinels;
});

/**
 * A PEM file read once at start-up: the value is the file's text. A path that cannot be read, or
 * a file that is not PEM, is refused at start, not at the first TLS handshake.
 */
const pemFile = z.string().transform((path, ctx): string => {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? err}` });
    return z.NEVER;
  }
  if (!text.includes('-----BEGIN ')) {
    ctx.addIssue({ code: 'custom', message: `${path} is not a PEM file (no -----BEGIN line)` });
    return z.NEVER;
  }
  return text;
});

/** A name or password as Redis takes it: printable, no blanks or control characters. */
const redisWord = z.string().regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without blanks');

/**
 * The longest REDIS_WAIT_TIMEOUT_MS: below a fail-fast client's reply timeout (700 ms), so a
 * replica that does not answer in time reads as "not replicated", not as Redis being away.
 */
export const MAX_REDIS_WAIT_TIMEOUT_MS = 500;

/**
 * How every process reaches Redis: the fields each service spreads into its config schema (with
 * `.superRefine(checkRedisConnection)`), and the object `createRedis` takes. See the service
 * READMEs, "Redis".
 */
export const REDIS_CONNECTION_FIELDS = {
  /**
   * Redis URL, `redis://` or `rediss://` (TLS), with `user:password@` for an ACL user and `/db`;
   * or a unix socket path. With Sentinel its host and port are not used (the sentinels name the
   * primary), its user, password, database and TLS apply to the data nodes. Default `redis://127.0.0.1:6379`.
   */
  redisUrl: redisUrl.default('redis://127.0.0.1:6379'),
  /** Sentinels to ask for the primary, `host:port,…`; unset = connect to REDIS_URL directly. */
  redisSentinels: sentinelList.optional(),
  /** Name of the primary the sentinels monitor (`sentinel monitor <name> …`); required with REDIS_SENTINELS. */
  redisSentinelName: redisWord.optional(),
  /** ACL user of the sentinels themselves (their `requirepass`/ACL, not the data nodes'). */
  redisSentinelUsername: redisWord.optional(),
  /** Password of the sentinels themselves. */
  redisSentinelPassword: z.string().min(1).optional(),
  /** Speak TLS to the sentinels; default false. */
  redisSentinelTls: envBoolean.default(false),
  /** PEM of the CA(s) that sign the Redis and Sentinel certificates (a private CA); default the system's. */
  redisTlsCa: pemFile.optional(),
  /** PEM client certificate for mutual TLS (with REDIS_TLS_KEY_FILE). */
  redisTlsCert: pemFile.optional(),
  /** PEM private key of REDIS_TLS_CERT_FILE. */
  redisTlsKey: pemFile.optional(),
  /**
   * Replicas that must acknowledge the writes behind a 202 (a sent message) and a settlement
   * before they count as done (Redis WAIT); 0 = none. Default 1 with REDIS_SENTINELS, else 0.
   */
  redisWaitReplicas: z.coerce.number().int().min(0).max(64).optional(),
  /** Longest wait for those acknowledgements, ms; default 250, at most 500. */
  redisWaitTimeoutMs: durationMs(1).max(MAX_REDIS_WAIT_TIMEOUT_MS).default(250),
};

/** Where the Redis connection fields are read from. */
export const REDIS_CONNECTION_SOURCES = {
  redisUrl: { env: 'REDIS_URL', flag: 'redis-url' },
  redisSentinels: { env: 'REDIS_SENTINELS' },
  redisSentinelName: { env: 'REDIS_SENTINEL_NAME' },
  redisSentinelUsername: { env: 'REDIS_SENTINEL_USERNAME' },
  redisSentinelPassword: { env: 'REDIS_SENTINEL_PASSWORD' },
  redisSentinelTls: { env: 'REDIS_SENTINEL_TLS' },
  redisTlsCa: { env: 'REDIS_TLS_CA_FILE' },
  redisTlsCert: { env: 'REDIS_TLS_CERT_FILE' },
  redisTlsKey: { env: 'REDIS_TLS_KEY_FILE' },
  redisWaitReplicas: { env: 'REDIS_WAIT_REPLICAS' },
  redisWaitTimeoutMs: { env: 'REDIS_WAIT_TIMEOUT_MS' },
} satisfies Record<keyof typeof REDIS_CONNECTION_FIELDS, ConfigSource>;

/**
 * Where and how to reach Redis (the parsed REDIS_CONNECTION_FIELDS). Only `redisUrl` is required,
 * so a test can pass `{ redisUrl }`; a service passes its whole config.
 */
export interface RedisConnectionConfig {
  redisUrl: string;
  redisSentinels?: readonly SentinelAddress[] | undefined;
  redisSentinelName?: string | undefined;
  redisSentinelUsername?: string | undefined;
  redisSentinelPassword?: string | undefined;
  redisSentinelTls?: boolean | undefined;
  /** PEM text (read from REDIS_TLS_CA_FILE). */
  redisTlsCa?: string | undefined;
  redisTlsCert?: string | undefined;
  redisTlsKey?: string | undefined;
  redisWaitReplicas?: number | undefined;
  redisWaitTimeoutMs?: number | undefined;
}

/** The Redis fields of a service's config, alone (for an embedded worker, a child process). */
export function redisConnectionOf(config: RedisConnectionConfig): RedisConnectionConfig {
  const picked: Record<string, unknown> = {};
  for (const key of Object.keys(REDIS_CONNECTION_FIELDS)) {
    const value = (config as unknown as Record<string, unknown>)[key];
    if (value !== undefined) picked[key] = value;
  }
  return picked as unknown as RedisConnectionConfig;
}

/** A setting that does not fit the others: its field, and why. */
export interface RedisConnectionProblem {
  field: keyof typeof REDIS_CONNECTION_FIELDS;
  message: string;
}

/**
 * What is wrong with a combination of Redis settings, each named by its field (loadConfig names
 * the variable): a sentinel setting without REDIS_SENTINELS, Sentinel without a primary's name, a
 * TLS file with no TLS connection to use it on, half a client certificate. Each would otherwise
 * be ignored in silence, or fail at the first connection, far from the setting.
 */
export function redisConnectionProblems(config: RedisConnectionConfig): RedisConnectionProblem[] {
  const problems: RedisConnectionProblem[] = [];
  const sentinel = config.redisSentinels !== undefined;
  if (sentinel && config.redisSentinelName === undefined) {
    problems.push({
      field: 'redisSentinelName',
      message: 'is required with REDIS_SENTINELS (the monitored primary’s name)',
    });
  }
  if (sentinel && config.redisUrl.startsWith('/')) {
    problems.push({
      field: 'redisUrl',
      message:
        'must be a redis:// or rediss:// URL with REDIS_SENTINELS (a unix socket cannot be found through Sentinel)',
    });
  }
  if (!sentinel) {
    for (const field of ['redisSentinelName', 'redisSentinelUsername', 'redisSentinelPassword'] as const) {
      if (config[field] !== undefined)
        problems.push({ field, message: 'applies only with REDIS_SENTINELS, which is unset' });
    }
    if (config.redisSentinelTls)
      problems.push({ field: 'redisSentinelTls', message: 'applies only with REDIS_SENTINELS, which is unset' });
  }
  if (config.redisSentinelUsername !== undefined && config.redisSentinelPassword === undefined) {
    problems.push({ field: 'redisSentinelPassword', message: 'is required with REDIS_SENTINEL_USERNAME' });
  }
  const tls = config.redisUrl.startsWith('rediss://') || config.redisSentinelTls === true;
  for (const field of ['redisTlsCa', 'redisTlsCert', 'redisTlsKey'] as const) {
    if (config[field] !== undefined && !tls) {
      problems.push({
        field,
        message: 'applies only to TLS connections: make REDIS_URL rediss:// (or set REDIS_SENTINEL_TLS=true)',
      });
    }
  }
  if ((config.redisTlsCert === undefined) !== (config.redisTlsKey === undefined)) {
    const field = config.redisTlsCert === undefined ? 'redisTlsCert' : 'redisTlsKey';
    problems.push({ field, message: 'a client certificate needs both REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE' });
  }
  return problems;
}

/** For a service schema: `z.object({ ...REDIS_CONNECTION_FIELDS, … }).superRefine(checkRedisConnection)`. */
export function checkRedisConnection(config: RedisConnectionConfig, ctx: z.RefinementCtx): void {
  for (const { field, message } of redisConnectionProblems(config)) {
    ctx.addIssue({ code: 'custom', path: [field], message });
  }
}

/** How many replicas must acknowledge a durable write, and for how long to wait; null = no wait. */
export interface ReplicaWait {
  replicas: number;
  timeoutMs: number;
}

/** REDIS_WAIT_REPLICAS as it applies: unset means 1 with Sentinel (a failover target exists), else 0. */
export function replicaWaitOf(config: RedisConnectionConfig): ReplicaWait | null {
  const replicas = config.redisWaitReplicas ?? (config.redisSentinels ? 1 : 0);
  return replicas > 0 ? { replicas, timeoutMs: config.redisWaitTimeoutMs ?? 250 } : null;
}

/**
 * Where `config` says Redis is, for a message or a log line, passwords masked (in the user part
 * and in a `?password=` query): the URL, or the primary's name and the sentinels asked for it.
 */
export function describeRedis(config: RedisConnectionConfig): string {
  const url = withoutPassword(config.redisUrl);
  if (!config.redisSentinels) return url;
  const sentinels = config.redisSentinels.map(({ host, port }) => `${host.includes(':') ? `[${host}]` : host}:${port}`);
  return `the primary "${config.redisSentinelName ?? ''}" of sentinels ${sentinels.join(',')} (${url})`;
}

function withoutPassword(address: string): string {
  if (!URL.canParse(address)) return address;
  const url = new URL(address);
  if (url.password) url.password = '***';
  if (url.searchParams.has('password')) url.searchParams.set('password', '***');
  return url.toString();
}
