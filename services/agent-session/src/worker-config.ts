import { z } from 'zod';
import ipaddr from 'ipaddr.js';
import { Webhook } from 'standardwebhooks';
import { checkRedisConnection, durationMs, envBoolean, loadConfig, type ConfigSource } from '@tollway/service-kit';
import { SHARED_CONFIG_FIELDS, SHARED_CONFIG_SOURCES } from './config';

const commaList = z
  .string()
  .default('')
  .transform((value) =>
    value
      .split(',')
      .map((item) => item.trim())
      .filter((item) => item !== ''),
  );

/**
 * Host names, addresses and CIDRs; a CIDR that does not parse, or an entry with a blank inside
 * (which no host matches: `exa mple.com` allowed nothing, silently), is refused at start, naming the variable.
 */
const allowedHosts = commaList
  .refine((entries) => entries.every((entry) => !/\s/.test(entry)), {
    message: 'an entry must not hold blanks (separate entries with commas)',
  })
  .refine((entries) => entries.every((entry) => !entry.includes('/') || ipaddr.isValidCIDR(entry)), {
    message: 'each CIDR must be an address and a prefix length that fits it, e.g. 10.0.0.0/8 or fd00::/8',
  });

const signingSecret = z
  .string()
  .optional()
  .refine(
    (value) => {
      if (value === undefined) return true;
      try {
        new Webhook(value);
        return true;
      } catch {
        return false;
      }
    },
    { message: 'must be a Standard Webhooks secret: whsec_ followed by base64' },
  );

const workerSchema = z
  .object({
    ...SHARED_CONFIG_FIELDS,
    /** Turns one worker runs at once, each in its own child process; default 4. */
    concurrency: z.coerce.number().int().min(1).max(256).default(4),
    /** Path of a module exporting the agent (see agents/agent.types.ts); default the built-in chat agent. */
    agentModule: z.string().min(1).optional(),
    /** Base URL of the inference gateway; default `http://127.0.0.1:8080/v1`. */
    gatewayBaseUrl: z.url({ protocol: /^https?$/ }).default('http://127.0.0.1:8080/v1'),
    /** Key the agent presents to the gateway (`GATEWAY_API_KEY`, else `DEV_API_KEY`). */
    gatewayApiKey: z.string().min(1).optional(),
    /** The quickstart's development key, used when GATEWAY_API_KEY is unset. */
    devApiKey: z.string().min(1).optional(),
    /** Timeout of one HTTP request to the gateway, in ms; default 120 000. */
    gatewayTimeoutMs: durationMs(100).default(120_000),
    /** Model the chat agent uses when `user_params.model` is absent; default `tollway/sim-chat`. */
    agentDefaultModel: z.string().min(1).default('tollway/sim-chat'),
    /** Most tries of one model call, first included; default 4. */
    agentMaxModelTries: z.coerce.number().int().min(1).max(20).default(4),
    /** First retry back-off of a model call before jitter, in ms; default 500. */
    agentRetryBaseDelayMs: durationMs(0).default(500),
    /** Longest retry back-off of a model call, in ms; default 8000. */
    agentRetryMaxDelayMs: durationMs(0).default(8000),
    /** Standard Webhooks signing secret (`whsec_…`); deliveries are unsigned when unset. */
    webhookSigningSecret: signingSecret,
    /** Comma-separated host names, addresses and CIDRs webhooks may reach despite being non-public; default none. */
    webhookAllowedHosts: allowedHosts,
    /** Timeout of one webhook delivery, in ms; default 10 000 (the spec's). */
    webhookTimeoutMs: durationMs(1).default(10_000),
    /** Adds `trace_metrics` to webhook payloads; default false. */
    tracingEnabled: envBoolean.default(false),
    /**
     * On SIGTERM, turns under way get this long to end before their agent processes are killed (those
     * turns end in `error`), in ms; default 5000. Keep the orchestrator's grace period above it.
     */
    shutdownGraceMs: durationMs(0).default(5000),
    /** A turn running longer is killed and ends in `error`, in ms; default 600 000 (10 minutes), 0 = no limit. */
    turnTimeoutMs: durationMs(0).default(600_000),
    /** Lifetime of a worker's registration and of its turn leases without a heartbeat, in ms; default 5000. */
    leaseTtlMs: durationMs(100).default(5000),
    /** How often the reaper looks for orphaned turns, in ms; default 1000. */
    reaperIntervalMs: durationMs(50).default(1000),
    /** Least time between two writes of one turn's events to its session's log, ms; default 50. */
    eventsFlushMs: durationMs(1).default(50),
  })
  .superRefine(checkRedisConnection);

const workerSources = {
  ...SHARED_CONFIG_SOURCES,
  concurrency: { env: 'WORKER_CONCURRENCY', flag: 'concurrency' },
  agentModule: { env: 'AGENT_MODULE', flag: 'agent-module' },
  gatewayBaseUrl: { env: 'GATEWAY_BASE_URL', flag: 'gateway-base-url' },
  gatewayApiKey: { env: 'GATEWAY_API_KEY' },
  devApiKey: { env: 'DEV_API_KEY' },
  gatewayTimeoutMs: { env: 'GATEWAY_TIMEOUT_MS' },
  agentDefaultModel: { env: 'AGENT_DEFAULT_MODEL' },
  agentMaxModelTries: { env: 'AGENT_MAX_MODEL_TRIES' },
  agentRetryBaseDelayMs: { env: 'AGENT_RETRY_BASE_DELAY_MS' },
  agentRetryMaxDelayMs: { env: 'AGENT_RETRY_MAX_DELAY_MS' },
  webhookSigningSecret: { env: 'WEBHOOK_SIGNING_SECRET' },
  webhookAllowedHosts: { env: 'WEBHOOK_ALLOWED_HOSTS' },
  webhookTimeoutMs: { env: 'WEBHOOK_TIMEOUT_MS' },
  tracingEnabled: { env: 'TRACING_ENABLED' },
  shutdownGraceMs: { env: 'WORKER_SHUTDOWN_GRACE_MS' },
  turnTimeoutMs: { env: 'TURN_TIMEOUT_MS' },
  leaseTtlMs: { env: 'WORKER_LEASE_TTL_MS' },
  reaperIntervalMs: { env: 'REAPER_INTERVAL_MS' },
  eventsFlushMs: { env: 'SESSION_EVENTS_FLUSH_MS' },
} satisfies Record<keyof z.infer<typeof workerSchema>, ConfigSource>;

type ParsedWorkerConfig = z.infer<typeof workerSchema>;

/** The worker's configuration (also what the API's embedded worker runs with). */
export type WorkerConfig = Omit<ParsedWorkerConfig, 'devApiKey' | 'gatewayApiKey'> & {
  /** Key for the gateway; null when neither GATEWAY_API_KEY nor DEV_API_KEY is set (model calls then get 401). */
  gatewayApiKey: string | null;
};

/**
 * Parses the worker's flags and environment once; throws a ConfigError naming a bad value. The API
 * process passes `argv: []` when it embeds a worker, so its own flags are not read here.
 */
export function loadWorkerConfig(
  input: { env?: NodeJS.ProcessEnv; argv?: readonly string[] } = {},
): Readonly<WorkerConfig> {
  const { devApiKey, gatewayApiKey, ...rest } = loadConfig(workerSchema, workerSources, input);
  return Object.freeze({ ...rest, gatewayApiKey: gatewayApiKey ?? devApiKey ?? null });
}
