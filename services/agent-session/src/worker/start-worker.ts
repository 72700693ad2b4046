import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { isWellFormedApiKey } from '@tollway/accounts';
import { createLogger, createRedis, type Logger } from '@tollway/service-kit';
import { SessionStore } from '../store/session-store';
import { TurnEventStreams } from '../streaming/turn-event-stream';
import { TurnScheduler } from '../store/turn-scheduler';
import type { WorkerConfig } from '../worker-config';
import { createAgentTurnProcessor } from './agent-turn.processor';
import { ChildPool } from './child-pool';
import { siblingFile } from './spawn-node';
import { TurnCancellations } from './turn-cancellations';
import { TurnDispatcher } from './turn-dispatcher';
import { createTurnNotifier, startTurnReaper } from './start-reaper';
import { WorkerRegistration } from './worker-registry';
import type { WorkerMetrics } from '../observability/session-metrics';
import type { Tracer } from '@opentelemetry/api';

/** Delta text (characters) waiting that makes a turn's events go out before the flush interval. */
const EVENTS_FLUSH_CHARS = 8192;

/** Optional collaborators of startWorker. */
export interface StartWorkerDeps {
  logger?: Logger;
  /** Turn, webhook and reaper metrics; null or absent = off. */
  metrics?: WorkerMetrics | null;
  /** The tracer when tracing is on; null or absent = off. */
  tracer?: Tracer | null;
}

/** A running worker. */
export interface RunningWorker {
  /** Unique id of this worker in the registry. */
  workerId: string;
  /** Stops taking turns, lets those under way finish (briefly), deregisters and closes connections. */
  close(): Promise<void>;
}

/** The built-in chat agent module (`agents/chat.agent`) of this build. */
export function defaultAgentModule(): string {
  return siblingFile(path.join(__dirname, '..', 'agents'), __filename, 'chat.agent');
}

/**
 * Starts a worker: a pool of `concurrency` agent processes running the turns the fair scheduler
 * hands out, its registry heartbeat, the turn-cancel listener and a reaper. Rejects when the agent
 * module cannot be loaded.
 */
export async function startWorker(config: WorkerConfig, deps: StartWorkerDeps = {}): Promise<RunningWorker> {
  const logger = deps.logger ?? createLogger({ service: 'agent-session-worker', level: config.logLevel });
  const workerId = randomUUID();
  const agentModule = config.agentModule ? path.resolve(config.agentModule) : defaultAgentModule();
  if (!config.gatewayApiKey) logger.warn('neither GATEWAY_API_KEY nor DEV_API_KEY is set: model calls will get 401');
  else if (isWellFormedApiKey(config.gatewayApiKey)) {
    // Each call names its session's organization, which only a service key may act for.
    logger.warn(
      "the gateway key is an organization's key: turns of other organizations' sessions will get 401; give GATEWAY_API_KEY one of the gateway's SERVICE_API_KEYS",
    );
  }

  const pool = new ChildPool({
    size: config.concurrency,
    logger,
    init: {
      agentModule,
      gatewayBaseUrl: config.gatewayBaseUrl,
      gatewayApiKey: config.gatewayApiKey ?? 'unset',
      gatewayTimeoutMs: config.gatewayTimeoutMs,
      logLevel: config.logLevel,
      settings: {
        defaultModel: config.agentDefaultModel,
        maxModelTries: config.agentMaxModelTries,
        retryBaseDelayMs: config.agentRetryBaseDelayMs,
        retryMaxDelayMs: config.agentRetryMaxDelayMs,
      },
    },
  });
  try {
    await pool.start();
  } catch (err) {
    await pool.close();
    throw err;
  }

  const redis = createRedis(config, { name: 'agent-session:worker', logger });
  // The wait for work blocks its connection; commands never queue behind it.
  const blocking = createRedis(config, { name: 'agent-session:worker-wait', logger, maxRetriesPerRequest: null });
  const subscriber = createRedis(config, { name: 'agent-session:turn-cancel', logger });
  const eventLog = { maxEntries: config.eventLogMaxEntries, retentionMs: config.eventLogRetentionMs };
  const store = new SessionStore({ redis, prefix: config.redisPrefix, eventLog });
  const registration = new WorkerRegistration({
    redis,
    prefix: config.redisPrefix,
    workerId,
    concurrency: config.concurrency,
    ttlMs: config.leaseTtlMs,
  });
  const scheduler = new TurnScheduler(redis, config.redisPrefix, undefined, eventLog, registration);
  const cancellations = await TurnCancellations.start(subscriber, config.redisPrefix, logger);
  const streams = await TurnEventStreams.start({
    redis,
    subscriber,
    prefix: config.redisPrefix,
    retention: eventLog,
    flushIntervalMs: config.eventsFlushMs,
    flushChars: EVENTS_FLUSH_CHARS,
    logger,
  });
  const metrics = deps.metrics ?? null;
  const notifier = createTurnNotifier(config, logger, metrics);
  await registration.heartbeat();
  const heartbeat = setInterval(
    () => {
      registration.heartbeat().then(
        (lost) => cancellations.cancelLost(lost),
        (err: unknown) => logger.warn('worker heartbeat failed', { err: (err as Error).message }),
      );
    },
    Math.max(50, Math.floor(config.leaseTtlMs / 5)),
  );
  heartbeat.unref();

  const reaper = startTurnReaper(config, { redis, store, logger, notifier, metrics });

  const processor = createAgentTurnProcessor({
    store,
    scheduler,
    pool,
    registration,
    cancellations,
    notifier,
    logger,
    turnTimeoutMs: config.turnTimeoutMs,
    leaseTtlMs: config.leaseTtlMs,
    metrics,
    tracer: deps.tracer ?? null,
    streams,
  });
  const dispatcher = new TurnDispatcher({
    scheduler,
    blocking,
    concurrency: config.concurrency,
    leaseTtlMs: config.leaseTtlMs,
    process: processor,
    logger,
  });
  dispatcher.start();
  logger.info('worker started', { worker_id: workerId, concurrency: config.concurrency, agent_module: agentModule });

  let closing: Promise<void> | null = null;
  const close = () =>
    (closing ??= (async () => {
      await reaper.stop();
      await dispatcher.stop();
      pool.stopReserving();
      let graceTimer: NodeJS.Timeout | undefined;
      const graceful = await Promise.race([
        dispatcher.drained().then(() => true),
        new Promise<false>((resolve) => (graceTimer = setTimeout(() => resolve(false), config.shutdownGraceMs))),
      ]);
      clearTimeout(graceTimer);
      if (!graceful) logger.warn('turns still running at shutdown are ended in error');
      await pool.close();
      await dispatcher.drained();
      clearInterval(heartbeat);
      await registration.deregister().catch(() => undefined);
      await notifier.drain();
      await cancellations.close();
      await redis.quit();
    })());
  return { workerId, close };
}
