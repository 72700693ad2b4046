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

/**
 * A worker's loop over the fair turn scheduler: keeps up to `concurrency` turns running. It claims
 * as many turns as it has free slots; a turn that ends claims its successor in the same step; with
 * nothing to claim it waits on the wake token that a newly ready organization leaves. Nothing is
 * fetched ahead: a turn is claimed only for a free agent process, so an organization's turns never
 * sit on a worker while another organization's wait.
 */
export class TurnDispatcher {
  private running = 0;
  private stopping = false;
  private loop: Promise<void> | null = null;
  private slotFreed: (() => void) | null = null;
  private readonly turns = new Set<Promise<void>>();

  constructor(private readonly options: TurnDispatcherOptions) {}

  /** Starts claiming turns. */
  start(): void {
    this.loop ??= this.run();
  }

  /** Stops claiming; resolves once the loop has left (turns under way go on: see `drained`). */
  async stop(): Promise<void> {
    this.stopping = true;
    this.slotFreed?.();
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
      if (free <= 0) {
        await new Promise<void>((resolve) => (this.slotFreed = resolve));
        this.slotFreed = null;
        continue;
      }
      let claimed: ClaimedTurn[];
      try {
        claimed = await this.options.scheduler.claim(free, this.options.leaseTtlMs, true);
        failures = 0;
      } catch (err) {
        if (this.stopping) break;
        if (failures++ === 0)
          this.options.logger.warn('claiming turns failed; trying again', { err: (err as Error).message });
        await sleep(CLAIM_RETRY_DELAYS_MS[Math.min(failures - 1, CLAIM_RETRY_DELAYS_MS.length - 1)] as number);
        continue;
      }
      for (const turn of claimed) this.launch(turn);
      if (claimed.length < free && !this.stopping) {
        // Nothing more to dispatch now: wait for an organization to become ready (or a while).
        await this.options.scheduler.waitForWork(this.options.blocking).catch(() => sleep(100));
      }
    }
  }

  /** Runs a claimed turn in its slot; the turn's end may claim successors, which take the slot over. */
  private launch(turn: ClaimedTurn): void {
    this.running++;
    const claimNext = () => (this.stopping ? 0 : 1);
    const done = this.options
      .process(turn, claimNext)
      .then(
        (next) => {
          for (const successor of next) this.launch(successor);
        },
        (err: unknown) => {
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
        this.slotFreed?.();
      });
    this.turns.add(done);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
