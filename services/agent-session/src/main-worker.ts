import { closeServer, createLogger, installShutdown, logUnhandledRejections } from '@tollway/service-kit';
import { createMetricsRegistry, startMetricsServer, startTracing, tracingConfigured } from '@tollway/telemetry';
import { countScriptCalls, WorkerMetrics } from './observability/session-metrics';
import { startWorker } from './worker/start-worker';
import { loadWorkerConfig } from './worker-config';

/**
 * Entry point of a worker process (`pnpm --filter @tollway/agent-session worker`). It serves no
 * HTTP but its metrics and a liveness check (`/healthz`), on METRICS_PORT when set: the check
 * is served there with metrics turned off too, since orchestrators probe it.
 */
async function main(): Promise<void> {
  const config = loadWorkerConfig();
  const tracing = await startTracing({ serviceName: 'agent-session-worker', enabled: tracingConfigured(config) });
  const logger = createLogger({ service: 'agent-session-worker', level: config.logLevel });
  logUnhandledRejections(logger);
  const registry = config.metricsEnabled ? createMetricsRegistry('agent-session-worker') : null;
  const metrics = registry ? new WorkerMetrics(registry) : null;
  // The store's and the worker registry's Lua scripts, by script name.
  if (registry) countScriptCalls(registry);
  const worker = await startWorker(config, { logger, metrics, tracer: tracing?.tracer });
  const metricsServer =
    config.metricsPort !== undefined
      ? await startMetricsServer(registry, config.metricsPort, config.metricsHost)
      : null;
  if (metricsServer) logger.info('worker metrics listening', { address: metricsServer.address() });
  installShutdown(logger, [
    { name: 'worker', run: () => worker.close() },
    { name: 'metrics', run: () => (metricsServer ? closeServer(metricsServer) : undefined) },
    { name: 'tracing', run: () => tracing?.shutdown() },
  ]);
}

main().catch((err: unknown) => {
  process.stderr.write(`agent-session worker failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
