import {
  createLogger,
  createRedis,
  installShutdown,
  logUnhandledRejections,
  listen,
  closeServer,
} from '@tollway/service-kit';
import { wireAccounts } from './admission/accounts-wiring';
import { buildApp } from './app';
import { CatalogStore, followCatalogChanges } from './catalog/catalog-store';
import { loadGatewayConfig } from './config';
import { engineContextOf, EngineRegistry } from './engines';

async function main(): Promise<void> {
  const config = loadGatewayConfig();
  const logger = createLogger({ service: 'inference-gateway', level: config.logLevel });
  logUnhandledRejections(logger);
  const catalog = CatalogStore.fromFile(config.catalogPath);
  const engines = new EngineRegistry(engineContextOf(config));
  catalog.subscribe((models) => engines.sync(models));
  followCatalogChanges(catalog, logger, config.catalogWatch);
  const redis = createRedis(config.redisUrl, { name: 'gateway' });
  const accounts = await wireAccounts(config, redis, logger);
  const { authenticator, admission, adminRouter, openApi } = accounts;

  const app = buildApp({ config, logger, catalog, engines, authenticator, admission, redis, adminRouter, openApi });
  // Connection limits and timeouts come from the config (see buildApp / createHttpServer).
  const server = await listen(app, config.port, config.host);
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
