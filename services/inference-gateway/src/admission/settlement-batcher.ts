import type { Redis } from 'ioredis';
import { luaScript, runScripts, USAGE_RETENTION_SECONDS, type AccountKeys, type ScriptCall } from '@tollway/accounts';
import type { Logger } from '@tollway/service-kit';
import { SETTLE_LUA } from './scripts/settle.lua';

const settleScript = luaScript(SETTLE_LUA);

/** One finished request, to be settled. */
export interface Settlement {
  orgId: string;
  modelId: string;
  /** The model's lease zset and this request's lease id; '' when the model has no capacity limit. */
  leaseKey: string;
  leaseId: string;
  /** Tokens taken at admission. */
  taken: { input: number; output: number };
  /** Actual usage; null for a release (the engine was never reached: everything is given back). */
  used: { input: number; output: number } | null;
  /**
   * True when the request's tokens came from a quota slice that took the refund back itself
   * (local-quota.ts): the buckets are left alone, only spend and usage are written.
   */
  refundedLocally?: boolean;
  /** USD per million tokens. */
  price: { input: number; output: number };
  /** When the request finished, ms since the epoch: its usage is recorded in that minute. */
  at: number;
}

/** Options of SettlementBatcher. */
export interface SettlementBatcherOptions {
  redis: Redis;
  keys: AccountKeys;
  now: () => number;
  logger?: Logger;
  /** Most settlements in one script call; default 500. */
  maxBatch?: number;
  /**
   * How long a settlement that only records spend and usage (no lease to free, no bucket to
   * refund: a request admitted from a quota slice) may wait for company, ms; default 20.
   */
  accountingDelayMs?: number;
}

/** A batch taken for sending: the script call, and what to do once it is answered. */
export interface SettlementCall extends ScriptCall {
  /** Call with the script's error, or null once it succeeded. */
  finish(err: unknown): void;
}

interface OrgTotals {
  refunds: [number, number, number];
  spend: number;
  /** usage hash key → model id → [requests, input, output, spend] */
  usage: Map<string, Map<string, [number, number, number, number]>>;
}

/**
 * Group commit for settlements: one script call settles every request that finished since the
 * last one, summed per organization and per minute and model, so Redis runs the bucket arithmetic
 * once per organization instead of once per request. When no settlement is on its way, what
 * finished goes out at the end of the event-loop turn, alone (idle, a settlement costs its own
 * round trip but nobody waits for it). While one is on its way, what finishes meanwhile waits, and
 * rides in the same write as the next batch of admissions (AdmitBatcher takes it; Redis runs it
 * first), or goes when the call on its way is answered, whichever comes first. The result is the
 * same as settling each request on its own, except that refunds of one batch are applied together.
 * A settlement with nothing to free or refund (a request admitted from a quota slice) waits up to
 * `accountingDelayMs` for others, unless something else goes out first.
 *
 * A process killed with settlements queued or in flight loses them: their leases expire (lease
 * time), their unused reservations stay taken (the buckets refill within a minute) and their usage
 * is not charged; graceful shutdown writes them first.
 */
export class SettlementBatcher {
  private readonly redis: Redis;
  private readonly keys: AccountKeys;
  private readonly now: () => number;
  private readonly logger: Logger | undefined;
  private readonly maxBatch: number;
  private queue: Array<{ settlement: Settlement; done: () => void }> = [];
  private scheduled = false;
  private readonly accountingDelayMs: number;
  private timer: NodeJS.Timeout | null = null;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(options: SettlementBatcherOptions) {
    this.redis = options.redis;
    this.keys = options.keys;
    this.now = options.now;
    this.logger = options.logger;
    this.maxBatch = options.maxBatch ?? 500;
    this.accountingDelayMs = options.accountingDelayMs ?? 20;
  }

  /** Queues a settlement; resolves once it is written (or its failure logged). Never rejects. */
  add(settlement: Settlement): Promise<void> {
    return new Promise((resolve) => {
      this.queue.push({ settlement, done: resolve });
      if (settlement.leaseId === '' && settlement.refundedLocally) this.scheduleLater();
      else this.schedule();
    });
  }

  /**
   * Within `accountingDelayMs`: nobody waits for spend and usage (the slice took the refund), so
   * they gather into fewer, larger calls; anything sent sooner takes them along.
   */
  private scheduleLater(): void {
    if (this.timer || this.queue.length >= this.maxBatch) {
      if (this.queue.length >= this.maxBatch) this.schedule();
      return;
    }
    this.timer = setTimeout(() => {
      this.timer = null;
      this.schedule();
    }, this.accountingDelayMs);
    this.timer.unref();
  }

  /** At the end of this turn: send what is queued, unless a call is on its way (then it waits). */
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (this.inFlight.size === 0 || this.queue.length >= this.maxBatch) this.sendAlone();
    });
  }

  /** Takes up to `maxBatch` queued settlements as one script call; null when none is queued. */
  take(): SettlementCall | null {
    if (this.queue.length === 0) return null;
    const batch = this.queue.length <= this.maxBatch ? this.queue : this.queue.slice(0, this.maxBatch);
    this.queue = batch === this.queue ? [] : this.queue.slice(this.maxBatch);
    const { keys, args } = this.encode(batch.map((entry) => entry.settlement));
    let settle!: () => void;
    const written = new Promise<void>((resolve) => (settle = resolve));
    this.inFlight.add(written);
    return {
      script: settleScript,
      keys,
      args,
      finish: (err) => {
        if (err) {
          // Leases expire on their own; the usage of these requests is lost, and said so.
          this.logger?.error('settlement failed', {
            requests: batch.length,
            orgs: [...new Set(batch.map((entry) => entry.settlement.orgId))].slice(0, 10),
            err: String(err),
          });
        }
        this.inFlight.delete(written);
        settle();
        for (const entry of batch) entry.done();
        // What waited for this call goes now, unless an admission took it meanwhile.
        if (this.queue.length > 0) this.schedule();
      },
    };
  }

  /** Writes everything queued; resolves when nothing is queued or in flight. */
  async drain(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    while (this.queue.length > 0 || this.inFlight.size > 0) {
      this.sendAlone();
      await Promise.all([...this.inFlight]);
    }
  }

  /** Sends what is queued in calls of its own (no admission came along to carry it). */
  private sendAlone(): void {
    for (let call = this.take(); call; call = this.take()) {
      void runScripts(this.redis, [call]).then(([outcome]) =>
        call.finish(outcome ? outcome[0] : new Error('no reply')),
      );
    }
  }

  /** The script's KEYS and ARGV for a batch (see settle.lua.ts for the layout). */
  private encode(batch: readonly Settlement[]): { keys: string[]; args: Array<string | number> } {
    const leases = new Map<string, string[]>();
    const orgs = new Map<string, OrgTotals>();
    for (const s of batch) {
      if (s.leaseId !== '') {
        const ids = leases.get(s.leaseKey);
        if (ids) ids.push(s.leaseId);
        else leases.set(s.leaseKey, [s.leaseId]);
      }
      let totals = orgs.get(s.orgId);
      if (!totals) orgs.set(s.orgId, (totals = { refunds: [0, 0, 0], spend: 0, usage: new Map() }));
      if (!s.used) {
        if (s.refundedLocally) continue;
        totals.refunds[0] += 1;
        totals.refunds[1] += s.taken.input;
        totals.refunds[2] += s.taken.output;
        continue;
      }
      const spend = (s.used.input * s.price.input + s.used.output * s.price.output) / 1_000_000;
      if (!s.refundedLocally) {
        totals.refunds[1] += s.taken.input - s.used.input;
        totals.refunds[2] += s.taken.output - s.used.output;
      }
      totals.spend += spend;
      const usageKey = this.keys.usageMinute(s.orgId, Math.floor(s.at / 60_000));
      let models = totals.usage.get(usageKey);
      if (!models) totals.usage.set(usageKey, (models = new Map()));
      const row = models.get(s.modelId);
      if (row) {
        row[0] += 1;
        row[1] += s.used.input;
        row[2] += s.used.output;
        row[3] += spend;
      } else {
        models.set(s.modelId, [1, s.used.input, s.used.output, spend]);
      }
    }

    const keys: string[] = [];
    const args: Array<string | number> = [
      this.now(),
      USAGE_RETENTION_SECONDS,
      this.keys.orgChangeChannel(),
      leases.size,
    ];
    for (const [leaseKey, ids] of leases) {
      keys.push(leaseKey);
      args.push(ids.length, ...ids);
    }
    args.push(orgs.size);
    for (const [orgId, totals] of orgs) {
      keys.push(this.keys.org(orgId), this.keys.buckets(orgId), this.keys.slices(orgId));
      let entries = 0;
      for (const models of totals.usage.values()) entries += models.size;
      args.push(orgId, ...totals.refunds, decimal(totals.spend), entries);
      for (const [usageKey, models] of totals.usage) {
        for (const [modelId, [requests, input, output, spend]] of models) {
          keys.push(usageKey);
          args.push(modelId, requests, input, output, decimal(spend));
        }
      }
    }
    return { keys, args };
  }
}

/** A USD amount, exactly as computed (HINCRBYFLOAT and Lua's tonumber read exponents too). */
function decimal(usd: number): string {
  return String(usd);
}
