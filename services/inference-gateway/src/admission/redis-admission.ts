import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { accountKeys, luaScript, runScripts, type AccountKeys } from '@tollway/accounts';
import { BUDGET_KINDS, formatRateLimitDuration, RATE_LIMIT_HEADERS } from '@tollway/contracts';
import { ServiceError, type Logger, type ReplicaWait } from '@tollway/service-kit';
import type { Admission, AdmissionRequest, AdmissionStats, AdmissionTicket, SettledUsage } from './admission.types';
import { admissionUnavailable, insufficientQuota, providerOverloaded, rateLimitExceeded } from './admission-errors';
import { invalidApiKey, unknownOrganization } from '../errors';
import { LeaseRenewer } from './lease-renewer';
import { AdmitBatcher, AdmitTimeoutError, type LateAnswer, type LeadingCall } from './admit-batcher';
import { SettlementBatcher } from './settlement-batcher';
import {
  LocalQuota,
  NO_PLAN,
  type LocalGrant,
  type LocalQuotaOptions,
  type QuotaPlan,
  type SliceGrant,
} from './local-quota';
import { RETURN_LUA } from './scripts/return.lua';

const returnScript = luaScript(RETURN_LUA, 'return');

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
  /**
   * Quota slices and capacity blocks held in process (local-quota.ts), so most requests are
   * admitted without a round trip; null (the default) admits every request in Redis. Needs
   * `subscriber`, a connection for the organization-change channel: while it is down, nothing
   * is admitted locally.
   */
  localQuota?: LocalQuotaOptions | null;
  subscriber?: Redis;
  /**
   * How long a request waits for Redis to answer its admission before a 503 (see AdmitBatcher:
   * what the script took all the same is given back when its answer comes). Default
   * REDIS_COMMAND_TIMEOUT_MS (700).
   */
  admitTimeoutMs?: number;
  /** How long a settlement that failed is sent again (SettlementBatcher); default SETTLEMENT_RETRY_WINDOW_MS. */
  settlementRetryWindowMs?: number;
  /** Replicas that must hold each settlement (REDIS_WAIT_REPLICAS, see SettlementBatcher); null = none. */
  settlementReplicaWait?: ReplicaWait | null;
}

/** The Redis key of a model's capacity leases (a zset of lease id → expiry ms). */
export function modelLeaseKey(prefix: string, modelId: string): string {
  return `${prefix}{model:${modelId}}:leases`;
}

const LEASE_KEY_MODEL = /\{model:(.*)\}:leases$/;

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
  private readonly local: LocalQuota | null;
  private readonly subscriber: Redis | null;
  private readonly sweeper: NodeJS.Timeout | null;
  private readonly onChange: (channel: string, orgId: string) => void;
  private readonly onDown: () => void;
  private readonly onReady: () => void;
  private listening: Promise<void> = Promise.resolve();

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
      retryWindowMs: options.settlementRetryWindowMs,
      replicaWait: options.settlementReplicaWait ?? null,
    });
    const local = options.localQuota && options.subscriber ? new LocalQuota(this.now, options.localQuota) : null;
    this.local = local;
    this.admissions = new AdmitBatcher(
      this.redis,
      this.now,
      (alone) => this.leadingCalls(alone),
      local ? { fraction: local.fraction, minimum: local.minimum, ttlMs: local.ttlMs } : undefined,
      undefined,
      options.admitTimeoutMs,
    );

    // Organization changes (budgets, credit, deletion) reach every replica through pub/sub: its
    // slice goes back at once. Without the channel, no slice is trusted.
    const channel = this.keys.orgChangeChannel();
    this.subscriber = local ? (options.subscriber ?? null) : null;
    this.onChange = (from, orgId) => {
      if (from !== channel || !local) return;
      local.invalidate(orgId);
      this.admissions.kick();
    };
    this.onDown = () => {
      local?.setEnabled(false);
      this.admissions.kick();
    };
    this.onReady = () => void this.listen(channel);
    this.sweeper = null;
    if (local && this.subscriber) {
      local.setEnabled(false);
      this.subscriber.on('message', this.onChange);
      this.subscriber.on('close', this.onDown);
      this.subscriber.on('reconnecting', this.onDown);
      this.subscriber.on('ready', this.onReady);
      this.listening = this.listen(channel);
      this.sweeper = setInterval(
        () => {
          local.sweep();
          this.admissions.kick();
        },
        Math.max(10, Math.floor(local.useMs / 4)),
      );
      this.sweeper.unref();
    }
  }

  private async listen(channel: string): Promise<void> {
    try {
      await this.subscriber?.subscribe(channel);
      this.local?.setEnabled(true);
    } catch (err) {
      this.logger?.warn('organization change channel unavailable: admitting every request in Redis', {
        err: String(err),
      });
    }
  }

  /** Resolves once the change channel's first subscription settled (local admission is then on). */
  ready(): Promise<void> {
    return this.listening;
  }

  /** What this replica holds now, for the metrics (read at scrape time, never on the request path). */
  stats(): AdmissionStats {
    const leasesByModel = new Map<string, number>();
    for (const [leaseKey, ids] of this.renewer.held()) {
      const modelId = LEASE_KEY_MODEL.exec(leaseKey)?.[1];
      if (modelId !== undefined) leasesByModel.set(modelId, (leasesByModel.get(modelId) ?? 0) + ids.size);
    }
    const settlements = this.settlements.stats();
    return {
      slicesHeld: this.local?.slicesHeld() ?? 0,
      sliceGrants: this.local?.sliceGrants ?? 0,
      leaseRenewals: this.renewer.renewals,
      settlementRetries: settlements.retries,
      settlementsLost: settlements.lost,
      settlementsUnreplicated: settlements.unreplicated,
      leasesByModel,
    };
  }

  /**
   * Gives back every slice and block and writes the settlements still queued (graceful shutdown,
   * after the last request finished).
   */
  async close(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    if (this.local) {
      this.local.setEnabled(false);
      this.local.sweep(true);
      const returns = this.takeReturns();
      if (returns) {
        const [outcome] = await runScripts(this.redis, [returns]);
        returns.finish(outcome ? outcome[0] : new Error('no reply'));
      }
    }
    if (this.subscriber) {
      this.subscriber.off('message', this.onChange);
      this.subscriber.off('close', this.onDown);
      this.subscriber.off('reconnecting', this.onDown);
      this.subscriber.off('ready', this.onReady);
      // Not awaited: with Redis down it would wait for a reconnection; the caller closes the connection.
      this.subscriber.unsubscribe(this.keys.orgChangeChannel()).catch(() => undefined);
    }
    await this.settlements.drain();
  }

  /**
   * What goes to Redis ahead of a batch of admissions, or alone on a kick: quota to give back, then
   * queued settlements. Spend and usage of locally admitted requests go along whenever something
   * goes anyway (and always with a slice's return, so its spend reaches Redis before its allowance
   * is freed); a kick with nothing else to send leaves them for their accounting delay, since a
   * write of its own costs the requests in flight at that moment (see README, "The tail").
   */
  private leadingCalls(alone: boolean): LeadingCall[] {
    const calls: LeadingCall[] = [];
    const returns = this.takeReturns();
    if (returns) calls.push(returns);
    const settlements = this.settlements.take(alone && !returns);
    if (settlements) calls.push(settlements);
    return calls;
  }

  /** The return script call for what LocalQuota gives back; null when nothing. */
  private takeReturns(): LeadingCall | null {
    const returns = this.local?.takeReturns();
    if (!returns) return null;
    const keys: string[] = [];
    const args: Array<string | number> = [this.now(), returns.slices.length];
    for (const slice of returns.slices) {
      keys.push(this.keys.org(slice.orgId), this.keys.buckets(slice.orgId), this.keys.slices(slice.orgId));
      args.push(slice.id, ...slice.left);
    }
    args.push(returns.blocks.length);
    for (const block of returns.blocks) {
      for (const id of block.leaseIds) this.renewer.remove(block.leaseKey, id);
      keys.push(block.leaseKey);
      args.push(block.leaseIds.length, ...block.leaseIds);
    }
    return {
      script: returnScript,
      keys,
      args,
      // Given back before the admissions written behind it, even right after a SCRIPT FLUSH.
      ordered: true,
      finish: (err) => {
        // Slices expire on their own, and block leases once no longer renewed: nothing is lost for good.
        if (err) this.logger?.warn('giving back quota slices failed', { err: String(err) });
      },
    };
  }

  async admit(asked: AdmissionRequest): Promise<AdmissionTicket> {
    const request =
      asked.reservationIsDefault === undefined
        ? { ...asked, reservationIsDefault: this.isDefaultReservation(asked) }
        : asked;
    const grant = this.local?.tryAdmit(request);
    if (grant) return this.localTicket(request, grant);
    const epoch = this.local?.epochOf(request) ?? 0;
    const first = await this.admitInRedis(request);
    if (first.ticket) return first.ticket;
    // Refused while a slice or block granted meanwhile (to a request of the same write) may hold
    // what this one lacked: that goes back, ahead of a second try, so one replica is exact.
    const refusal = first.reply[0];
    if (
      (refusal === 1 || refusal === 2 || refusal === 3) &&
      first.reply[3] !== 1 &&
      this.local?.giveBackFor(request, epoch)
    ) {
      const second = await this.admitInRedis(request);
      if (second.ticket) return second.ticket;
      throw this.refusal(request, second.reply);
    }
    throw this.refusal(request, first.reply);
  }

  /** One admission by the admit script: a ticket, or the refusal's reply. */
  private async admitInRedis(
    request: AdmissionRequest,
  ): Promise<{ ticket: AdmissionTicket; reply?: undefined } | { ticket?: undefined; reply: Array<number | string> }> {
    const { orgId } = request.principal;
    const leaseKey = modelLeaseKey(this.prefix, request.modelId);
    const leaseId = request.capacity === null ? '' : randomUUID();
    const plan = this.local?.plan(request) ?? NO_PLAN;
    let reply: Array<number | string>;
    try {
      const call = {
        keys: [this.keys.org(orgId), this.keys.buckets(orgId), leaseKey, this.keys.slices(orgId)],
        args: [
          request.inputTokens,
          request.reservedOutputTokens,
          request.capacity ?? -1,
          leaseId,
          this.leaseMs,
          request.reservationIsDefault ? '1' : '0',
          plan.sliceId,
          request.pricePerMillion.input,
          request.pricePerMillion.output,
          plan.blockId,
          plan.blockSize,
        ],
      } as const;
      reply = await this.admissions.admit(call, (late) => this.lateAnswer(request, plan, leaseKey, leaseId, late));
    } catch (err) {
      // Past the timeout the script may still run: its plan is answered when its reply comes (lateAnswer).
      if (plan !== NO_PLAN && !(err instanceof AdmitTimeoutError))
        this.local?.planAnswered(request, plan, false, null, null);
      throw admissionUnavailable(err);
    }
    return this.answered(request, plan, leaseKey, leaseId, reply);
  }

  /**
   * What the admit script answered for a request that was refused 503 before the answer came: a
   * slice or block it granted is installed (used and given back like any), and an admission is
   * released at once (the request, the tokens and the lease go back), so a 503 costs nothing.
   */
  private lateAnswer(
    request: AdmissionRequest,
    plan: QuotaPlan,
    leaseKey: string,
    leaseId: string,
    late: LateAnswer,
  ): void {
    if (!late.reply) {
      if (plan !== NO_PLAN) this.local?.planAnswered(request, plan, false, null, null);
      return;
    }
    const answer = this.answered(request, plan, leaseKey, leaseId, late.reply);
    if (!answer.ticket) return;
    this.logger?.warn('admission answered after its request was refused 503; released', {
      org_id: request.principal.orgId,
      model: request.modelId,
    });
    answer.ticket.release().catch((err: unknown) => {
      this.logger?.error('releasing a late admission failed', { err: String(err) });
    });
  }

  /** The admit script's reply to one request: its plan answered, then a ticket or the refusal's reply. */
  private answered(
    request: AdmissionRequest,
    plan: QuotaPlan,
    leaseKey: string,
    leaseId: string,
    reply: Array<number | string>,
  ): { ticket: AdmissionTicket; reply?: undefined } | { ticket?: undefined; reply: Array<number | string> } {
    const admitted = reply[0] === 0;
    if (plan !== NO_PLAN && this.local) {
      const block = this.local.planAnswered(
        request,
        plan,
        admitted,
        admitted && reply[8] === 1 ? sliceGrant(reply) : null,
        admitted && reply[18] === 1 ? { leaseKey } : null,
      );
      if (block) for (const id of block.free) this.renewer.add(leaseKey, id);
    }
    return admitted ? { ticket: this.ticket(request, leaseKey, leaseId, reply) } : { reply };
  }

  /** The error for a refusal reply (see admit.lua.ts). */
  private refusal(request: AdmissionRequest, reply: Array<number | string>): ServiceError {
    switch (reply[0]) {
      case 1:
        return this.budgetRefusal(request, reply);
      case 2:
        return insufficientQuota();
      case 3:
        return providerOverloaded(request.modelId, this.capacityRetryAfterMs);
      default:
        // A service key named an organization that does not exist; any other key outlived its
        // organization by a cache TTL at most: the same answer as a revoked key.
        return request.principal.actingFor ? unknownOrganization(request.principal.orgId) : invalidApiKey();
    }
  }

  private isDefaultReservation(request: AdmissionRequest): boolean {
    if (request.reservationIsDefault !== undefined) return request.reservationIsDefault;
    return request.reservedOutputTokens === this.defaultOutputReservationTokens;
  }

  private budgetRefusal(request: AdmissionRequest, reply: Array<number | string>): ServiceError {
    const index = Number(reply[1] ?? 1) - 1;
    const kind = BUDGET_KINDS[index] ?? 'requests';
    const needed = [1, request.inputTokens, request.reservedOutputTokens][index] ?? 1;
    return rateLimitExceeded(kind, Number(reply[4] ?? 0), needed, Number(reply[2] ?? 1000), reply[3] === 1);
  }

  /** A request admitted from this replica's slice: no round trip; settles back into the slice. */
  private localTicket(request: AdmissionRequest, grant: LocalGrant): AdmissionTicket {
    const headers = this.local!.headers(grant.slice);
    let done = false;
    const [, input, output] = grant.costs;
    const finish = (usage: SettledUsage | null): Promise<void> => {
      if (done) return Promise.resolve();
      done = true;
      const used = usage ? usedTokens(usage) : null;
      const refund: [number, number, number] = used
        ? [0, input - used.input, output - used.output]
        : [1, input, output];
      const spent = used
        ? (used.input * request.pricePerMillion.input + used.output * request.pricePerMillion.output) / 1e6
        : 0;
      const refundedLocally = this.local!.finish(grant, refund, grant.usd - spent);
      if (!refundedLocally) this.local!.noteBucketRefund(request.principal.orgId, refund);
      // Given back in process and nothing to record: no write at all.
      if (!used && refundedLocally) return Promise.resolve();
      return this.settlements.add({
        orgId: request.principal.orgId,
        modelId: request.modelId,
        leaseKey: '',
        leaseId: '',
        taken: { input, output },
        used,
        refundedLocally,
        price: request.pricePerMillion,
        at: this.now(),
      });
    };
    return { headers, settle: (usage) => finish(usage), release: () => finish(null) };
  }

  private ticket(
    request: AdmissionRequest,
    leaseKey: string,
    leaseId: string,
    reply: Array<number | string>,
  ): AdmissionTicket {
    const [, limitRequests, remainingRequests, resetRequestsMs, limitTokens, remainingTokens, resetTokensMs] = reply;
    const reserved = reply[7] === undefined ? undefined : Number(reply[7]);
    const reservedOutputTokens = reserved ?? request.reservedOutputTokens;
    const headers = {
      [RATE_LIMIT_HEADERS.limitRequests]: String(limitRequests),
      [RATE_LIMIT_HEADERS.remainingRequests]: String(remainingRequests),
      [RATE_LIMIT_HEADERS.resetRequests]: formatRateLimitDuration(Number(resetRequestsMs ?? 0)),
      [RATE_LIMIT_HEADERS.limitTokens]: String(limitTokens),
      [RATE_LIMIT_HEADERS.remainingTokens]: String(remainingTokens),
      [RATE_LIMIT_HEADERS.resetTokens]: formatRateLimitDuration(Number(resetTokensMs ?? 0)),
    };
    let done = false;
    if (leaseId !== '') this.renewer.add(leaseKey, leaseId);

    const finish = (usage: SettledUsage | null): Promise<void> => {
      if (done) return Promise.resolve();
      done = true;
      if (leaseId !== '') this.renewer.remove(leaseKey, leaseId);
      const taken = { input: request.inputTokens, output: reservedOutputTokens };
      const used = usage ? usedTokens(usage) : null;
      this.local?.noteBucketRefund(
        request.principal.orgId,
        used ? [0, taken.input - used.input, taken.output - used.output] : [1, taken.input, taken.output],
      );
      return this.settlements.add({
        orgId: request.principal.orgId,
        modelId: request.modelId,
        leaseKey,
        leaseId,
        taken,
        used,
        price: request.pricePerMillion,
        at: this.now(),
      });
    };
    return { headers, settle: (usage) => finish(usage), release: () => finish(null) };
  }
}

/** Tokens an engine reported, as whole non-negative numbers. */
function usedTokens(usage: SettledUsage): { input: number; output: number } {
  return { input: tokenCount(usage.prompt_tokens), output: tokenCount(usage.completion_tokens) };
}

/**
 * The most tokens one request can be charged: far above any context length, far below where a
 * bucket's or a usage hash's arithmetic stops being exact.
 */
const MAX_TOKENS_PER_REQUEST = 1e9;

/**
 * A usage count as the settlement writes it: a whole number from 0 to MAX_TOKENS_PER_REQUEST. The
 * chat handler bounds usage already (completions/usage-bounds.ts); this is the last guard in front
 * of Redis, where one NaN or 1e308 fails the settle script after its batch is marked as applied
 * and takes the batch's other settlements with it.
 */
function tokenCount(value: number | undefined): number {
  const n = Math.round(value ?? 0);
  return Number.isFinite(n) ? Math.min(Math.max(n, 0), MAX_TOKENS_PER_REQUEST) : 0;
}

/** The slice in an admit reply that granted one (see admit.lua.ts for the layout). */
function sliceGrant(reply: Array<number | string>): SliceGrant {
  const n = (i: number) => Number(reply[i] ?? 0);
  return {
    caps: [n(1), n(16), n(17)],
    balances: [n(9), n(10), n(11)],
    sizes: [n(12), n(13), n(14)],
    usd: n(15),
  };
}
