import type { Usage } from '@tollway/contracts';

/**
 * The seam between the request path and admission control (auth, budgets, credit, capacity).
 * The chat route calls, in order: `authenticate` → (parse, validate, count input tokens) →
 * `admit` → engine call → `ticket.settle` exactly once (or `ticket.release` when the engine
 * was never reached, e.g. the engine refused before producing anything).
 */

/** Who is calling: the organization and key a bearer token belongs to. */
export interface Principal {
  orgId: string;
  keyId: string;
  /** True for a service key acting for `orgId` (named in `x-tollway-organization`), not its own key. */
  actingFor?: true;
}

/**
 * Resolves a bearer token; null for a missing, malformed, unknown or revoked key (→ 401).
 * `organization` is the `x-tollway-organization` header as sent, if any: a service key acts for
 * the organization it names; any other key may only name its own. A refusal throws a 401.
 */
export interface Authenticator {
  authenticate(bearerToken: string | undefined, organization?: string): Promise<Principal | null>;
}

/** What admission needs to know about one chat completion before it reaches an engine. */
export interface AdmissionRequest {
  principal: Principal;
  /** Catalog id `<author>/<slug>`. */
  modelId: string;
  /** Input tokens counted with the tokenizer over the messages. */
  inputTokens: number;
  /** Output tokens reserved: max_tokens / max_completion_tokens or the documented default. */
  reservedOutputTokens: number;
  /**
   * True when `reservedOutputTokens` is the gateway's default (the client set no max_tokens):
   * admission then caps it at the organization's output budget. See `outputReservation`.
   */
  reservationIsDefault?: boolean;
  /** Concurrent-request limit of the model (catalog `capacity`); null = unlimited. */
  capacity: number | null;
  /** Prices per million tokens, for credit. */
  pricePerMillion: { input: number; output: number };
}

/** Usage once known; for an aborted request, what the engine produced before the abort. */
export type SettledUsage = Pick<Usage, 'prompt_tokens' | 'completion_tokens'>;

/** An admitted request: its response headers and the obligation to settle it. */
export interface AdmissionTicket {
  /** The six `x-ratelimit-*` headers to send on the 200. */
  headers: Record<string, string>;
  /** Charges actual usage (refunding the unused reservation) and frees the capacity lease. Idempotent. */
  settle(usage: SettledUsage): Promise<void>;
  /** Gives back the whole reservation and the lease (no engine work happened). Idempotent. */
  release(): Promise<void>;
}

/** What a replica's admission holds, read when metrics are scraped. */
export interface AdmissionStats {
  /** Quota slices held by this replica now. */
  slicesHeld: number;
  /** Slices granted since start. */
  sliceGrants: number;
  /** Capacity-lease renewal rounds sent since start. */
  leaseRenewals: number;
  /** Settlement batches sent again since start, after a failure or a lost answer. */
  settlementRetries: number;
  /** Settlements (requests) given up since start: their usage was not charged. */
  settlementsLost: number;
  /** Settlements (requests) their replicas did not acknowledge within REDIS_WAIT_TIMEOUT_MS, since start. */
  settlementsUnreplicated: number;
  /** Model id → capacity leases this replica holds (running requests and reserved block slots). */
  leasesByModel: ReadonlyMap<string, number>;
}

/** Admits or refuses; a refusal throws a ServiceError (429 / 402) carrying its headers. */
export interface Admission {
  admit(request: AdmissionRequest): Promise<AdmissionTicket>;
}
