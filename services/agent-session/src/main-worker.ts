import { createLogger, installShutdown, logUnhandledRejections } from '@tollway/service-kit';
import { startWorker } from './worker/start-worker';
import { loadWorkerConfig } from './worker-config';

/** Entry point of a worker process (`pnpm --filter @tollway/agent-session worker`). */
async function main(): Promise<void> {
  const config = loadWorkerConfig();
  const logger = createLogger({ service: 'agent-session-worker', level: config.logLevel });
  logUnhandledRejections(logger);
  const worker = await startWorker(config, { logger });
  installShutdown(logger, [{ name: 'worker', run: () => worker.close() }]);
}

main().catch((err: unknown) => {
  process.stderr.write(`agent-session worker failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
