import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { AGENT_TURN_QUEUE, type AgentTurnJob } from '@tollway/contracts';

/** BullMQ key prefix of the turn queue: the Redis prefix + `bull` (workers use the same). */
export function turnQueuePrefix(redisPrefix: string): string {
  return `${redisPrefix}bull`;
}

/**
 * A completed job is removed at once: its turn's outcome is in the session store, and the job
 * holds the message, its `user_params` and its webhook's URL and bearer token, which must not
 * outlive the session (a deleted one's, a deleted organization's). A failed job is kept a few
 * minutes, at most 100: the reaper reads it to send the webhook of a turn its worker could not end.
 */
const KEEP_FAILED_JOBS = { age: 600, count: 100 };

/**
 * The producer side of the agent-turn queue. `jobId` = turn id, so a turn is queued at most
 * once; `attempts: 1` because a turn must never run twice (a lost worker is reaped to `error`).
 */
export class TurnQueueProducer {
  private readonly queue: Queue<AgentTurnJob>;

  constructor(connection: Redis, redisPrefix: string) {
    this.queue = new Queue<AgentTurnJob>(AGENT_TURN_QUEUE, { connection, prefix: turnQueuePrefix(redisPrefix) });
  }

  /** Adds the turn's job; rejects when Redis refuses. */
  async enqueue(job: AgentTurnJob): Promise<void> {
    await this.queue.add(AGENT_TURN_QUEUE, job, {
      jobId: job.turn_id,
      attempts: 1,
      removeOnComplete: true,
      removeOnFail: KEEP_FAILED_JOBS,
    });
  }

  /** Jobs waiting, active and delayed (for the metrics). */
  async counts(): Promise<{ waiting: number; active: number; delayed: number }> {
    const counts = await this.queue.getJobCounts('waiting', 'active', 'delayed');
    return { waiting: counts.waiting ?? 0, active: counts.active ?? 0, delayed: counts.delayed ?? 0 };
  }

  /** Closes the queue (not the connection it was given). */
  close(): Promise<void> {
    return this.queue.close();
  }
}
