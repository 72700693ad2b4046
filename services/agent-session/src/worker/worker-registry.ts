import type { Redis } from 'ioredis';
import { luaScript } from '@tollway/accounts';
import { sessionKeyBase, sessionKeys, schedulerOrg } from '../store/session-keys';

/**
 * Cluster-wide bookkeeping of live workers and the turns they execute, in Redis (under the
 * session service's `{sessions}` hash tag, beside the scheduler that hands the turns out):
 *
 * - `workers`       ZSET worker id → expiry (ms); a worker heartbeats its entry.
 * - `worker-slots`  HASH worker id → configured concurrency.
 * - `leases`        ZSET `<session_id>:<turn_id>:<org>` → lease expiry (ms); one per executing turn,
 *                   taken by the claim that hands the turn out, heartbeated by the worker that runs
 *                   it, removed by the step that ends it. An expired lease is an orphaned turn.
 *
 * Every expiry is measured with the Redis server's clock (`TIME`), so workers on different hosts agree.
 */

/** Live-worker totals reported by `GET /health`. */
export interface WorkerStats {
  /** Sum of the concurrency of every live worker. */
  maxWorkers: number;
  /** Turns executing now across all live workers (unexpired leases). */
  runningWorkers: number;
}

const NOW_MS = `local t = redis.call('TIME'); local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

/**
 * KEYS: workers, worker-slots, leases. ARGV: none.
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
 * KEYS: workers, worker-slots, leases. ARGV: worker id, concurrency, ttl ms, key base, lease members...
 * Registers or refreshes the worker and pushes the expiry of each of its leases that still exists.
 * Returns the members whose lease is gone (a reaper took it) or whose session is (deleted while a
 * cancel message was lost), for the worker to stop them.
 */
const HEARTBEAT = luaScript(
  `${NOW_MS}
local ttl = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
local lost = {}
for i = 5, #ARGV do
  local member = ARGV[i]
  -- CH counts a changed score: 0 means gone, or (rarely) renewed to the same millisecond.
  local renewed = redis.call('ZADD', KEYS[3], 'XX', 'CH', now + ttl, member) == 1 or redis.call('ZSCORE', KEYS[3], member)
  local sid = string.sub(member, 1, string.find(member, ':', 1, true) - 1)
  if not renewed or redis.call('EXISTS', ARGV[4] .. 's:' .. sid) == 0 then lost[#lost + 1] = member end
end
return lost`,
  'worker_heartbeat',
);

/** KEYS: workers, worker-slots. ARGV: worker id. Removes the worker at once (orderly shutdown). */
const DEREGISTER = luaScript(
  `redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1`,
  'worker_deregister',
);

/** The lease member of a turn: `<session id>:<turn id>:<org>` (org '' without auth). */
export function leaseMember(sessionId: string, turnId: string, orgId: string | null): string {
  return `${sessionId}:${turnId}:${schedulerOrg(orgId)}`;
}

/** Reads the cluster-wide worker totals for `/health`; also drops workers whose heartbeat expired. */
export async function readWorkerStats(redis: Redis, prefix: string): Promise<WorkerStats> {
  const keys = sessionKeys(prefix);
  const reply = (await READ_STATS.run(redis, [keys.workers, keys.workerSlots, keys.leases], [])) as [number, number];
  return { maxWorkers: Number(reply[0]), runningWorkers: Number(reply[1]) };
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

/** A turn held by this worker whose lease or session is gone. */
export interface LostTurn {
  sessionId: string;
  turnId: string;
}

/**
 * One worker's presence in the registry: register, heartbeat (itself and the leases of the turns
 * it runs), deregister on shutdown. The leases themselves are taken by the claim that hands a turn
 * out and removed by the step that ends it (see TurnScheduler); this keeps them alive meanwhile.
 */
export class WorkerRegistration {
  private readonly keys: ReturnType<typeof sessionKeys>;
  private readonly base: string;
  private readonly held = new Set<string>();

  constructor(private readonly options: WorkerRegistrationOptions) {
    this.keys = sessionKeys(options.prefix);
    this.base = sessionKeyBase(options.prefix);
  }

  /**
   * Registers the worker and refreshes its leases; call every fraction of `ttlMs`. Returns the held
   * turns whose lease a reaper took or whose session is gone.
   */
  async heartbeat(): Promise<LostTurn[]> {
    const { redis, workerId, concurrency, ttlMs } = this.options;
    const lost = (await HEARTBEAT.run(
      redis,
      [this.keys.workers, this.keys.workerSlots, this.keys.leases],
      [workerId, concurrency, ttlMs, this.base, ...this.held],
    )) as string[];
    return lost.map((member) => {
      const [sessionId = '', turnId = ''] = member.split(':');
      return { sessionId, turnId };
    });
  }

  /** Renews the lease of a turn this worker claimed with every heartbeat, until `forget`. */
  hold(sessionId: string, turnId: string, orgId: string | null): void {
    this.held.add(leaseMember(sessionId, turnId, orgId));
  }

  /** Stops renewing a turn's lease (ended, or left to expire so a reaper takes it). */
  forget(sessionId: string, turnId: string, orgId: string | null): void {
    this.held.delete(leaseMember(sessionId, turnId, orgId));
  }

  /** Removes the worker from the registry (orderly shutdown); its leases, if any, expire normally. */
  async deregister(): Promise<void> {
    await DEREGISTER.run(this.options.redis, [this.keys.workers, this.keys.workerSlots], [this.options.workerId]);
  }
}
