import { z } from 'zod';
import {
  durationMs,
  envBoolean,
  HTTP_LIMIT_FIELDS,
  HTTP_LIMIT_SOURCES,
  checkRedisConnection,
  loadConfig,
  portNumber,
  REDIS_CONNECTION_FIELDS,
  REDIS_CONNECTION_SOURCES,
  type ConfigSource,
  type HttpLimits,
  type RedisConnectionConfig,
} from '@tollway/service-kit';
import { TELEMETRY_CONFIG_FIELDS, TELEMETRY_CONFIG_SOURCES, type TelemetryConfig } from '@tollway/telemetry';

/**
 * Fields both process kinds (API and worker) read, so `worker-config.ts` spreads them into its
 * own schema: `z.object({ ...SHARED_CONFIG_FIELDS, ... }).superRefine(checkRedisConnection)` with
 * `{ ...SHARED_CONFIG_SOURCES, ... }`.
 */
export const SHARED_CONFIG_FIELDS = {
  /** Where the sessions, the queue and the accounts live (REDIS_URL, REDIS_SENTINELS, TLS, …): see @tollway/service-kit. */
  ...REDIS_CONNECTION_FIELDS,
  /** Prefix of every Redis key and channel; default `tollway:`. */
  redisPrefix: z.string().default('tollway:'),
  /** winston log level; default `info`. */
  logLevel: z.enum(['error', 'warn', 'info', 'http', 'verbose', 'debug', 'silly']).default('info'),
  /** Most entries a session's event log keeps (oldest trimmed first, approximately); default 10 000. */
  eventLogMaxEntries: z.coerce.number().int().min(100).max(10_000_000).default(10_000),
  /** How long a session's event log lives after its last event, ms; default 600 000 (10 minutes). */
  eventLogRetentionMs: durationMs(1000).default(600_000),
  /** Metrics and tracing (METRICS_ENABLED, METRICS_PORT, METRICS_HOST, OTEL_*): see @tollway/telemetry. */
  ...TELEMETRY_CONFIG_FIELDS,
};

/** Where the shared fields are read from. */
export const SHARED_CONFIG_SOURCES = {
  ...REDIS_CONNECTION_SOURCES,
  redisPrefix: { env: 'REDIS_PREFIX', flag: 'redis-prefix' },
  logLevel: { env: 'LOG_LEVEL', flag: 'log-level' },
  eventLogMaxEntries: { env: 'SESSION_EVENTS_MAX_ENTRIES' },
  eventLogRetentionMs: { env: 'SESSION_EVENTS_RETENTION_MS' },
  ...TELEMETRY_CONFIG_SOURCES,
} satisfies Record<keyof typeof SHARED_CONFIG_FIELDS, ConfigSource>;

const apiSchema = z
  .object({
    ...SHARED_CONFIG_FIELDS,
    /** Listening port; default 8081 (0 picks a free one). */
    port: portNumber.default(8081),
    /** Listening address; default `0.0.0.0`. */
    host: z.string().min(1).default('0.0.0.0'),
    /** Seconds of inactivity after which idle and errored sessions are swept; 0 (default) turns the sweep off. */
    ttlSeconds: z.coerce.number().min(0).default(0),
    /** How often the TTL sweeper runs, in ms; default a quarter of the TTL, clamped to 250–5000. */
    sweepIntervalMs: durationMs(10).optional(),
    /** Cap on the number of sessions held (all organizations together); default 10 000. */
    maxSessions: z.coerce.number().int().min(1).default(10_000),
    /** Enables `PUT /sessions/{id}` with client-chosen UUIDs; default false. */
    allowCustomIds: envBoolean.default(false),
    /** Bearer-key authentication of the session endpoints; default true (`SESSIONS_AUTH=false` turns it off). */
    auth: envBoolean.default(true),
    /** `--no-auth`: turns authentication off for local development; default false. */
    noAuth: envBoolean.default(false),
    /** Runs one worker inside the API process (quickstart); default false. */
    embeddedWorker: envBoolean.default(false),
    /** Largest accepted request body in bytes; default 10 MiB (room for a `base64_image`). */
    maxBodyBytes: z.coerce.number().int().min(1024).default(10_485_760),
    /**
     * Largest history a session may hold, bytes of its messages as JSON; default 4 MiB, the gateway's
     * own body limit, since a turn sends the whole history in one request. A create or send past it is 413.
     */
    maxHistoryBytes: z.coerce
      .number()
      .int()
      .min(1024)
      .default(4 * 1024 * 1024),
    /** Deepest nesting of arrays and objects in a body, checked before parsing; default 64. Deeper gets 400 `invalid_json`. */
    maxJsonDepth: z.coerce.number().int().min(2).max(10_000).default(64),
    /** A heartbeat comment on every event stream this often, ms; default 15 000. */
    eventsHeartbeatMs: durationMs(100).default(15_000),
    /** Bytes an event stream's client may leave unread before it is dropped (it resumes by id); default 1 MiB. */
    eventsReaderBufferBytes: z.coerce.number().int().min(16_384).default(1_048_576),
    /** Event streams one organization may hold open on one API process; default 1000. More get 429. */
    eventsMaxStreamsPerOrg: z.coerce.number().int().min(1).default(1000),
    /** Sessions one organization may hold unless its record sets its own; default 0 = only `maxSessions` applies. */
    orgMaxSessions: z.coerce.number().int().min(0).max(1_000_000_000).default(0),
    /** Turns one organization may have executing at once unless its record sets its own; default 0 = no cap. */
    orgMaxRunningTurns: z.coerce.number().int().min(0).max(1_000_000).default(0),
    /** Turns one organization may have waiting unless its record sets its own; default 0 = no limit. */
    orgMaxWaitingTurns: z.coerce.number().int().min(0).max(1_000_000_000).default(0),
    /** An organization's share of the workers when several wait, unless its record sets its own; default 1. */
    orgTurnWeight: z.coerce.number().int().min(1).max(1000).default(1),
    ...HTTP_LIMIT_FIELDS,
  })
  .superRefine(checkRedisConnection);

const apiSources = {
  ...SHARED_CONFIG_SOURCES,
  port: { env: 'SESSIONS_PORT', flag: 'port' },
  host: { env: 'SESSIONS_HOST', flag: 'host' },
  ttlSeconds: { env: 'SESSION_TTL_SECONDS', flag: 'ttl' },
  sweepIntervalMs: { env: 'SESSION_SWEEP_INTERVAL_MS', flag: 'sweep-interval-ms' },
  maxSessions: { env: 'MAX_SESSIONS', flag: 'max-sessions' },
  allowCustomIds: { env: 'ALLOW_CUSTOM_IDS', flag: 'allow-custom-ids', boolean: true },
  auth: { env: 'SESSIONS_AUTH' },
  noAuth: { env: 'SESSIONS_NO_AUTH', flag: 'no-auth', boolean: true },
  embeddedWorker: { env: 'EMBEDDED_WORKER', flag: 'embedded-worker', boolean: true },
  maxBodyBytes: { env: 'SESSIONS_MAX_BODY_BYTES', flag: 'max-body-bytes' },
  maxHistoryBytes: { env: 'SESSIONS_MAX_HISTORY_BYTES', flag: 'max-history-bytes' },
  maxJsonDepth: { env: 'SESSIONS_MAX_JSON_DEPTH' },
  eventsHeartbeatMs: { env: 'SESSION_EVENTS_HEARTBEAT_MS' },
  eventsReaderBufferBytes: { env: 'SESSION_EVENTS_READER_BUFFER_BYTES' },
  eventsMaxStreamsPerOrg: { env: 'SESSION_EVENTS_MAX_STREAMS_PER_ORG' },
  orgMaxSessions: { env: 'ORG_MAX_SESSIONS', flag: 'org-max-sessions' },
  orgMaxRunningTurns: { env: 'ORG_MAX_RUNNING_TURNS', flag: 'org-max-running-turns' },
  orgMaxWaitingTurns: { env: 'ORG_MAX_WAITING_TURNS', flag: 'org-max-waiting-turns' },
  orgTurnWeight: { env: 'ORG_TURN_WEIGHT', flag: 'org-turn-weight' },
  ...HTTP_LIMIT_SOURCES,
} satisfies Record<keyof z.infer<typeof apiSchema>, ConfigSource>;

/** The API process's configuration: connection limits (HTTP_LIMIT_FIELDS of @tollway/service-kit) and telemetry included. */
export interface ApiConfig extends HttpLimits, TelemetryConfig, RedisConnectionConfig {
  redisPrefix: string;
  logLevel: z.infer<typeof SHARED_CONFIG_FIELDS.logLevel>;
  eventLogMaxEntries: number;
  eventLogRetentionMs: number;
  port: number;
  host: string;
  /** TTL sweep period in seconds; 0 = never sweep. */
  ttlSeconds: number;
  /** Sweeper period in ms (derived from the TTL unless set). */
  sweepIntervalMs: number;
  maxSessions: number;
  allowCustomIds: boolean;
  /** True unless `--no-auth` or `SESSIONS_AUTH=false`. */
  authEnabled: boolean;
  embeddedWorker: boolean;
  maxBodyBytes: number;
  maxHistoryBytes: number;
  maxJsonDepth: number;
  eventsHeartbeatMs: number;
  eventsReaderBufferBytes: number;
  eventsMaxStreamsPerOrg: number;
  /** Per-organization defaults (0 = none); an organization's record may set its own. */
  orgMaxSessions: number;
  orgMaxRunningTurns: number;
  orgMaxWaitingTurns: number;
  orgTurnWeight: number;
}

/** Parses the API's flags and environment once; throws a ConfigError naming a bad value. */
export function loadApiConfig(input: { env?: NodeJS.ProcessEnv; argv?: readonly string[] } = {}): Readonly<ApiConfig> {
  const { auth, noAuth, sweepIntervalMs, ...rest } = loadConfig(apiSchema, apiSources, input);
  return Object.freeze({
    ...rest,
    authEnabled: auth && !noAuth,
    sweepIntervalMs: sweepIntervalMs ?? defaultSweepIntervalMs(rest.ttlSeconds),
  });
}

/** A quarter of the TTL, clamped to 250–5000 ms, so a session outlives its TTL by at most a few seconds. */
export function defaultSweepIntervalMs(ttlSeconds: number): number {
  return Math.min(5000, Math.max(250, Math.round((ttlSeconds * 1000) / 4)));
}
