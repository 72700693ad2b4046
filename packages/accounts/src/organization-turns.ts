import type { Redis } from 'ioredis';
import { execOrThrow } from './redis-batch';

/**
 * Keys of the session service's per-organization state that the admin API shows (read-only
 * here). Both carry the session store's hash tag `{sessions}`, so one MULTI reads them on a
 * Redis Cluster too.
 */
export interface SessionSchedulerKeys {
  /** Sorted set of the organization's session ids, kept by the session store: ZCARD = sessions held. */
  sessions(orgId: string): string;
  /** Hash kept by the session service's turn scheduler: `running`, `waiting` (decimal integers; absent = 0). */
  scheduler(orgId: string): string;
}

/** The key names under `prefix`, the session service's `REDIS_PREFIX` (e.g. `tollway:`). */
export function sessionSchedulerKeys(prefix: string): SessionSchedulerKeys {
  const base = `${prefix}{sessions}:`;
  return {
    sessions: (orgId) => `${base}org:${orgId}`,
    scheduler: (orgId) => `${base}sched:${orgId}`,
  };
}

/** An organization's live counts on the session service. */
export interface OrganizationTurns {
  /** Sessions it holds. */
  sessions: number;
  /** Its turns running now. */
  running: number;
  /** Its turns waiting to run. */
  waiting: number;
}

/**
 * Reads an organization's sessions held and turns running and waiting, in one round trip (one
 * MULTI, so the three counts are of one moment). A count the scheduler has not written is 0, and so
 * is one that is not an integer; a negative count is shown as it is, for an operator to see.
 */
export async function readOrganizationTurns(redis: Redis, prefix: string, orgId: string): Promise<OrganizationTurns> {
  const keys = sessionSchedulerKeys(prefix);
  const [sessions, counts] = (await execOrThrow(
    redis.multi().zcard(keys.sessions(orgId)).hmget(keys.scheduler(orgId), 'running', 'waiting'),
  )) as [number | undefined, Array<string | null> | undefined];
  return { sessions: count(sessions), running: count(counts?.[0]), waiting: count(counts?.[1]) };
}

function count(reply: number | string | null | undefined): number {
  const value = reply === null || reply === undefined ? 0 : Number(reply);
  return Number.isSafeInteger(value) ? value : 0;
}
