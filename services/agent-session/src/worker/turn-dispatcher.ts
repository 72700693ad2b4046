import type { Redis } from 'ioredis';
import type { Logger } from '@tollway/service-kit';
import type { ClaimedTurn, TurnScheduler } from '../store/turn-scheduler';
import type { AgentTurnProcessor } from './agent-turn.processor';

/** Waits after a failed claim before the next, ms (the last one repeats): Redis may be away. */
const CLAIM_RETRY_DELAYS_MS = [100, 250, 500, 1000, 2000];

/** Options of TurnDispatcher. */
export interface TurnDispatcherOptions {
  scheduler: TurnScheduler;
  /** A connection of its own for the blocking wait on the wake token. */
  blocking: Redis;
  /** Turns run at once (the agent processes). */
  concurrency: number;
  leaseTtlMs: number;
  process: AgentTurnProcessor;
  logger: Logger;
}

/** How the wait on the wake token ended. */
type WaitEnd = 'woken' | 'timeout' | 'failed';

/**
 * A worker's loop over the fair turn scheduler: keeps up to `concurrency` turns running. It claims
 * as many turns as it has free slots; a turn that ends claims its successor in the same step; with
 * nothing to claim it waits on the wake token that a newly ready organization leaves. Nothing is
 * fetched ahead: a turn is claimed only for a free agent process, so an organization's turns never
 * sit on a worker while another organization's wait.
 *
 * What it costs Redis: a claim after a wake goes on the waiting connection with the next wait in
 * the same write (one read of Redis for both) when it leaves slots free; a slot freed by a turn
 * whose end looked for a successor and found none is not claimed for again (the queue was empty
 * then, and whatever arrives since leaves a token), so it only needs the wait to be armed.
 */
export class TurnDispatcher {
  private running = 0;
  private stopping = false;
  private loop: Promise<void> | null = null;
  /** Wakes the loop: a slot freed, or stop. */
  private kick: (() => void) | null = null;
  /** A claim is due: at the start, after a token or the wait's timeout, or for a slot whose turn did not look for a successor. */
  private claimDue = true;
  /** The wait on the wake token in progress (it holds the blocking connection), if any. */
  private waiting: Promise<WaitEnd> | null = null;
  private readonly turns = new Set<Promise<void>>();

  constructor(private readonly options: TurnDispatcherOptions) {}

  /** Starts claiming turns. */
  start(): void {
    this.loop ??= this.run();
  }

  /** Stops claiming; resolves once the loop has left (turns under way go on: see `drained`). */
  async stop(): Promise<void> {
    this.stopping = true;
    this.kick?.();
    // A blocking wait in progress ends with its connection.
    this.options.blocking.disconnect();
    await this.loop;
  }

  /** Resolves when every turn under way has ended. */
  async drained(): Promise<void> {
    while (this.turns.size > 0) await Promise.allSettled([...this.turns]);
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      const free = this.options.concurrency - this.running;
      if (free > 0 && this.claimDue) {
        this.claimDue = false;
        let claimed: ClaimedTurn[];
        try {
          claimed = await this.claim(free);
          failures = 0;
        } catch (err) {
          if (this.stopping) break;
          this.claimDue = true;
          if (failures++ === 0)
            this.options.logger.warn('claiming turns failed; trying again', { err: (err as Error).message });
          await sleep(CLAIM_RETRY_DELAYS_MS[Math.min(failures - 1, CLAIM_RETRY_DELAYS_MS.length - 1)] as number);
          continue;
        }
        for (const turn of claimed) this.launch(turn);
        if (this.stopping) break;
      }
      // A slot freed during the claim by a turn that did not look for a successor: claim for it now.
      if (this.claimDue && this.options.concurrency - this.running > 0) continue;
      // Nothing more to claim now: wait for a token while slots are free, and for a slot to free.
      if (this.options.concurrency - this.running > 0) this.waiting ??= this.waitForWork();
      const kicked = new Promise<'kicked'>((resolve) => (this.kick = () => resolve('kicked')));
      const outcome = await (this.waiting ? Promise.race([this.waiting, kicked]) : kicked);
      this.kick = null;
      if (outcome === 'kicked' || this.stopping) continue;
      this.waiting = null;
      if (outcome === 'failed') await sleep(100);
      if (outcome === 'woken' && this.options.concurrency - this.running <= 0) {
        // Every slot filled since the wait began (their successors): the token is another worker's.
        await this.options.scheduler.wake().catch(() => undefined);
      }
      this.claimDue = true;
    }
  }

  /**
   * Claims up to `free` turns. With the blocking connection free and slots likely to stay free,
   * the claim goes there with the next wait behind it in the same write: Redis reads both at once,
   * runs the claim, and the wait catches any token left after it.
   */
  private claim(free: number): Promise<ClaimedTurn[]> {
    const { scheduler, blocking, leaseTtlMs } = this.options;
    if (this.waiting || free < 2) return scheduler.claim(free, leaseTtlMs, true);
    const { claimed, woken } = scheduler.claimThenWait(blocking, free, leaseTtlMs);
    this.waiting = settleWait(woken);
    return claimed;
  }

  private waitForWork(): Promise<WaitEnd> {
    return settleWait(this.options.scheduler.waitForWork(this.options.blocking));
  }

  /** Runs a claimed turn in its slot; the turn's end may claim successors, which take the slot over. */
  private launch(turn: ClaimedTurn): void {
    this.running++;
    // Whether the turn's end looked for a successor: if it found none, the queue was empty then.
    let looked = false;
    const claimNext = () => {
      if (this.stopping) return 0;
      looked = true;
      return 1;
    };
    const done = this.options
      .process(turn, claimNext)
      .then(
        (next) => {
          for (const successor of next) this.launch(successor);
          if (!looked) this.claimDue = true;
        },
        (err: unknown) => {
          this.claimDue = true;
          this.options.logger.error('turn processing failed', {
            session_id: turn.sessionId,
            turn_id: turn.turnId,
            err: err instanceof Error ? err.message : String(err),
          });
        },
      )
      .finally(() => {
        this.running--;
        this.turns.delete(done);
        this.kick?.();
      });
    this.turns.add(done);
  }
}

function settleWait(woken: Promise<boolean>): Promise<WaitEnd> {
  return woken.then(
    (took): WaitEnd => (took ? 'woken' : 'timeout'),
    (): WaitEnd => 'failed',
  );
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
