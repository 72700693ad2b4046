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
   * refund: a request admitted from a quota slice) may wait for company, ms; default 50.
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
  /** epoch minute → model id → [requests, input, output, spend] */
  usage: Map<number, Map<string, [number, number, number, number]>>;
}

/** Settlements summed as they come (nothing is kept per request), and who waits for them. */
interface Batch {
  count: number;
  /** Holds a lease to free or a bucket refund: sent at once, not after `accountingDelayMs`. */
  urgent: boolean;
  /** lease zset → lease ids to free */
  leases: Map<string, string[]>;
  orgs: Map<string, OrgTotals>;
  written: Promise<void>;
  resolve: () => void;
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
  private readonly accountingDelayMs: number;
  /** Full batches waiting to go, oldest first. */
  private readonly full: Batch[] = [];
  /** The batch settlements are being added to. */
  private open: Batch | null = null;
  private scheduled = false;
  private timer: NodeJS.Timeout | null = null;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(options: SettlementBatcherOptions) {
    this.redis = options.redis;
    this.keys = options.keys;
    this.now = options.now;
    this.logger = options.logger;
    this.maxBatch = options.maxBatch ?? 500;
    this.accountingDelayMs = options.accountingDelayMs ?? 50;
  }

  /**
   * Adds a settlement to the open batch; resolves once that batch is written (or its failure
   * logged). Never rejects. Every settlement of a batch shares one promise.
   */
  add(settlement: Settlement): Promise<void> {
    const batch = (this.open ??= newBatch());
    fold(batch, settlement);
    batch.count += 1;
    if (settlement.leaseId !== '' || !settlement.refundedLocally) batch.urgent = true;
    if (batch.count >= this.maxBatch) {
      this.full.push(batch);
      this.open = null;
    }
    this.scheduleQueued();
    return batch.written;
  }

  /**
   * Within `accountingDelayMs`: nobody waits for spend and usage (the slice took the refund), so
   * they gather into fewer, larger calls; anything sent sooner takes them along.
   */
  private scheduleLater(): void {
    if (this.timer) return;
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
      if (this.inFlight.size === 0 || this.full.length > 0) this.sendAlone();
    });
  }

  /** Takes the oldest queued batch as one script call; null when none is queued. */
  take(): SettlementCall | null {
    let batch = this.full.shift();
    if (!batch) {
      if (!this.open) return null;
      batch = this.open;
      this.open = null;
    }
    const taken = batch;
    const { keys, args } = this.encode(taken);
    this.inFlight.add(taken.written);
    return {
      script: settleScript,
      keys,
      args,
      // Settled before whatever follows it (the next admissions) even right after a SCRIPT FLUSH.
      ordered: true,
      finish: (err) => {
        if (err) {
          // Leases expire on their own; the usage of these requests is lost, and said so.
          this.logger?.error('settlement failed', {
            requests: taken.count,
            orgs: [...taken.orgs.keys()].slice(0, 10),
            err: String(err),
          });
        }
        this.inFlight.delete(taken.written);
        taken.resolve();
        // What waited for this call goes now (or within the accounting delay), unless an
        // admission took it meanwhile.
        this.scheduleQueued();
      },
    };
  }

  /** Writes everything queued; resolves when nothing is queued or in flight. */
  async drain(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    while (this.queued() || this.inFlight.size > 0) {
      this.sendAlone();
      await Promise.all([...this.inFlight]);
    }
  }

  /** Sends what is queued at the end of this turn, or within the accounting delay if nothing is urgent. */
  private scheduleQueued(): void {
    if (this.full.length > 0 || this.open?.urgent) this.schedule();
    else if (this.open) this.scheduleLater();
  }

  private queued(): boolean {
    return this.open !== null || this.full.length > 0;
  }

  /** Sends what is queued in calls of its own (no admission came along to carry it). */
  private sendAlone(): void {
    for (let call = this.take(); call; call = this.take()) {
      // Runs outside any request: a throw here must be logged, never left to end the process.
      runScripts(this.redis, [call])
        .then(([outcome]) => call.finish(outcome ? outcome[0] : new Error('no reply')))
        .catch((err: unknown) => this.logger?.error('settlement failed', { err: String(err) }));
    }
  }

  /** The script's KEYS and ARGV for a batch (see settle.lua.ts for the layout). */
  private encode(batch: Batch): { keys: string[]; args: Array<string | number> } {
    const keys: string[] = [];
    const args: Array<string | number> = [
      this.now(),
      USAGE_RETENTION_SECONDS,
      this.keys.orgChangeChannel(),
      batch.leases.size,
    ];
    for (const [leaseKey, ids] of batch.leases) {
      keys.push(leaseKey);
      args.push(ids.length, ...ids);
    }
    args.push(batch.orgs.size);
    for (const [orgId, totals] of batch.orgs) {
      keys.push(this.keys.org(orgId), this.keys.buckets(orgId), this.keys.slices(orgId));
      let entries = 0;
      for (const models of totals.usage.values()) entries += models.size;
      args.push(orgId, ...totals.refunds, decimal(totals.spend), entries);
      for (const [minute, models] of totals.usage) {
        for (const [modelId, [requests, input, output, spend]] of models) {
          keys.push(this.keys.usageMinute(orgId, minute));
          args.push(modelId, requests, input, output, decimal(spend));
        }
      }
    }
    return { keys, args };
  }
}

function newBatch(): Batch {
  let resolve!: () => void;
  const written = new Promise<void>((done) => (resolve = done));
  return { count: 0, urgent: false, leases: new Map(), orgs: new Map(), written, resolve };
}

/** Adds one settlement to a batch's sums: leases to free, refunds, spend, usage per minute and model. */
function fold(batch: Batch, s: Settlement): void {
  if (s.leaseId !== '') {
    const ids = batch.leases.get(s.leaseKey);
    if (ids) ids.push(s.leaseId);
    else batch.leases.set(s.leaseKey, [s.leaseId]);
  }
  let totals = batch.orgs.get(s.orgId);
  if (!totals) batch.orgs.set(s.orgId, (totals = { refunds: [0, 0, 0], spend: 0, usage: new Map() }));
  if (!s.used) {
    if (s.refundedLocally) return;
    totals.refunds[0] += 1;
    totals.refunds[1] += s.taken.input;
    totals.refunds[2] += s.taken.output;
    return;
  }
  const spend = (s.used.input * s.price.input + s.used.output * s.price.output) / 1_000_000;
  if (!s.refundedLocally) {
    totals.refunds[1] += s.taken.input - s.used.input;
    totals.refunds[2] += s.taken.output - s.used.output;
  }
  totals.spend += spend;
  const minute = Math.floor(s.at / 60_000);
  let models = totals.usage.get(minute);
  if (!models) totals.usage.set(minute, (models = new Map()));
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

/** A USD amount, exactly as computed (HINCRBYFLOAT and Lua's tonumber read exponents too). */
function decimal(usd: number): string {
  return String(usd);
}
