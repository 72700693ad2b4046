import type { Redis } from 'ioredis';
import { accountKeys, parseSessionLimits, SESSION_LIMIT_FIELDS, SESSION_LIMIT_NAMES } from '@tollway/accounts';
import type { Logger } from '@tollway/service-kit';
import type { OrganizationTurnLimits } from './session-store';

/**
 * The organization record's fields that hold its session limits (set through the gateway's admin
 * API, the CLI or the console); an absent one falls back to the service's configured default.
 */
const LIMIT_FIELDS = SESSION_LIMIT_NAMES.map((name) => SESSION_LIMIT_FIELDS[name]);

/** How long an organization's limits are served from memory, ms; a change message drops them sooner. */
const CACHE_TTL_MS = 5_000;
/** Organizations whose limits are kept in memory at once; past it the cache starts afresh. */
const CACHE_MAX_ENTRIES = 10_000;

/** Where an organization's limits come from: its record, else the service's defaults. */
export interface OrganizationLimitsSource {
  limitsOf(orgId: string | null): Promise<OrganizationTurnLimits>;
}

/** Options of OrganizationLimits. */
export interface OrganizationLimitsOptions {
  redis: Redis;
  /** The accounts' key prefix (`REDIS_PREFIX`). */
  prefix: string;
  /** The limits of an organization that sets none of its own (and of sessions made without auth). */
  defaults: OrganizationTurnLimits;
  /** The process's subscriber connection: its org-change messages drop a cached entry. */
  subscriber?: Redis;
  logger?: Logger;
  clock?: () => number;
}

/**
 * An organization's session limits as the session API applies them: read from its record in the
 * accounts store and kept a few seconds in memory (so a send costs no extra Redis read), dropped at
 * once when the organization changes (its id on the accounts' org-change channel).
 */
export class OrganizationLimits implements OrganizationLimitsSource {
  private readonly cache = new Map<string, { limits: OrganizationTurnLimits; until: number }>();
  private readonly clock: () => number;
  private readonly channel: string;
  private readonly onMessage = (from: string, orgId: string) => {
    if (from === this.channel) this.cache.delete(orgId);
  };
  private readonly onReady = () => this.cache.clear();

  constructor(private readonly options: OrganizationLimitsOptions) {
    this.clock = options.clock ?? Date.now;
    this.channel = accountKeys(options.prefix).orgChangeChannel();
  }

  /** Subscribes to the org-change channel (when a subscriber was given). */
  async start(): Promise<void> {
    const { subscriber } = this.options;
    if (!subscriber) return;
    subscriber.on('message', this.onMessage);
    // Messages lost while the subscriber reconnects: every entry is read afresh.
    subscriber.on('ready', this.onReady);
    await subscriber.subscribe(this.channel);
  }

  async limitsOf(orgId: string | null): Promise<OrganizationTurnLimits> {
    if (orgId === null) return this.options.defaults;
    const cached = this.cache.get(orgId);
    const now = this.clock();
    if (cached && cached.until > now) return cached.limits;
    const values = await this.options.redis.hmget(accountKeys(this.options.prefix).org(orgId), ...LIMIT_FIELDS);
    const stored = parseSessionLimits(Object.fromEntries(LIMIT_FIELDS.map((field, i) => [field, values[i]])));
    const { defaults } = this.options;
    const limits: OrganizationTurnLimits = {
      maxSessions: stored.sessions ?? defaults.maxSessions,
      maxRunningTurns: stored.runningTurns ?? defaults.maxRunningTurns,
      maxWaitingTurns: stored.waitingTurns ?? defaults.maxWaitingTurns,
      weight: stored.weight ?? defaults.weight,
    };
    if (this.cache.size >= CACHE_MAX_ENTRIES) this.cache.clear();
    this.cache.set(orgId, { limits, until: now + CACHE_TTL_MS });
    return limits;
  }

  /** Stops listening for changes. */
  close(): void {
    this.options.subscriber?.off('message', this.onMessage);
    this.options.subscriber?.off('ready', this.onReady);
  }
}
