import type { Redis } from 'ioredis';
import type { Logger } from '@tollway/service-kit';

/**
 * Keeps the capacity leases of running requests alive: every third of the lease time, one
 * pipelined ZADD XX per model pushes the expiry of all this replica's live leases forward. When
 * the replica dies the renewals stop, and its leases expire within one lease time. One timer per
 * replica, however many requests run.
 */
export class LeaseRenewer {
  private readonly active = new Map<string, Set<string>>();
  private timer: NodeJS.Timeout | null = null;
  /** Renewal rounds sent since start (for `tollway_capacity_lease_renewals_total`). */
  renewals = 0;

  constructor(
    private readonly redis: Redis,
    private readonly leaseMs: number,
    private readonly now: () => number,
    private readonly logger?: Logger,
  ) {}

  /** Starts renewing `leaseId` in the zset `leaseKey`. */
  add(leaseKey: string, leaseId: string): void {
    let ids = this.active.get(leaseKey);
    if (!ids) this.active.set(leaseKey, (ids = new Set()));
    ids.add(leaseId);
    if (!this.timer) {
      this.timer = setInterval(() => this.renew(), Math.max(1, Math.floor(this.leaseMs / 3)));
      this.timer.unref();
    }
  }

  /** Stops renewing it (the lease is being released). */
  remove(leaseKey: string, leaseId: string): void {
    const ids = this.active.get(leaseKey);
    if (!ids) return;
    ids.delete(leaseId);
    if (ids.size === 0) this.active.delete(leaseKey);
    if (this.active.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  /** Lease key → how many leases this replica holds and renews there (read when metrics are scraped). */
  held(): ReadonlyMap<string, ReadonlySet<string>> {
    return this.active;
  }

  private renew(): void {
    this.renewals++;
    const expiry = this.now() + this.leaseMs;
    const pipeline = this.redis.pipeline();
    for (const [leaseKey, ids] of this.active) {
      // XX: a lease settled meanwhile (ZREM) is not brought back.
      pipeline.zadd(leaseKey, 'XX', ...[...ids].flatMap((id) => [expiry, id]));
      pipeline.pexpire(leaseKey, this.leaseMs * 2);
    }
    pipeline.exec().catch((err: unknown) => this.logger?.warn('capacity lease renewal failed', { err: String(err) }));
  }
}
