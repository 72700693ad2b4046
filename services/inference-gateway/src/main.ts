import type { Server } from 'node:http';
import {
  createLogger,
  type Logger,
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
import { PrefixIndexShare } from './engines/openai-compatible/prefix-index-share';
import { buildGatewayTelemetry } from './observability/gateway-telemetry';
import { LiveRelays } from './streaming/live-relays';
import { PromptTokenCounter } from './tokenizer/count-tokens';

/** Longest the start waits for the prefix index share's subscription before listening, ms. */
const SHARE_SUBSCRIBE_WAIT_MS = 5000;

async function main(): Promise<void> {
  const config = loadGatewayConfig();
  // Before anything else, so the SDK is in place when the first request arrives.
  const tracing = await startTracing({ serviceName: 'inference-gateway', enabled: tracingConfigured(config) });
  const logger = createLogger({ service: 'inference-gateway', level: config.logLevel });
  logUnhandledRejections(logger);
  const catalog = CatalogStore.fromFile(config.catalogPath);
  const redis = createRedis(config, { name: 'gateway', logger, failFast: true });
  // prefix_cache routing's index, shared with the other gateway replicas (a hint: never awaited).
  const indexShare = new PrefixIndexShare(
    redis,
    redis.duplicate({ connectionName: 'gateway-routing-index' }),
    `${config.redisPrefix}routing:prefix-index`,
    logger,
  );
  const shareSubscribed = indexShare.start().catch((err: Error) => {
    logger.warn('prefix index share: subscribe failed', { error: err.message });
  });
  const engines = new EngineRegistry({ ...engineContextOf(config), indexShare });
  catalog.subscribe((models) => engines.sync(models));
  followCatalogChanges(catalog, logger, config.catalogWatch);
  const accounts = await wireAccounts(config, redis, logger, { catalog, engines });
  const { authenticator, admission, adminRouter, consoleRouter, openApi, admissionStats } = accounts;
  const promptTokens = new PromptTokenCounter(config.promptTokenCacheEntries);
  const telemetry = buildGatewayTelemetry({
    ...{ config, logger, catalog, engines, admissionStats },
    promptTokenStats: () => promptTokens.stats(),
    tracer: tracing?.tracer,
  });

  const liveRelays = new LiveRelays();
  const app = buildApp({
    ...{ config, logger, catalog, engines, authenticator, admission, redis, adminRouter, consoleRouter, openApi },
    ...{ telemetry, promptTokens, liveRelays },
  });
  const metricsServer =
    telemetry.metrics && config.metricsPort !== undefined
      ? await startMetricsServer(telemetry.metrics.registry, config.metricsPort, config.metricsHost, config)
      : null;
  // Connection limits and timeouts come from the config (see buildApp / createHttpServer).
  // Listening once subscribed, so a replica that answers also hears the others' records from its
  // first request on (the share is a hint: a Redis that is slow to answer holds the start SHARE_SUBSCRIBE_WAIT_MS at most).
  await Promise.race([shareSubscribed, new Promise((resolve) => setTimeout(resolve, SHARE_SUBSCRIBE_WAIT_MS).unref())]);
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
  const grace = config.shutdownGraceMs;
  installShutdown(
    logger,
    [
      // Settlement, Redis and tracing get the last 5 s (at least half the grace) to flush.
      { name: 'http', run: () => drainServer(server, liveRelays, grace, logger) },
      { name: 'metrics', run: () => (metricsServer ? closeServer(metricsServer) : undefined) },
      // Before the engines: their pools wait for requests still running (a long JSON completion),
      // and what the drained requests settled must reach Redis first.
      { name: 'accounts', run: () => accounts.close() },
      { name: 'catalog', run: () => catalog.close() },
      { name: 'engines', run: () => engines.close() },
      { name: 'routing index share', run: () => indexShare.close() },
      { name: 'redis', run: () => redis.quit() },
      { name: 'tracing', run: () => tracing?.shutdown() },
    ],
    grace,
  );
}

/**
 * Stops accepting connections and waits for the requests in flight until 5 s before the end of
 * `graceMs` (at least half of it); then ends the streams still relayed (each with its shutdown
 * event, what it relayed settled), closes each connection as its answer ends, and after half of
 * the time left closes what remains, so settlement, Redis and tracing still get their time.
 */
async function drainServer(server: Server, relays: LiveRelays, graceMs: number, logger: Logger): Promise<void> {
  const drainMs = Math.max(graceMs - 5000, graceMs / 2);
  const closed = closeServer(server);
  if (await finishesWithin(closed, drainMs)) return;
  logger.warn('drain time is up: ending the streams still open', { streams: relays.size, drain_ms: drainMs });
  relays.stopAll();
  const sweep = setInterval(() => server.closeIdleConnections(), 25);
  try {
    if (await finishesWithin(closed, (graceMs - drainMs) / 2)) return;
  } finally {
    clearInterval(sweep);
  }
  server.closeAllConnections();
  await closed;
}

/** True when `promise` settles within `ms`. */
async function finishesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeUp = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), timeUp]);
  } finally {
    clearTimeout(timer);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`inference-gateway failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
