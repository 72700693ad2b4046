import path from 'node:path';
import { z } from 'zod';
import { DEFAULT_ENGINE_RESPONSE_LIMITS } from './engines/engine.types';
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
} from '@tollway/service-kit';
import { DEFAULT_MAX_KEYS_PER_ORGANIZATION } from '@tollway/accounts';
import { TELEMETRY_CONFIG_FIELDS, TELEMETRY_CONFIG_SOURCES } from '@tollway/telemetry';

/** The catalog that ships with the service (copied into `dist/` by the build). */
export const DEFAULT_CATALOG_PATH = path.resolve(__dirname, '..', 'catalog', 'default.catalog.yaml');

const apiKeyList = z.string().transform((value) =>
  value
    .split(',')
    .map((key) => key.trim())
    .filter((key) => key.length > 0),
);

/** The gateway's configuration, read once at start-up from the environment and flags. */
export const GatewayConfigSchema = z
  .object({
    /** TCP port to listen on; default 8080. */
    port: portNumber.default(8080),
    /** Interface to bind; default all interfaces. */
    host: z.string().default('0.0.0.0'),
    /** Where Redis is (REDIS_URL, REDIS_SENTINELS, TLS, …): see @tollway/service-kit's redis-config.ts. */
    ...REDIS_CONNECTION_FIELDS,
    /** Prefix of every Redis key the gateway writes; default `tollway:`. */
    redisPrefix: z.string().default('tollway:'),
    /** Path of the model catalog (YAML or JSON); default the shipped catalog. */
    catalogPath: z.string().default(DEFAULT_CATALOG_PATH),
    /** Reload the catalog when its file changes (SIGHUP always reloads); default true. */
    catalogWatch: envBoolean.default(true),
    /** Largest accepted request body, in bytes; default 4 MiB. Larger bodies get 400 `request_too_large`. */
    maxBodyBytes: z.coerce
      .number()
      .int()
      .min(1024)
      .default(4 * 1024 * 1024),
    /** Deepest nesting of arrays and objects in a request body, checked before parsing; default 64. Deeper gets 400 `invalid_json`. */
    maxJsonDepth: z.coerce.number().int().min(2).max(10_000).default(64),
    /** Largest non-streamed engine response (or error body) read, bytes; default 16 MiB. Larger gets 502 `bad_engine_response`. */
    maxEngineResponseBytes: z.coerce.number().int().min(1024).default(DEFAULT_ENGINE_RESPONSE_LIMITS.maxResponseBytes),
    /** Largest single SSE event from an engine, bytes; default 1 MiB. Larger ends the stream with an error event (502 before the first byte). */
    maxEngineEventBytes: z.coerce.number().int().min(1024).default(DEFAULT_ENGINE_RESPONSE_LIMITS.maxEventBytes),
    /** Largest whole engine stream, bytes; default 256 MiB. Longer streams end with an error event. */
    maxEngineStreamBytes: z.coerce.number().int().min(1024).default(DEFAULT_ENGINE_RESPONSE_LIMITS.maxStreamBytes),
    /** Upstream timeout in milliseconds: time to the engine's first byte, and longest silence mid-stream; default 300 000. */
    upstreamTimeoutMs: durationMs(1).default(300_000),
    /**
     * Time a SIGTERM leaves the gateway to finish, ms; default 30 000 (Kubernetes' default grace).
     * Requests in flight run on until 5 s before it (at least half of it); the streams still open
     * then end with a `server_shutting_down` event, and what they relayed is settled. At most a day
     * (node's timers cannot wait longer than 2^31 - 1 ms).
     */
    shutdownGraceMs: durationMs(1000).max(86_400_000).default(30_000),
    /** Upstream connections kept per engine replica; default 128. */
    upstreamConnections: z.coerce.number().int().min(1).default(128),
    /** Output tokens reserved when a request sets neither max_tokens nor max_completion_tokens; default 1024. */
    defaultOutputReservationTokens: z.coerce.number().int().min(1).default(1024),
    /** Prompt texts whose token count is remembered (by SHA-256, least recently used first); default 4096 (about 0.6 MB full), at most 100 000 (about 14 MB); 0 = count every time. */
    promptTokenCacheEntries: z.coerce.number().int().min(0).max(100_000).default(4096),
    /** API keys accepted by the config-key authenticator (comma-separated `API_KEYS`); default none. */
    apiKeys: apiKeyList.default([]),
    /**
     * Service keys (comma-separated `SERVICE_API_KEYS`, each 32-256 printable ASCII characters): a
     * request bearing one acts for the organization it names in `x-tollway-organization` and is
     * metered as that organization's (the agent session service's workers); default none.
     */
    serviceApiKeys: apiKeyList
      .pipe(
        z.array(
          z
            .string()
            .regex(/^[\x21-\x7e]{32,256}$/, 'each service key must be 32-256 printable ASCII characters, no spaces'),
        ),
      )
      .default([]),
    /**
     * Bearer token of the admin API (`/admin/v1`) and the console's operator sign-in; unset = neither
     * is mounted. 16+ characters: the admin API does not slow guesses down (the console's sign-in does).
     */
    adminToken: z
      .string()
      .min(16, "must be at least 16 characters: it is the operator's credential")
      .max(1024)
      .optional(),
    /** Plaintext key of the quickstart's `dev` organization (`tw-` + 32-128 base64url characters); unset = none. */
    devApiKey: z
      .string()
      .regex(/^tw-[A-Za-z0-9_-]{32,128}$/, 'must be tw- followed by 32-128 letters, digits, _ or -')
      .optional(),
    /**
     * The most API keys one organization may hold, live and revoked (a revoked key stays listed); at
     * the cap a new key takes the place of the key revoked longest ago, and with every key live a
     * create is 409 `key_limit_reached`. Default 1000.
     */
    maxKeysPerOrganization: z.coerce.number().int().min(1).max(1_000_000).default(DEFAULT_MAX_KEYS_PER_ORGANIZATION),
    /** How long an API-key lookup is cached in process, ms (revocations evict at once via pub/sub); default 5000. */
    authCacheTtlMs: durationMs(0).default(5000),
    /** Lifetime of a capacity lease without renewal, ms (a crashed replica's leases expire after it); default 30 000. */
    capacityLeaseMs: durationMs(100).default(30_000),
    /** `retry-after-ms` advised when a model is at capacity, ms; default 1000. */
    capacityRetryAfterMs: durationMs(1).default(1000),
    /**
     * Admit most requests in process from quota slices and capacity blocks leased from Redis
     * (see src/admission/README.md, "Local admission"); off = every request is admitted in Redis.
     * Default true.
     */
    admissionSlices: envBoolean.default(true),
    /** How long a replica admits from one quota slice before giving it back, ms; default 1000. */
    admissionSliceMs: durationMs(10).max(60_000).default(1000),
    /**
     * HMAC key of the console's session cookie and CSRF token (`CONSOLE_SESSION_SECRET`, 32+ characters);
     * default derived from ADMIN_TOKEN, so every replica agrees and changing the token ends all sessions.
     */
    consoleSessionSecret: z.string().min(32, 'must be at least 32 characters').optional(),
    /** Lifetime of a console session, ms; default 8 hours. */
    consoleSessionTtlMs: durationMs(60_000).default(8 * 60 * 60 * 1000),
    /** Failed console sign-ins one client address may make per window; default 10. */
    consoleSignInMaxFailures: z.coerce.number().int().min(1).default(10),
    /** Window of the failed sign-in limit, ms; default 15 minutes. */
    consoleSignInWindowMs: durationMs(1000).default(15 * 60 * 1000),
    /** Folder of the built console (`index.html`, `assets/`); default the @tollway/console package's `dist`. */
    consoleDir: z.string().optional(),
    /** winston log level; default `info`. */
    logLevel: z.enum(['error', 'warn', 'info', 'http', 'verbose', 'debug', 'silly']).default('info'),
    /** One JSON access log line per request (winston, level info); default true. */
    accessLog: envBoolean.default(true),
    /** Metrics and tracing (METRICS_ENABLED, METRICS_PORT, METRICS_HOST, OTEL_*): see @tollway/telemetry. */
    ...TELEMETRY_CONFIG_FIELDS,
    ...HTTP_LIMIT_FIELDS,
  })
  .superRefine(checkRedisConnection);

/** Parsed gateway configuration. */
export type GatewayConfig = Readonly<z.infer<typeof GatewayConfigSchema>>;

/** Where each config field is read from. */
export const GATEWAY_CONFIG_SOURCES: Record<keyof z.infer<typeof GatewayConfigSchema>, ConfigSource> = {
  port: { env: 'GATEWAY_PORT', flag: 'port' },
  host: { env: 'GATEWAY_HOST', flag: 'host' },
  ...REDIS_CONNECTION_SOURCES,
  redisPrefix: { env: 'REDIS_PREFIX' },
  catalogPath: { env: 'CATALOG_PATH', flag: 'catalog' },
  catalogWatch: { env: 'CATALOG_WATCH' },
  maxBodyBytes: { env: 'MAX_BODY_BYTES' },
  maxJsonDepth: { env: 'MAX_JSON_DEPTH' },
  maxEngineResponseBytes: { env: 'MAX_ENGINE_RESPONSE_BYTES' },
  maxEngineEventBytes: { env: 'MAX_ENGINE_EVENT_BYTES' },
  maxEngineStreamBytes: { env: 'MAX_ENGINE_STREAM_BYTES' },
  upstreamTimeoutMs: { env: 'UPSTREAM_TIMEOUT_MS' },
  shutdownGraceMs: { env: 'SHUTDOWN_GRACE_MS' },
  upstreamConnections: { env: 'UPSTREAM_CONNECTIONS' },
  defaultOutputReservationTokens: { env: 'DEFAULT_OUTPUT_RESERVATION_TOKENS' },
  promptTokenCacheEntries: { env: 'PROMPT_TOKEN_CACHE_ENTRIES' },
  apiKeys: { env: 'API_KEYS' },
  serviceApiKeys: { env: 'SERVICE_API_KEYS' },
  adminToken: { env: 'ADMIN_TOKEN' },
  devApiKey: { env: 'DEV_API_KEY' },
  maxKeysPerOrganization: { env: 'MAX_KEYS_PER_ORGANIZATION' },
  authCacheTtlMs: { env: 'AUTH_CACHE_TTL_MS' },
  capacityLeaseMs: { env: 'CAPACITY_LEASE_MS' },
  capacityRetryAfterMs: { env: 'CAPACITY_RETRY_AFTER_MS' },
  admissionSlices: { env: 'ADMISSION_SLICES' },
  admissionSliceMs: { env: 'ADMISSION_SLICE_MS' },
  consoleSessionSecret: { env: 'CONSOLE_SESSION_SECRET' },
  consoleSessionTtlMs: { env: 'CONSOLE_SESSION_TTL_MS' },
  consoleSignInMaxFailures: { env: 'CONSOLE_SIGN_IN_MAX_FAILURES' },
  consoleSignInWindowMs: { env: 'CONSOLE_SIGN_IN_WINDOW_MS' },
  consoleDir: { env: 'CONSOLE_DIR' },
  logLevel: { env: 'LOG_LEVEL', flag: 'log-level' },
  accessLog: { env: 'ACCESS_LOG' },
  ...TELEMETRY_CONFIG_SOURCES,
  ...HTTP_LIMIT_SOURCES,
};

/** Parses the gateway configuration from `process.env` and `process.argv` (or the given input, for tests). */
export function loadGatewayConfig(input?: { env?: NodeJS.ProcessEnv; argv?: readonly string[] }): GatewayConfig {
  return loadConfig(GatewayConfigSchema, GATEWAY_CONFIG_SOURCES, input);
}
