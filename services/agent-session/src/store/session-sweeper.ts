import type { Logger } from '@tollway/service-kit';
import type { SessionStore } from './session-store';

/** A running TTL sweeper; `stop()` waits for a sweep in progress. */
export interface SessionSweeper {
  stop(): Promise<void>;
}

/**
 * Every `intervalMs`, removes idle and errored sessions inactive for `ttlMs` (an atomic Lua
 * check-and-delete per session, so replicas may sweep concurrently and running sessions are
 * never touched). A failed sweep is logged and retried at the next tick.
 */
export function startSessionSweeper(
  store: SessionStore,
  ttlMs: number,
  intervalMs: number,
  logger: Logger,
): SessionSweeper {
  let current: Promise<void> = Promise.resolve();
  let sweeping = false;
  const timer = setInterval(() => {
    if (sweeping) return;
    sweeping = true;
    current = store
      .sweepExpired(ttlMs)
      .then((removed) => {
        if (removed > 0) logger.info('swept expired sessions', { removed });
      })
      .catch((err: unknown) => {
        logger.warn('session sweep failed', { err: (err as Error).message });
      })
      .finally(() => {
        sweeping = false;
      });
  }, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await current;
    },
  };
}
