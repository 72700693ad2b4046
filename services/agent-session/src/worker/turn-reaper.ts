import type { Logger } from '@tollway/service-kit';
import type { SessionStore } from '../store/session-store';
import type { TurnScheduler, ReapedTurn } from '../store/turn-scheduler';
import type { TurnNotifier } from '../webhooks/turn-notifier';
import { parseTurnJob } from '../domain/session-rules';

/** Error of a turn whose worker process stopped (killed, crashed, partitioned) while it ran. */
export const WORKER_LOST_ERROR = 'turn failed: the worker process running it stopped before the turn ended';

/** Expired leases taken per script call; a pass repeats until none is left. */
const REAP_BATCH = 100;

/** Options of TurnReaper. */
export interface TurnReaperOptions {
  store: SessionStore;
  scheduler: TurnScheduler;
  notifier: TurnNotifier;
  logger: Logger;
  /** Pass period, in ms. */
  intervalMs: number;
  /** Lease lifetime, in ms. */
  leaseTtlMs: number;
  clock?: () => number;
  /** Told of each turn it ends (the metrics). */
  onRecovered?: () => void;
}

/**
 * Ends in `error` the turns whose lease expired: their worker stopped heartbeating (killed,
 * crashed, cut off). Each is taken and ended in one atomic step, so of any number of reapers (every
 * worker runs one, and an API without a worker of its own) exactly one ends each turn, and sends
 * its webhook. A turn is only ever held by a lease or waiting in its organization's queue: the
 * claim that takes it out of the queue leases it in the same step, so no turn is left in between.
 */
export class TurnReaper {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<unknown> | null = null;
  private readonly clock: () => number;
  /**
   * Until when a lease that expired is not taken for a dead worker: after Redis was unreachable,
   * every lease expired during the outage (no worker could renew it), so live workers get one lease
   * time to renew theirs first. Infinity while passes fail.
   */
  private leasesTrustedFrom = 0;

  constructor(private readonly options: TurnReaperOptions) {
    this.clock = options.clock ?? Date.now;
  }

  /**
   * Starts periodic passes. A tick that comes late by half a lease time or more means this process
   * stood still (CPU starved, a long GC pause, a stopped VM): its own worker could not heartbeat
   * meanwhile either, so expired leases wait one lease time for their workers, as after an outage.
   */
  start(): void {
    const { intervalMs, leaseTtlMs } = this.options;
    let due = this.clock() + intervalMs;
    this.timer = setInterval(() => {
      const now = this.clock();
      if (now - due >= leaseTtlMs / 2) this.holdAfterStall(now, now - due);
      due = now + intervalMs;
      if (this.running) return;
      this.running = this.runPass().finally(() => {
        this.running = null;
      });
    }, this.options.intervalMs);
    this.timer.unref();
  }

  /** Holds expired leases for one lease time after this process stood still for `lateMs`. */
  private holdAfterStall(now: number, lateMs: number): void {
    if (this.leasesTrustedFrom === Infinity) return; // held already, until Redis answers
    this.leasesTrustedFrom = Math.max(this.leasesTrustedFrom, now + this.options.leaseTtlMs);
    this.options.logger.warn('reaper: this process stood still; expired leases wait one lease time for their workers', {
      late_ms: lateMs,
      lease_ttl_ms: this.options.leaseTtlMs,
    });
  }

  /**
   * One pass as the timer runs it: how many turns it ended, or null when it failed (Redis
   * unreachable); the first pass that works after failures holds lease expiries for a lease time.
   */
  async runPass(): Promise<number | null> {
    try {
      const ended = await this.pass();
      if (this.leasesTrustedFrom === Infinity) {
        this.leasesTrustedFrom = this.clock() + this.options.leaseTtlMs;
        this.options.logger.info('reaper: Redis is back; expired leases wait one lease time for their workers', {
          lease_ttl_ms: this.options.leaseTtlMs,
        });
      }
      return ended;
    } catch (err) {
      this.leasesTrustedFrom = Infinity;
      this.options.logger.warn('reaper pass failed', { err: err instanceof Error ? err.message : String(err) });
      return null;
    }
  }

  /** Stops the passes and waits for one under way. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  /** One pass; returns how many turns it ended. */
  async pass(): Promise<number> {
    // Held after an outage (see leasesTrustedFrom): a live worker's lease may not be renewed yet.
    // The ping tells runPass whether Redis answers again.
    if (this.clock() < this.leasesTrustedFrom) {
      await this.options.store.ping();
      return 0;
    }
    let ended = 0;
    for (;;) {
      const reaped = await this.options.scheduler.reap(REAP_BATCH, WORKER_LOST_ERROR);
      for (const turn of reaped) if (await this.report(turn)) ended++;
      if (reaped.length < REAP_BATCH) return ended;
    }
  }

  /** Sends a reaped turn's webhook; true when the turn was ended (not a deleted session's). */
  private async report(reaped: ReapedTurn): Promise<boolean> {
    const { sessionId, turnId } = reaped;
    const job = parseTurnJob(reaped.jobJson);
    if (reaped.how === 'deleted') {
      // The session was deleted while its worker was gone: the deletion cancelled the turn, and
      // this reaper, which took the lease, is the one to say so (a worker reports a cancellation
      // only while it still holds the turn's lease).
      this.options.logger.info("reaped a deleted session's turn", { session_id: sessionId, turn_id: turnId });
      if (job) this.options.notifier.notifyCancelled(job, { durationMs: Math.max(0, this.clock() - job.accepted_at) });
      return false;
    }
    this.options.onRecovered?.();
    this.options.logger.warn('reaped an orphaned turn', { session_id: sessionId, turn_id: turnId });
    if (job) {
      const history = job.message.webhook?.include_messages
        ? await this.options.store.messages(sessionId, job.org_id)
        : null;
      this.options.notifier.notify(job, {
        sessionId,
        end: { kind: 'error', error: WORKER_LOST_ERROR },
        history,
        durationMs: Math.max(0, this.clock() - job.accepted_at),
        totalTokens: 0,
      });
    }
    return true;
  }
}
