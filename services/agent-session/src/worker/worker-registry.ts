import type { Redis } from 'ioredis';
import { luaScript } from '@tollway/accounts';

/**
 * Cluster-wide bookkeeping of live workers and the turns they run, in Redis:
 *
 * - `{workers}:live`         ZSET worker id → expiry (ms); a worker heartbeats its entry.
 * - `{workers}:concurrency`  HASH worker id → configured concurrency.
 * - `{workers}:leases`       ZSET `<session_id>:<turn_id>` → lease expiry (ms); one per executing turn,
 *                            heartbeated by the worker that runs it. An expired lease is an orphaned turn.
 * - `{workers}:lease-jobs`   HASH lease member → the turn's job JSON, so a reaper can still send its webhook.
 *
 * All keys share the `{workers}` hash tag so each script touches one Redis Cluster slot, and every
 * expiry is measured with the Redis server's clock (`TIME`), so workers on different hosts agree.
 */

/** Live-worker totals reported by `GET /health`. */
export interface WorkerStats {
  /** Sum of the concurrency of every live worker. */
  maxWorkers: number;
  /** Turns executing now across all live workers (unexpired leases). */
  runningWorkers: number;
}

/** One turn whose lease expired: the worker that ran it is gone. */
export interface OrphanedTurn {
  sessionId: string;
  turnId: string;
  /** The job JSON stored with the lease, or null when none was stored. */
  jobJson: string | null;
}

interface RegistryKeys {
  live: string;
  concurrency: string;
  leases: string;
  leaseJobs: string;
}

function registryKeys(prefix: string): RegistryKeys {
  return {
    live: `${prefix}{workers}:live`,
    concurrency: `${prefix}{workers}:concurrency`,
    leases: `${prefix}{workers}:leases`,
    leaseJobs: `${prefix}{workers}:lease-jobs`,
  };
}

const NOW_MS = `local t = redis.call('TIME'); local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

/**
 * KEYS: live, concurrency, leases. ARGV: none.
 * Drops expired workers, then returns { sum of live concurrency, count of unexpired leases }.
 */
const READ_STATS = luaScript(
  `${NOW_MS}
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
if #dead > 0 then
  redis.call('ZREM', KEYS[1], unpack(dead))
  redis.call('HDEL', KEYS[2], unpack(dead))
end
local live = redis.call('ZRANGE', KEYS[1], 0, -1)
local total = 0
if #live > 0 then
  local values = redis.call('HMGET', KEYS[2], unpack(live))
  for _, v in ipairs(values) do total = total + (tonumber(v) or 0) end
end
return { total, redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf') }`,
  'worker_stats',
);

/**
 * KEYS: live, concurrency, leases. ARGV: worker id, concurrency, ttl ms, lease members...
 * Registers or refreshes the worker and pushes the expiry of each of its leases that still exists.
 */
const HEARTBEAT = luaScript(
  `${NOW_MS}
local ttl = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
for i = 4, #ARGV do redis.call('ZADD', KEYS[3], 'XX', now + ttl, ARGV[i]) end
return 1`,
  'worker_heartbeat',
);

/** KEYS: live, concurrency. ARGV: worker id. Removes the worker at once (orderly shutdown). */
const DEREGISTER = luaScript(
  `redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1`,
  'worker_deregister',
);

/** KEYS: leases, lease-jobs. ARGV: member, ttl ms, job JSON. Takes a lease on one executing turn. */
const ACQUIRE_LEASE = luaScript(
  `${NOW_MS}
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return 1`,
  'lease_acquire',
);

/** KEYS: leases, lease-jobs. ARGV: member. Releases a lease; returns 1 if this call removed it. */
const RELEASE_LEASE = luaScript(
  `local removed = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return removed`,
  'lease_release',
);

/**
 * KEYS: leases, lease-jobs. ARGV: limit.
 * Claims up to `limit` expired leases: removes them and returns { member, job JSON or false, ... }.
 * Atomic, so of several reapers exactly one claims each orphan.
 */
const CLAIM_EXPIRED = luaScript(
  `${NOW_MS}
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local out = {}
for _, m in ipairs(members) do
  redis.call('ZREM', KEYS[1], m)
  local job = redis.call('HGET', KEYS[2], m)
  redis.call('HDEL', KEYS[2], m)
  table.insert(out, m)
  table.insert(out, job)
end
return out`,
  'lease_claim',
);

function leaseMember(sessionId: string, turnId: string): string {
  return `${sessionId}:${turnId}`;
}

/** Reads the cluster-wide worker totals for `/health`; also drops workers whose heartbeat expired. */
export async function readWorkerStats(redis: Redis, prefix: string): Promise<WorkerStats> {
  const keys = registryKeys(prefix);
  const reply = (await READ_STATS.run(redis, [keys.live, keys.concurrency, keys.leases], [])) as [number, number];
  return { maxWorkers: Number(reply[0]), runningWorkers: Number(reply[1]) };
}

/** Whether a lease (live or expired but not yet reaped) exists for the turn. */
export async function hasTurnLease(redis: Redis, prefix: string, sessionId: string, turnId: string): Promise<boolean> {
  return (await redis.zscore(registryKeys(prefix).leases, leaseMember(sessionId, turnId))) !== null;
}

/** Claims up to `limit` (default 100) orphaned turns whose lease expired; each is returned to one caller only. */
export async function claimExpiredLeases(redis: Redis, prefix: string, limit = 100): Promise<OrphanedTurn[]> {
  const keys = registryKeys(prefix);
  const reply = (await CLAIM_EXPIRED.run(redis, [keys.leases, keys.leaseJobs], [limit])) as (string | null)[];
  const orphans: OrphanedTurn[] = [];
  for (let i = 0; i < reply.length; i += 2) {
    const member = String(reply[i]);
    const sep = member.indexOf(':');
    orphans.push({
      sessionId: member.slice(0, sep),
      turnId: member.slice(sep + 1),
      jobJson: typeof reply[i + 1] === 'string' ? (reply[i + 1] as string) : null,
    });
  }
  return orphans;
}

/** Options of a WorkerRegistration. */
export interface WorkerRegistrationOptions {
  redis: Redis;
  prefix: string;
  workerId: string;
  /** Turns this worker runs at once. */
  concurrency: number;
  /** Lifetime of the worker entry and of each turn lease without a heartbeat, in ms. */
  ttlMs: number;
}

/**
 * One worker's presence in the registry: register, heartbeat (itself and the leases of the turns
 * it runs), take and release per-turn leases, deregister on shutdown.
 */
export class WorkerRegistration {
  private readonly keys: RegistryKeys;
  private readonly held = new Set<string>();

  constructor(private readonly options: WorkerRegistrationOptions) {
    this.keys = registryKeys(options.prefix);
  }

  /** Registers the worker and refreshes its leases; call every fraction of `ttlMs`. */
  async heartbeat(): Promise<void> {
    const { redis, workerId, concurrency, ttlMs } = this.options;
    await HEARTBEAT.run(
      redis,
      [this.keys.live, this.keys.concurrency, this.keys.leases],
      [workerId, concurrency, ttlMs, ...this.held],
    );
  }

  /** Takes the lease of a turn this worker starts executing; `jobJson` lets a reaper send its webhook. */
  async acquireLease(sessionId: string, turnId: string, jobJson: string): Promise<void> {
    const member = leaseMember(sessionId, turnId);
    this.held.add(member);
    await ACQUIRE_LEASE.run(
      this.options.redis,
      [this.keys.leases, this.keys.leaseJobs],
      [member, this.options.ttlMs, jobJson],
    );
  }

  /**
   * Releases a turn's lease; false when a reaper had already claimed it. The heartbeat renews it
   * until the release is done: a release that failed (Redis unreachable) leaves the lease renewed,
   * not left to expire and be taken by a reaper while the turn still ends.
   */
  async releaseLease(sessionId: string, turnId: string): Promise<boolean> {
    const member = leaseMember(sessionId, turnId);
    const removed = await RELEASE_LEASE.run(this.options.redis, [this.keys.leases, this.keys.leaseJobs], [member]);
    this.held.delete(member);
    return Number(removed) === 1;
  }

  /** Stops renewing a turn's lease without releasing it (it expires; a reaper takes it). */
  forgetLease(sessionId: string, turnId: string): void {
    this.held.delete(leaseMember(sessionId, turnId));
  }

  /** Removes the worker from the registry (orderly shutdown); its leases, if any, expire normally. */
  async deregister(): Promise<void> {
    await DEREGISTER.run(this.options.redis, [this.keys.live, this.keys.concurrency], [this.options.workerId]);
  }
}
