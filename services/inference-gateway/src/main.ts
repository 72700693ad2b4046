import { createLogger, createRedis, installShutdown, listen, closeServer } from '@tollway/service-kit';
import { wireAccounts } from './admission/accounts-wiring';
import { buildApp } from './app';
import { CatalogStore, followCatalogChanges } from './catalog/catalog-store';
import { loadGatewayConfig } from './config';
import { EngineRegistry } from './engines';

async function main(): Promise<void> {
  const config = loadGatewayConfig();
  const logger = createLogger({ service: 'inference-gateway', level: config.logLevel });
  const catalog = CatalogStore.fromFile(config.catalogPath);
  const engines = new EngineRegistry({ connections: config.upstreamConnections, timeoutMs: config.upstreamTimeoutMs });
  catalog.subscribe((models) => engines.sync(models));
  followCatalogChanges(catalog, logger, config.catalogWatch);
  const redis = createRedis(config.redisUrl, { name: 'gateway' });
  const accounts = await wireAccounts(config, redis, logger, { catalog, engines });
  const { authenticator, admission, adminRouter, consoleRouter, openApi } = accounts;

  const app = buildApp({
    config,
    logger,
    catalog,
    engines,
    authenticator,
    admission,
    redis,
    adminRouter,
    consoleRouter,
    openApi,
  });
  const server = await listen(app, config.port, config.host);
  // Longer than the usual load balancer idle timeout (60 s), so the balancer closes first.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  logger.info('gateway listening', { port, host: config.host, models: catalog.all().length });
  installShutdown(logger, [
    { name: 'http', run: () => closeServer(server) },
    { name: 'catalog', run: () => catalog.close() },
    { name: 'engines', run: () => engines.close() },
    { name: 'accounts', run: () => accounts.close() },
    { name: 'redis', run: () => redis.quit() },
  ]);
}

main().catch((err: unknown) => {
  process.stderr.write(`inference-gateway failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
