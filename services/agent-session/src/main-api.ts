import { createAccountStore, createKeyAuthenticator } from '@tollway/accounts';
import {
  AccessLog,
  closeServer,
  createHttpServer,
  createLogger,
  createRedis,
  installShutdown,
  logUnhandledRejections,
  listenServer,
  redisConnectionOf,
  replicaWaitOf,
} from '@tollway/service-kit';
import { buildApp } from './app';
import { loadApiConfig } from './config';
import { SessionEventHub } from './store/session-event-hub';
import { SessionStore } from './store/session-store';
import { EventReaderHub } from './streaming/event-reader-hub';
import { startSessionSweeper } from './store/session-sweeper';
import { startOrganizationPurge } from './store/organization-purge';
import { endTurnsLostInUpgrade } from './store/legacy-upgrade';
import { OrganizationLimits } from './store/organization-limits';
import { TurnScheduler } from './store/turn-scheduler';
import { createTurnNotifier, startTurnReaper } from './worker/start-reaper';
import { startWorker } from './worker/start-worker';
import { readWorkerStats } from './worker/worker-registry';
import { loadWorkerConfig } from './worker-config';
import { countScriptCalls, registerApiMetrics, WorkerMetrics } from './observability/session-metrics';
import { createMetricsRegistry, startMetricsServer, startTracing, tracingConfigured } from '@tollway/telemetry';

/**
 * How often every organization holding sessions is checked for deletion (a deletion's message,
 * which purges at once, may be lost while the subscriber reconnects): five minutes.
 */
const DELETED_ORGANIZATIONS_RECONCILE_MS = 5 * 60_000;

/** Pending connections the kernel may queue (capped by net.core.somaxconn); Node's default is 511. */
const LISTEN_BACKLOG = 4096;

async function main(): Promise<void> {
  const config = loadApiConfig();
  const tracing = await startTracing({ serviceName: 'agent-session-api', enabled: tracingConfigured(config) });
  const logger = createLogger({ service: 'agent-session-api', level: config.logLevel });
  logUnhandledRejections(logger);
  const redis = createRedis(config, { name: 'agent-session:api', logger, failFast: true });
  // One subscriber connection per process serves every long-poll, the key-revocation channel and
  // the organization-change channel (the purge of deleted organizations' sessions).
  const subscriber = createRedis(config, { name: 'agent-session:events', logger, maxRetriesPerRequest: null });
  // The session event streams' one blocking read (XREAD BLOCK holds its connection). A read the
  // connection lost is not sent again: the hub reads again, from its own cursors.
  const eventReader = createRedis(config, {
    name: 'agent-session:event-reader',
    logger,
    maxRetriesPerRequest: null,
    extra: { autoResendUnfulfilledCommands: false, enableAutoPipelining: false },
  });

  const eventLog = { maxEntries: config.eventLogMaxEntries, retentionMs: config.eventLogRetentionMs };
  // Sends wait for the replicas to hold their turn (REDIS_WAIT_REPLICAS) on a connection of their
  // own: WAIT holds its connection, and nothing else should wait behind it.
  const replicaWait = replicaWaitOf(config);
  const sendsConnection = replicaWait
    ? createRedis(config, { name: 'agent-session:sends', logger, failFast: true })
    : null;
  const store = new SessionStore({
    redis,
    prefix: config.redisPrefix,
    eventLog,
    ...(sendsConnection && replicaWait ? { durableSends: { redis: sendsConnection, wait: replicaWait } } : {}),
  });
  // Sessions an earlier build left running on a queue this one does not read; in the background,
  // tried again while Redis does not answer, so a start with Redis away still serves (503s).
  const upgrade = () =>
    endTurnsLostInUpgrade(redis, store, config.redisPrefix, logger).catch(() => {
      setTimeout(upgrade, 5000).unref();
    });
  void upgrade();
  const hub = new SessionEventHub(subscriber, config.redisPrefix, { redis });
  await hub.start();
  const events = new EventReaderHub({
    redis,
    reader: eventReader,
    prefix: config.redisPrefix,
    logger,
    heartbeatMs: config.eventsHeartbeatMs,
    clientBufferBytes: config.eventsReaderBufferBytes,
    maxStreamsPerOrg: config.eventsMaxStreamsPerOrg,
  });
  events.start();
  const authenticator = config.authEnabled
    ? createKeyAuthenticator({ redis, subscriber, prefix: config.redisPrefix })
    : null;
  await authenticator?.ready();
  if (!authenticator) logger.warn('authentication is off (--no-auth): every caller shares the org-less sessions');
  const limits = new OrganizationLimits({
    redis,
    prefix: config.redisPrefix,
    subscriber: authenticator ? subscriber : undefined,
    defaults: {
      maxSessions: config.orgMaxSessions,
      maxRunningTurns: config.orgMaxRunningTurns,
      maxWaitingTurns: config.orgMaxWaitingTurns,
      weight: config.orgTurnWeight,
    },
  });
  await limits.start();
  const scheduler = new TurnScheduler(redis, config.redisPrefix, undefined, eventLog);
  // Quickstart: one worker in this process, configured from the same environment (the API's flags
  // are not the worker's, so only the shared Redis and log settings are carried over from them).
  const workerConfig = {
    ...loadWorkerConfig({ argv: [] }),
    ...redisConnectionOf(config),
    redisPrefix: config.redisPrefix,
    logLevel: config.logLevel,
  };
  const registry = config.metricsEnabled ? createMetricsRegistry('agent-session-api') : null;
  const workerMetrics = registry ? new WorkerMetrics(registry) : null;
  // Deleting a session whose turn still waits cancels it here: its callback is sent by this process.
  const notifier = createTurnNotifier(workerConfig, logger, workerMetrics);
  const sweeper =
    config.ttlSeconds > 0 ? startSessionSweeper(store, config.ttlSeconds * 1000, config.sweepIntervalMs, logger) : null;
  // Sessions belong to organizations only with auth; a deleted organization's go with it.
  const purge = authenticator
    ? await startOrganizationPurge({
        store,
        accounts: createAccountStore({ redis, prefix: config.redisPrefix }),
        subscriber,
        prefix: config.redisPrefix,
        reconcileIntervalMs: DELETED_ORGANIZATIONS_RECONCILE_MS,
        logger,
        notifier,
      })
    : null;

  if (registry) {
    // The store's, the registry's and the key authenticator's Lua scripts, by script name.
    countScriptCalls(registry);
    registerApiMetrics(registry, {
      sessionsByStatus: () => store.countByStatus(),
      queueCounts: () => scheduler.counts(),
      workerStats: () => readWorkerStats(redis, config.redisPrefix),
      longPollWaiters: () => hub.size,
      eventStreams: () => events.size,
    });
  }
  const app = buildApp({
    metricsRegistry: config.metricsPort === undefined ? registry : null,
    tracer: tracing?.tracer ?? null,
    // Access lines are info records: a LOG_LEVEL above info turns them off, as it would winston's.
    accessLog: logger.isInfoEnabled() ? new AccessLog({ service: 'agent-session-api' }) : null,
    redis,
    store,
    hub,
    events,
    limits,
    notifier,
    authenticator,
    workerStats: () => readWorkerStats(redis, config.redisPrefix),
    logger,
    maxSessions: config.maxSessions,
    allowCustomIds: config.allowCustomIds,
    maxBodyBytes: config.maxBodyBytes,
    maxHistoryBytes: config.maxHistoryBytes,
    maxJsonDepth: config.maxJsonDepth,
    httpLimits: config,
  });
  const worker = config.embeddedWorker
    ? await startWorker(workerConfig, { logger, metrics: workerMetrics, tracer: tracing?.tracer })
    : null;
  // Without a worker of its own the API still reaps: if the only worker dies, its turns end in
  // `error` within seconds instead of staying `running` until some worker starts again.
  const reaper = worker
    ? null
    : startTurnReaper(workerConfig, { redis, store, logger, notifier, metrics: workerMetrics });
  const metricsServer =
    registry && config.metricsPort !== undefined
      ? await startMetricsServer(registry, config.metricsPort, config.metricsHost, config)
      : null;
  // A deep backlog: thousands of long-poll clients connecting at once would otherwise overflow the
  // accept queue, and each dropped SYN costs its client a retransmission of a second or more.
  const server = await listenServer(
    createHttpServer(app, config, { logger }),
    config.port,
    config.host,
    LISTEN_BACKLOG,
  );
  logger.info('agent session API listening', {
    port: config.port,
    ttl_seconds: config.ttlSeconds,
    max_sessions: config.maxSessions,
    allow_custom_ids: config.allowCustomIds,
    auth: config.authEnabled,
    embedded_worker: worker?.workerId ?? null,
    metrics: registry ? (metricsServer ? metricsServer.address() : '/metrics') : 'off',
    tracing: tracing !== null,
  });

  installShutdown(logger, [
    {
      name: 'http',
      run: () => {
        const closed = closeServer(server);
        hub.close();
        void events.close();
        return closed;
      },
    },
    { name: 'metrics', run: () => (metricsServer ? closeServer(metricsServer) : undefined) },
    { name: 'embedded worker', run: () => worker?.close() },
    { name: 'reaper', run: () => reaper?.stop() },
    { name: 'sweeper', run: () => sweeper?.stop() },
    { name: 'organization purge', run: () => purge?.stop() },
    { name: 'webhooks', run: () => notifier.drain() },
    { name: 'auth', run: () => authenticator?.close() },
    { name: 'limits', run: () => limits.close() },
    {
      name: 'redis',
      run: () => Promise.all([redis.quit(), subscriber.quit(), eventReader.quit(), sendsConnection?.quit()]),
    },
    { name: 'tracing', run: () => tracing?.shutdown() },
  ]);
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
