import { Job, type Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { AgentTurnJob } from '@tollway/contracts';
import type { Logger } from '@tollway/service-kit';
import type { SessionStore } from '../store/session-store';
import type { TurnNotifier } from '../webhooks/turn-notifier';
import { TURN_CANCELLED_ERROR } from '../webhooks/webhook-payload';
import { claimExpiredLeases, hasTurnLease, type OrphanedTurn } from './worker-registry';

/** Error of a turn whose worker process stopped (killed, crashed, partitioned) while it ran. */
export const WORKER_LOST_ERROR = 'turn failed: the worker process running it stopped before the turn ended';

/** Error of a running turn whose job is gone or ended without the turn starting: a lost job, or a worker killed holding it. */
export const JOB_LOST_ERROR =
  'turn failed: no worker started it (its queued job was lost, or the worker that fetched it stopped first)';

/** Job states in which a turn is still legitimately waiting for a worker. */
const QUEUED_STATES = new Set(['waiting', 'delayed', 'prioritized', 'waiting-children']);

/** Running turns checked per pass for a lost job (oldest first), bounding a pass under a large backlog. */
const LOST_JOB_BATCH = 200;

/** Options of TurnReaper. */
export interface TurnReaperOptions {
  redis: Redis;
  prefix: string;
  store: SessionStore;
  /** The turn queue, to read the state of a job whose turn holds no lease. */
  queue: Queue;
  notifier: TurnNotifier;
  logger: Logger;
  /** Pass period, in ms. */
  intervalMs: number;
  /** Lease lifetime, in ms: a turn is only suspected once it is older than this. */
  leaseTtlMs: number;
  clock?: () => number;
  /** Told of each turn it ends (the metrics). */
  onRecovered?: () => void;
}

/**
 * Ends orphaned `running` turns in `error`: turns whose lease expired (their worker died) every
 * pass, and, every few passes, running turns holding no lease whose job is gone, finished, failed
 * (e.g. failed as stalled) or active without a lease and without a live job lock. Runs in every
 * worker; claims are atomic and endings compare-and-set, so several reapers never double-end a turn.
 */
export class TurnReaper {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<unknown> | null = null;
  private passes = 0;
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

  /** Starts periodic passes. */
  start(): void {
    this.timer = setInterval(() => {
      if (this.running) return;
      this.running = this.runPass().finally(() => {
        this.running = null;
      });
    }, this.options.intervalMs);
    this.timer.unref();
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
    let ended = 0;
    // Held after an outage (see leasesTrustedFrom): a live worker's lease may not be renewed yet.
    // The ping tells runPass whether Redis answers again.
    if (this.clock() < this.leasesTrustedFrom) {
      await this.options.redis.ping();
      return ended;
    }
    for (;;) {
      const orphans = await claimExpiredLeases(this.options.redis, this.options.prefix);
      for (const orphan of orphans) if (await this.endOrphan(orphan)) ended++;
      if (orphans.length === 0) break;
    }
    const lostJobEvery = Math.max(1, Math.round(this.options.leaseTtlMs / this.options.intervalMs / 2));
    if (this.passes++ % lostJobEvery === 0) ended += await this.endLostJobs();
    return ended;
  }

  private async endOrphan(orphan: OrphanedTurn): Promise<boolean> {
    const job = parseJob(orphan.jobJson);
    return this.end(orphan.sessionId, orphan.turnId, WORKER_LOST_ERROR, job, true);
  }

  private async endLostJobs(): Promise<number> {
    const cutoff = this.clock() - this.options.leaseTtlMs;
    const suspects = (await this.options.store.listRunningTurns())
      .filter((turn) => turn.startedAt <= cutoff)
      .sort((a, b) => a.startedAt - b.startedAt)
      .slice(0, LOST_JOB_BATCH);
    let ended = 0;
    for (const turn of suspects) {
      if (await hasTurnLease(this.options.redis, this.options.prefix, turn.sessionId, turn.turnId)) continue;
      const state = await this.options.queue.getJobState(turn.turnId);
      if (QUEUED_STATES.has(state)) continue;
      // Active without a lease: fetched ahead and waiting for an agent process, or its worker died
      // before leasing the turn. The job lock (renewed by a live worker) tells the two apart.
      if (
        state === 'active' &&
        (await this.options.redis.exists(`${this.options.queue.toKey(turn.turnId)}:lock`)) === 1
      ) {
        continue;
      }
      if (await hasTurnLease(this.options.redis, this.options.prefix, turn.sessionId, turn.turnId)) continue;
      const job = state === 'unknown' ? undefined : await Job.fromId(this.options.queue, turn.turnId);
      const error = state === 'active' ? WORKER_LOST_ERROR : JOB_LOST_ERROR;
      if (await this.end(turn.sessionId, turn.turnId, error, parseJob(job ? JSON.stringify(job.data) : null))) ended++;
    }
    return ended;
  }

  private async end(
    sessionId: string,
    turnId: string,
    error: string,
    job: AgentTurnJob | null,
    leaseClaimed = false,
  ): Promise<boolean> {
    const result = await this.options.store.finishTurn(sessionId, turnId, { kind: 'error', error }, 'reaper');
    if (result !== 'applied') {
      // The session was deleted while its worker was gone: the deletion cancelled the turn, and
      // this reaper, holding the lease it claimed, is the one to say so (a worker reports a
      // cancellation only while it still holds the turn's lease).
      if (leaseClaimed && job && !(await this.options.store.exists(sessionId))) {
        this.options.logger.info("reaped a deleted session's turn", { session_id: sessionId, turn_id: turnId });
        this.options.notifier.notify(job, {
          sessionId,
          end: { kind: 'error', error: TURN_CANCELLED_ERROR },
          history: null,
          durationMs: Math.max(0, this.clock() - job.accepted_at),
          totalTokens: 0,
        });
      }
      return false;
    }
    this.options.onRecovered?.();
    this.options.logger.warn('reaped an orphaned turn', { session_id: sessionId, turn_id: turnId, error });
    if (job) {
      const history = job.message.webhook?.include_messages
        ? await this.options.store.messages(sessionId, job.org_id)
        : null;
      const durationMs = Math.max(0, this.clock() - job.accepted_at);
      this.options.notifier.notify(job, {
        sessionId,
        end: { kind: 'error', error },
        history,
        durationMs,
        totalTokens: 0,
      });
    }
    return true;
  }
}

function parseJob(json: string | null): AgentTurnJob | null {
  if (json === null) return null;
  try {
    const parsed = AgentTurnJob.safeParse(JSON.parse(json));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}
