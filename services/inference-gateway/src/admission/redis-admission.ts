import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { accountKeys, type AccountKeys } from '@tollway/accounts';
import { BUDGET_KINDS, formatRateLimitDuration, RATE_LIMIT_HEADERS } from '@tollway/contracts';
import { ServiceError, type Logger } from '@tollway/service-kit';
import type { Admission, AdmissionRequest, AdmissionTicket, SettledUsage } from './admission.types';
import { admissionUnavailable, insufficientQuota, providerOverloaded, rateLimitExceeded } from './admission-errors';
import { invalidApiKey } from '../errors';
import { LeaseRenewer } from './lease-renewer';
import { AdmitBatcher } from './admit-batcher';
import { SettlementBatcher } from './settlement-batcher';

/** Options of RedisAdmission. */
export interface RedisAdmissionOptions {
  redis: Redis;
  /** Key prefix, e.g. `tollway:`. */
  prefix: string;
  /** How long a capacity lease lives without renewal (ms); renewed every third of it. Default 30 000. */
  leaseMs?: number;
  /** `retry-after-ms` advised on a capacity refusal; default 1000. */
  capacityRetryAfterMs?: number;
  /** Milliseconds since the epoch; injectable for tests. Default Date.now. */
  now?: () => number;
  /** Where settlement failures are reported (they never reach the client). */
  logger?: Logger;
  /**
   * The gateway's default output reservation (config DEFAULT_OUTPUT_RESERVATION_TOKENS). A request
   * that does not say whether its reservation is the default (`reservationIsDefault` undefined) is
   * taken as one when it reserves exactly this many tokens.
   */
  defaultOutputReservationTokens?: number;
}

/** The Redis key of a model's capacity leases (a zset of lease id → expiry ms). */
export function modelLeaseKey(prefix: string, modelId: string): string {
  return `${prefix}{model:${modelId}}:leases`;
}

/**
 * Admission control on Redis: one script call per event-loop turn checks credit, takes from the
 * three per-minute token buckets and acquires a capacity lease for each request of that turn, in
 * order (AdmitBatcher); at the end, one script settles every request that finished meanwhile
 * (SettlementBatcher). Every replica shares the same Redis, so limits hold across the cluster.
 */
export class RedisAdmission implements Admission {
  private readonly redis: Redis;
  private readonly prefix: string;
  private readonly keys: AccountKeys;
  private readonly leaseMs: number;
  private readonly capacityRetryAfterMs: number;
  private readonly now: () => number;
  private readonly logger: Logger | undefined;
  private readonly defaultOutputReservationTokens: number | undefined;
  private readonly renewer: LeaseRenewer;
  private readonly admissions: AdmitBatcher;
  private readonly settlements: SettlementBatcher;

  constructor(options: RedisAdmissionOptions) {
    this.redis = options.redis;
    this.prefix = options.prefix;
    this.keys = accountKeys(options.prefix);
    this.leaseMs = options.leaseMs ?? 30_000;
    this.capacityRetryAfterMs = options.capacityRetryAfterMs ?? 1000;
    this.now = options.now ?? Date.now;
    this.logger = options.logger;
    this.defaultOutputReservationTokens = options.defaultOutputReservationTokens;
    this.renewer = new LeaseRenewer(this.redis, this.leaseMs, this.now, this.logger);
    this.settlements = new SettlementBatcher({
      redis: this.redis,
      keys: this.keys,
      now: this.now,
      logger: this.logger,
    });
    this.admissions = new AdmitBatcher(this.redis, this.now, this.settlements);
  }

  /** Writes the settlements still queued (graceful shutdown, after the last request finished). */
  close(): Promise<void> {
    return this.settlements.drain();
  }

  async admit(request: AdmissionRequest): Promise<AdmissionTicket> {
    const { orgId } = request.principal;
    const leaseKey = modelLeaseKey(this.prefix, request.modelId);
    const leaseId = request.capacity === null ? '' : randomUUID();
    let reply: number[];
    try {
      reply = await this.admissions.admit({
        keys: [this.keys.org(orgId), this.keys.buckets(orgId), leaseKey],
        args: [
          request.inputTokens,
          request.reservedOutputTokens,
          request.capacity ?? -1,
          leaseId,
          this.leaseMs,
          this.isDefaultReservation(request) ? '1' : '0',
        ],
      });
    } catch (err) {
      throw admissionUnavailable(err);
    }
    switch (reply[0]) {
      case 0:
        return this.ticket(request, leaseKey, leaseId, reply);
      case 1:
        throw this.budgetRefusal(request, reply);
      case 2:
        throw insufficientQuota();
      case 3:
        throw providerOverloaded(request.modelId, this.capacityRetryAfterMs);
      default:
        // The key outlived its organization by a cache TTL at most: the same answer as a revoked key.
        throw invalidApiKey();
    }
  }

  private isDefaultReservation(request: AdmissionRequest): boolean {
    if (request.reservationIsDefault !== undefined) return request.reservationIsDefault;
    return request.reservedOutputTokens === this.defaultOutputReservationTokens;
  }

  private budgetRefusal(request: AdmissionRequest, reply: number[]): ServiceError {
    const index = (reply[1] ?? 1) - 1;
    const kind = BUDGET_KINDS[index] ?? 'requests';
    const needed = [1, request.inputTokens, request.reservedOutputTokens][index] ?? 1;
    return rateLimitExceeded(kind, reply[4] ?? 0, needed, reply[2] ?? 1000, reply[3] === 1);
  }

  private ticket(request: AdmissionRequest, leaseKey: string, leaseId: string, reply: number[]): AdmissionTicket {
    const [, limitRequests, remainingRequests, resetRequestsMs, limitTokens, remainingTokens, resetTokensMs, reserved] =
      reply;
    const reservedOutputTokens = reserved ?? request.reservedOutputTokens;
    const headers = {
      [RATE_LIMIT_HEADERS.limitRequests]: String(limitRequests),
      [RATE_LIMIT_HEADERS.remainingRequests]: String(remainingRequests),
      [RATE_LIMIT_HEADERS.resetRequests]: formatRateLimitDuration(resetRequestsMs ?? 0),
      [RATE_LIMIT_HEADERS.limitTokens]: String(limitTokens),
      [RATE_LIMIT_HEADERS.remainingTokens]: String(remainingTokens),
      [RATE_LIMIT_HEADERS.resetTokens]: formatRateLimitDuration(resetTokensMs ?? 0),
    };
    let done = false;
    if (leaseId !== '') this.renewer.add(leaseKey, leaseId);

    const finish = (usage: SettledUsage | null): Promise<void> => {
      if (done) return Promise.resolve();
      done = true;
      if (leaseId !== '') this.renewer.remove(leaseKey, leaseId);
      return this.settlements.add({
        orgId: request.principal.orgId,
        modelId: request.modelId,
        leaseKey,
        leaseId,
        taken: { input: request.inputTokens, output: reservedOutputTokens },
        used: usage
          ? {
              input: Math.max(0, Math.round(usage.prompt_tokens ?? 0)),
              output: Math.max(0, Math.round(usage.completion_tokens ?? 0)),
            }
          : null,
        price: request.pricePerMillion,
        at: this.now(),
      });
    };
    return { headers, settle: (usage) => finish(usage), release: () => finish(null) };
  }
}
