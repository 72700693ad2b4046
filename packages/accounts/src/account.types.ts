/** The three per-minute budgets of an organization (capacity of its token buckets). */
export interface Budgets {
  requests: number;
  input_tokens: number;
  output_tokens: number;
}

/**
 * The organization's limits on the session service, which enforces them; null = the session
 * service's configured default (`ORG_MAX_SESSIONS`, `ORG_MAX_RUNNING_TURNS`,
 * `ORG_MAX_WAITING_TURNS`, `ORG_TURN_WEIGHT`). Bounds: SESSION_LIMIT_BOUNDS.
 */
export interface SessionLimits {
  /** Sessions the organization may hold at once. */
  sessions: number | null;
  /** Its turns running at once; more wait without holding an agent process. */
  runningTurns: number | null;
  /** Its turns waiting at once; past it, a message is refused. */
  waitingTurns: number | null;
  /** Its share of dispatch while others wait too: `w` turns for every 1 of a weight-1 organization. */
  weight: number | null;
}

/** An organization as stored. */
export interface Organization {
  id: string;
  name: string;
  /** Per-minute budgets. */
  budgets: Budgets;
  /** Credit balance in USD; may dip below zero by the spend of requests in flight. */
  credit: number;
  /** Unix seconds. */
  created: number;
  /** Limits on the session service; each null falls back to its configuration. */
  sessionLimits: SessionLimits;
}

/** What creating an organization takes; `id` is generated when absent. */
export interface NewOrganization {
  id?: string;
  name: string;
  budgets: Budgets;
  /** Initial credit in USD. */
  credit: number;
  /** Session limits to set; a missing or null one is the session service's default. */
  sessionLimits?: Partial<SessionLimits>;
}

/**
 * A partial update: any of the budgets, a new name, credit added (USD, may be negative), any of the
 * session limits (null puts one back to the session service's default).
 */
export interface OrganizationUpdate {
  name?: string;
  budgets?: Partial<Budgets>;
  creditTopUp?: number;
  sessionLimits?: Partial<SessionLimits>;
}

/**
 * What a key may do. `standard` keys call the inference API; `admin` keys sign in to the console
 * and manage their own organization's keys through the admin API, and cannot call the inference API.
 */
export type KeyRole = 'standard' | 'admin';

/** Every key role, the default first. */
export const KEY_ROLES: readonly KeyRole[] = ['standard', 'admin'];

/** A key as listed: never the key itself. */
export interface ApiKeyInfo {
  id: string;
  org_id: string;
  name: string | null;
  role: KeyRole;
  /** Last four characters of the key, to recognise it. */
  last4: string;
  /** Unix seconds. */
  created: number;
  /** Unix seconds of the latest authentication, to the minute (see KeyAuthenticator); null when never used. */
  last_used_at: number | null;
  /** Unix seconds, or null while the key is live. */
  revoked_at: number | null;
}

/** A key just created: the only time its plaintext is available. */
export interface CreatedApiKey extends ApiKeyInfo {
  key: string;
}

/** Usage counters of one period (or one model in it). */
export interface UsageCounters {
  requests: number;
  input_tokens: number;
  output_tokens: number;
  /** USD. */
  spend: number;
}

/** An organization's usage over the last `minutes` minutes. */
export interface UsageReport {
  org_id: string;
  /** Unix seconds of the first and one past the last minute covered. */
  start: number;
  end: number;
  totals: UsageCounters;
  by_model: Array<UsageCounters & { model: string }>;
  /** One entry per minute that saw traffic, oldest first; `minute` is its start in unix seconds. */
  by_minute: Array<UsageCounters & { minute: number }>;
}

/** One token bucket of an organization right now. */
export interface BucketBalance {
  /** The per-minute budget (the bucket's capacity). */
  limit: number;
  /** What is left now: refilled to this moment, counting what replicas' quota slices still hold. */
  remaining: number;
}

/** The current balance of an organization's three per-minute buckets. */
export interface BucketBalances {
  requests: BucketBalance;
  input_tokens: BucketBalance;
  output_tokens: BucketBalance;
}
