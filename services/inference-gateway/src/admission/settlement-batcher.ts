import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { luaScript, runScripts, USAGE_RETENTION_SECONDS, type AccountKeys, type ScriptCall } from '@tollway/accounts';
import { confirmReplicated, ReplicationShortfallError, type Logger, type ReplicaWait } from '@tollway/service-kit';
import { SETTLE_LUA } from './scripts/settle.lua';

const settleScript = luaScript(SETTLE_LUA, 'settle');

/** How long a batch whose outcome was lost is sent again, from its first sending, ms. */
export const SETTLEMENT_RETRY_WINDOW_MS = 60_000;
/**
 * How long Redis keeps the marks of the batches sent (settle.lua.ts), from a writer's last batch of
 * the minute, ms: past the retry window, so a batch sent again meets its mark unless Redis itself
 * stood still for minutes between running it and reading it again.
 */
const SETTLEMENT_MARK_TTL_MS = 5 * 60_000;
/** The first wait before a batch is sent again, ms; it doubles with each failure, up to the most. */
const RETRY_FIRST_DELAY_MS = 250;
const RETRY_MOST_DELAY_MS = 5_000;
/** How long graceful shutdown goes on sending batches whose outcome was lost, ms. */
const DRAIN_RETRY_MS = 5_000;

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
   * How long a batch that failed, or whose answer was lost, is sent again (each batch is applied
   * once however often it is sent: settle.lua.ts), from its first sending, ms; default
   * SETTLEMENT_RETRY_WINDOW_MS. After that its settlements are lost, and counted.
   */
  retryWindowMs?: number;
  /**
   * How long a settlement that only records spend and usage (no lease to free, no bucket to
   * refund: a request admitted from a quota slice) may wait for company, ms; default 1000. Its
   * slice's allowance covers the spend meanwhile, and it leaves with the slice's return at the latest.
   */
  accountingDelayMs?: number;
  /**
   * Replicas that must hold a batch before it counts as written (Redis WAIT after its answer); null
   * (the default) = none. A WAIT whose connection broke sends the batch again (applied once); one
   * that timed out short of the replicas is counted (`unreplicated`) and the batch stays as it is.
   */
  replicaWait?: ReplicaWait | null;
}

/** A batch taken for sending: the script call, and what to do once it is answered. */
export interface SettlementCall extends ScriptCall {
  /** Call with the script's error, or with null and its reply once it succeeded. */
  finish(err: unknown, reply?: unknown): void;
}

/** What became of the batches sent, since start (for the metrics). */
export interface SettlementStats {
  /** Sendings again of a batch that failed or whose answer was lost. */
  retries: number;
  /** Settlements (requests) given up after the retry window: their usage was not charged. */
  lost: number;
  /** Settlements (requests) written whose replicas did not acknowledge them within the wait (replicaWait). */
  unreplicated: number;
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
  /** Resolved once its first sending is answered, or failed. */
  written: Promise<void>;
  resolve: () => void;
  /** Its number, unique to this writer, from its first sending on; 0 before. */
  seq: number;
  /** The minute of its first sending (whose marks hold its number), and when that was (performance.now). */
  minute: number;
  firstSentAt: number;
  /** Failed sendings so far, and when it is due to go again (performance.now). */
  failures: number;
  dueAt: number;
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
 * A batch that fails, or whose answer is lost with its connection or to a reply timeout, is sent
 * again, with growing waits, for `retryWindowMs` from its first sending: each batch carries a number
 * that Redis marks as it applies it (settle.lua.ts), so one that ran before its answer was lost
 * changes nothing the second time. Whoever waits on `add` is answered after the first sending.
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
  private readonly retryWindowMs: number;
  /** This process's name in the marks: batches of other processes never share its numbers. */
  private readonly writer = randomBytes(9).toString('base64url');
  private sequence = 0;
  /** Batches that failed, waiting to go again. */
  private readonly retrying: Batch[] = [];
  private retryTimer: NodeJS.Timeout | null = null;
  private readonly counts: SettlementStats = { retries: 0, lost: 0, unreplicated: 0 };
  private readonly replicaWait: ReplicaWait | null;
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
    this.accountingDelayMs = options.accountingDelayMs ?? 1000;
    this.retryWindowMs = options.retryWindowMs ?? SETTLEMENT_RETRY_WINDOW_MS;
    this.replicaWait = options.replicaWait ?? null;
  }

  stats(): SettlementStats {
    return { ...this.counts };
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

  /**
   * Takes the oldest queued batch as one script call; null when none is queued, or, with
   * `urgentOnly`, when only spend-only settlements within their accounting delay are.
   */
  take(urgentOnly = false): SettlementCall | null {
    let batch = this.full.shift();
    if (!batch) {
      if (!this.open || (urgentOnly && !this.open.urgent)) return null;
      batch = this.open;
      this.open = null;
      // Its accounting delay is over: the next spend-only settlement starts a delay of its own.
      if (this.timer) clearTimeout(this.timer);
      this.timer = null;
    }
    const taken = batch;
    if (taken.seq === 0) {
      taken.seq = ++this.sequence;
      taken.minute = Math.floor(Date.now() / 60_000);
      taken.firstSentAt = performance.now();
    }
    const { keys, args } = this.encode(taken);
    let answered!: () => void;
    const attempt = new Promise<void>((resolve) => (answered = resolve));
    this.inFlight.add(attempt);
    return {
      script: settleScript,
      keys,
      args,
      // Settled before whatever follows it (the next admissions) even right after a SCRIPT FLUSH.
      ordered: true,
      finish: (err, reply) => {
        if (err) this.failed(taken, err);
        else {
          if (reply === -1) {
            // An earlier sending ran, and its answer was lost: nothing was applied twice.
            this.logger?.info('settlement sent again had been applied', { requests: taken.count });
          }
          if (this.replicaWait) this.confirm(taken, this.replicaWait);
        }
        this.inFlight.delete(attempt);
        answered();
        taken.resolve();
        // What waited for this call goes now (or within the accounting delay), unless an
        // admission took it meanwhile.
        this.scheduleQueued();
      },
    };
  }

  /**
   * Waits for the replicas to hold a batch Redis answered. A primary that dies before they do (a
   * failover) breaks the connection: the batch goes again, to the new primary, where it applies
   * if it was lost with the old one (its mark went with it) and changes nothing if it was not.
   */
  private confirm(batch: Batch, wait: ReplicaWait): void {
    const confirming: Promise<void> = confirmReplicated(this.redis, wait)
      .catch((err: unknown) => {
        if (!(err instanceof ReplicationShortfallError)) return this.failed(batch, err);
        this.counts.unreplicated += batch.count;
        this.logger?.warn('settlement not acknowledged by the replicas in time', {
          requests: batch.count,
          acknowledged: err.acknowledged,
          replicas: wait.replicas,
        });
      })
      .finally(() => this.inFlight.delete(confirming));
    this.inFlight.add(confirming);
  }

  /** A sending failed, or its answer was lost: the batch goes again, or is given up past the window. */
  private failed(batch: Batch, err: unknown): void {
    batch.failures += 1;
    const wait = Math.min(RETRY_FIRST_DELAY_MS * 2 ** (batch.failures - 1), RETRY_MOST_DELAY_MS);
    if (performance.now() + wait - batch.firstSentAt > this.retryWindowMs) {
      this.giveUp(batch, err);
      return;
    }
    this.counts.retries += 1;
    this.logger?.warn('settlement failed; sending it again', {
      requests: batch.count,
      failures: batch.failures,
      retry_in_ms: wait,
      err: String(err),
    });
    batch.dueAt = performance.now() + wait;
    this.retrying.push(batch);
    this.armRetry();
  }

  private giveUp(batch: Batch, err: unknown): void {
    this.counts.lost += batch.count;
    // Leases expire on their own; the usage of these requests is lost, and said so.
    this.logger?.error('settlement failed', {
      requests: batch.count,
      failures: batch.failures,
      orgs: [...batch.orgs.keys()].slice(0, 10),
      err: String(err),
    });
  }

  /** Wakes up when the earliest batch to send again is due. */
  private armRetry(): void {
    if (this.retryTimer || this.retrying.length === 0) return;
    const due = Math.min(...this.retrying.map((batch) => batch.dueAt));
    this.retryTimer = setTimeout(
      () => {
        this.retryTimer = null;
        this.requeueDue();
        this.armRetry();
      },
      Math.max(0, due - performance.now()),
    );
  }

  /** Batches due to go again join the queue, ahead of the rest, and go at the end of the turn. */
  private requeueDue(): void {
    const now = performance.now();
    for (let i = this.retrying.length - 1; i >= 0; i -= 1) {
      const batch = this.retrying[i]!;
      if (batch.dueAt > now) continue;
      this.retrying.splice(i, 1);
      this.full.unshift(batch);
    }
    if (this.full.length > 0) this.schedule();
  }

  /**
   * Writes everything queued; resolves when nothing is queued or in flight. Batches that fail go
   * again, as ever, for up to DRAIN_RETRY_MS more; what is left then is given up.
   */
  async drain(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const until = performance.now() + DRAIN_RETRY_MS;
    for (;;) {
      if (this.queued()) this.sendAlone();
      if (this.inFlight.size > 0) {
        await Promise.all([...this.inFlight]);
        continue;
      }
      if (this.retrying.length === 0) break;
      const due = Math.min(...this.retrying.map((batch) => batch.dueAt));
      if (due > until) {
        for (const batch of this.retrying.splice(0)) this.giveUp(batch, new Error('shutting down'));
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - performance.now())));
      this.requeueDue();
    }
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
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
        .then(([outcome]) => (outcome ? call.finish(outcome[0], outcome[1]) : call.finish(new Error('no reply'))))
        .catch((err: unknown) => this.logger?.error('settlement failed', { err: String(err) }));
    }
  }

  /** The script's KEYS and ARGV for a batch (see settle.lua.ts for the layout). */
  private encode(batch: Batch): { keys: string[]; args: Array<string | number> } {
    const keys: string[] = [this.keys.settlementMarks(this.writer, batch.minute)];
    const args: Array<string | number> = [
      this.now(),
      USAGE_RETENTION_SECONDS,
      this.keys.orgChangeChannel(),
      batch.seq,
      SETTLEMENT_MARK_TTL_MS,
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
  return {
    count: 0,
    urgent: false,
    leases: new Map(),
    orgs: new Map(),
    written,
    resolve,
    seq: 0,
    minute: 0,
    firstSentAt: 0,
    failures: 0,
    dueAt: 0,
  };
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
