import {
  createLogger,
  createRedis,
  installShutdown,
  logUnhandledRejections,
  listen,
  closeServer,
} from '@tollway/service-kit';
import { startMetricsServer, startTracing, tracingConfigured } from '@tollway/telemetry';
import { wireAccounts } from './admission/accounts-wiring';
import { buildApp } from './app';
import { CatalogStore, followCatalogChanges } from './catalog/catalog-store';
import { loadGatewayConfig } from './config';
import { engineContextOf, EngineRegistry } from './engines';
import { buildGatewayTelemetry } from './observability/gateway-telemetry';
import { PromptTokenCounter } from './tokenizer/count-tokens';

async function main(): Promise<void> {
  const config = loadGatewayConfig();
  // Before anything else, so the SDK is in place when the first request arrives.
  const tracing = await startTracing({ serviceName: 'inference-gateway', enabled: tracingConfigured(config) });
  const logger = createLogger({ service: 'inference-gateway', level: config.logLevel });
  logUnhandledRejections(logger);
  const catalog = CatalogStore.fromFile(config.catalogPath);
  const engines = new EngineRegistry(engineContextOf(config));
  catalog.subscribe((models) => engines.sync(models));
  followCatalogChanges(catalog, logger, config.catalogWatch);
  const redis = createRedis(config.redisUrl, { name: 'gateway', failFast: true });
  const accounts = await wireAccounts(config, redis, logger, { catalog, engines });
  const { authenticator, admission, adminRouter, consoleRouter, openApi, admissionStats } = accounts;
  const promptTokens = new PromptTokenCounter(config.promptTokenCacheEntries);
  const telemetry = buildGatewayTelemetry({
    ...{ config, logger, catalog, engines, admissionStats },
    promptTokenStats: () => promptTokens.stats(),
    tracer: tracing?.tracer,
  });

  const app = buildApp({
    ...{ config, logger, catalog, engines, authenticator, admission, redis, adminRouter, consoleRouter, openApi },
    ...{ telemetry, promptTokens },
  });
  const metricsServer =
    telemetry.metrics && config.metricsPort !== undefined
      ? await startMetricsServer(telemetry.metrics.registry, config.metricsPort, config.metricsHost)
      : null;
  // Connection limits and timeouts come from the config (see buildApp / createHttpServer).
  const server = await listen(app, config.port, config.host);
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  logger.info('gateway listening', {
    port,
    host: config.host,
    models: catalog.all().length,
    metrics: telemetry.metrics ? (metricsServer ? metricsServer.address() : '/metrics') : 'off',
    tracing: tracing !== null,
  });
  installShutdown(logger, [
    { name: 'http', run: () => closeServer(server) },
    { name: 'metrics', run: () => (metricsServer ? closeServer(metricsServer) : undefined) },
    { name: 'catalog', run: () => catalog.close() },
    { name: 'engines', run: () => engines.close() },
    { name: 'accounts', run: () => accounts.close() },
    { name: 'redis', run: () => redis.quit() },
    { name: 'tracing', run: () => tracing?.shutdown() },
  ]);
}

main().catch((err: unknown) => {
  process.stderr.write(`inference-gateway failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
