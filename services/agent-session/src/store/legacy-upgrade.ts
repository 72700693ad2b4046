import type { Redis } from 'ioredis';
import type { Logger } from '@tollway/service-kit';
import { sessionKeyBase } from './session-keys';
import type { SessionStore } from './session-store';

/** The error of a turn an earlier build queued in BullMQ, whose job this build cannot run. */
export const TURN_LOST_IN_UPGRADE_ERROR =
  'turn failed: its queued job was dropped when the session service was upgraded; send the message again';

/** Sessions read per step of the upgrade. */
const BATCH = 500;

/**
 * Builds before the fair scheduler kept running sessions in a `running` sorted set and their turns
 * in BullMQ. A session left `running` by one has no turn this build would ever run or reap, so it
 * is ended in error (compare-and-set, as any end), and moved into the activity index; the old set
 * is emptied as it goes. Idempotent: replicas starting at once each end a turn at most once.
 * Resolves how many turns it ended.
 */
export async function endTurnsLostInUpgrade(
  redis: Redis,
  store: SessionStore,
  prefix: string,
  logger: Logger,
): Promise<number> {
  const legacy = `${sessionKeyBase(prefix)}running`;
  let ended = 0;
  for (;;) {
    const ids = await redis.zrange(legacy, 0, BATCH - 1);
    if (ids.length === 0) break;
    for (const id of ids) {
      const [status, org, turnId, job] = await redis.hmget(
        `${sessionKeyBase(prefix)}s:${id}`,
        'status',
        'org',
        'turn_id',
        'job',
      );
      if (status === 'running' && turnId && !job) {
        const outcome = { kind: 'error' as const, error: TURN_LOST_IN_UPGRADE_ERROR };
        const options = { endedBy: 'api' as const, org: org ? org : null };
        if ((await store.finishTurn(id, turnId, outcome, options)) === 'applied') ended++;
      }
      await redis.zrem(legacy, id);
    }
  }
  if (ended > 0) logger.warn('ended the turns an earlier build had queued (BullMQ): they cannot run here', { ended });
  return ended;
}
