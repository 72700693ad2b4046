import type { Logger } from './logger';

/** One step of an orderly shutdown, run in registration order. */
export interface ShutdownStep {
  name: string;
  run: () => Promise<unknown> | unknown;
}

/**
 * Runs `steps` once on SIGTERM or SIGINT, then exits 0; a step that fails is logged and the
 * rest still run. If they take longer than `graceMs` (default 10 000) the process exits 1.
 * Returns the function that runs the steps, for tests and for embedding processes.
 */
export function installShutdown(logger: Logger, steps: ShutdownStep[], graceMs = 10_000): () => Promise<void> {
  let running: Promise<void> | null = null;
  const shutdown = (): Promise<void> => {
    running ??= (async () => {
      for (const step of steps) {
        try {
          await step.run();
        } catch (err) {
          logger.error('shutdown step failed', {
            step: step.name,
            err: err instanceof Error ? err.message : String(err),
          });
        }
      }
    })();
    return running;
  };
  const onSignal = (signal: NodeJS.Signals) => {
    logger.info('shutting down', { signal });
    const timer = setTimeout(() => {
      logger.error('shutdown took too long; exiting', { grace_ms: graceMs });
      process.exit(1);
    }, graceMs);
    timer.unref();
    void shutdown().then(() => process.exit(0));
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  return shutdown;
}

/**
 * Last line of defence for paths that run outside a request (timers, pub/sub handlers, deliveries):
 * a promise rejection nobody handled is logged and the process keeps serving, instead of Node's
 * default of exiting, which would end every other request and turn on it. Each such path still
 * catches its own errors; this only keeps a missed one from taking the process down. Thrown
 * exceptions (`uncaughtException`) keep Node's default: the process state may be broken.
 */
export function logUnhandledRejections(logger: Logger): void {
  process.on('unhandledRejection', (reason: unknown) => {
    logger.error('unhandled promise rejection', {
      err:
        reason instanceof Error ? { name: reason.name, message: reason.message, stack: reason.stack } : String(reason),
    });
  });
}
