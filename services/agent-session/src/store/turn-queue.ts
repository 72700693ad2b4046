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
  private queue: Queue<AgentTurnJob>;

  constructor(
    private readonly connection: Redis,
    private readonly redisPrefix: string,
  ) {
    this.queue = this.open();
  }

  /**
   * A BullMQ queue on the connection. Its version check (an INFO on a fail-fast connection, whose
   * replies time out after 700 ms) is skipped: the workers check the version, and a start-up that
   * fails is kept by BullMQ for the queue's life, every later add failing with the same error.
   */
  private open(): Queue<AgentTurnJob> {
    return new Queue<AgentTurnJob>(AGENT_TURN_QUEUE, {
      connection: this.connection,
      prefix: turnQueuePrefix(this.redisPrefix),
      skipVersionCheck: true,
    });
  }

  /**
   * Resolves once the queue has started. A start that failed (Redis away or slow when the process
   * came up) is not kept: the queue is made anew and started once more, so the process serves
   * again as soon as Redis does, instead of refusing every send until it is restarted.
   */
  async ready(): Promise<Queue<AgentTurnJob>> {
    const queue = this.queue;
    try {
      await queue.waitUntilReady();
      return queue;
    } catch {
      if (this.queue === queue) {
        this.queue = this.open();
        queue.close().catch(() => undefined);
      }
      await this.queue.waitUntilReady();
      return this.queue;
    }
  }

  /** For `/readyz`: the queue has started and its connection answers. */
  async check(): Promise<void> {
    await this.ready();
    await this.connection.ping();
  }

  /** Adds the turn's job; rejects when Redis refuses. */
  async enqueue(job: AgentTurnJob): Promise<void> {
    const queue = await this.ready();
    await queue.add(AGENT_TURN_QUEUE, job, {
      jobId: job.turn_id,
      attempts: 1,
      removeOnComplete: true,
      removeOnFail: KEEP_FAILED_JOBS,
    });
  }

  /** Jobs waiting, active and delayed (for the metrics). */
  async counts(): Promise<{ waiting: number; active: number; delayed: number }> {
    const counts = await (await this.ready()).getJobCounts('waiting', 'active', 'delayed');
    return { waiting: counts.waiting ?? 0, active: counts.active ?? 0, delayed: counts.delayed ?? 0 };
  }

  /** Closes the queue (not the connection it was given). */
  close(): Promise<void> {
    return this.queue.close();
  }
}
