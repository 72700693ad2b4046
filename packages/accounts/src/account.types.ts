/** The three per-minute budgets of an organization (capacity of its token buckets). */
export interface Budgets {
  requests: number;
  input_tokens: number;
  output_tokens: number;
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
}

/** What creating an organization takes; `id` is generated when absent. */
export interface NewOrganization {
  id?: string;
  name: string;
  budgets: Budgets;
  /** Initial credit in USD. */
  credit: number;
}

/** A partial update: any of the budgets, a new name, credit added (USD, may be negative). */
export interface OrganizationUpdate {
  name?: string;
  budgets?: Partial<Budgets>;
  creditTopUp?: number;
}

/** A key as listed: never the key itself. */
export interface ApiKeyInfo {
  id: string;
  org_id: string;
  name: string | null;
  /** Last four characters of the key, to recognise it. */
  last4: string;
  /** Unix seconds. */
  created: number;
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
