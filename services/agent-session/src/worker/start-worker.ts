import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { Worker } from 'bullmq';
import { isWellFormedApiKey } from '@tollway/accounts';
import { AGENT_TURN_QUEUE } from '@tollway/contracts';
import { createLogger, createRedis, type Logger } from '@tollway/service-kit';
import { SessionStore } from '../store/session-store';
import { turnQueuePrefix } from '../store/turn-queue';
import type { WorkerConfig } from '../worker-config';
import { createAgentTurnProcessor } from './agent-turn.processor';
import { ChildPool } from './child-pool';
import { siblingFile } from './spawn-node';
import { TurnCancellations } from './turn-cancellations';
import { createTurnNotifier, startTurnReaper } from './start-reaper';
import { WorkerRegistration } from './worker-registry';
import type { WorkerMetrics } from '../observability/session-metrics';
import type { Tracer } from '@opentelemetry/api';

/**
 * Jobs taken from the queue per agent process: a job fetched ahead waits for a free process (it is
 * not leased, so not counted as running), hiding the queue round trips between turns.
 */
const JOB_PREFETCH_FACTOR = 2;
/** On shutdown, turns under way get this long to finish before their processes are killed, in ms. */
const SHUTDOWN_TURN_GRACE_MS = 5_000;

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
 * Starts a worker: a pool of `concurrency` agent processes consuming the turn queue, its registry
 * heartbeat, the turn-cancel listener and a reaper. Rejects when the agent module cannot be loaded.
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

  const redis = createRedis(config, { name: 'agent-session:worker' });
  const queueRedis = createRedis(config, { name: 'agent-session:worker-queue', maxRetriesPerRequest: null });
  const subscriber = createRedis(config, { name: 'agent-session:turn-cancel' });
  const store = new SessionStore({ redis, prefix: config.redisPrefix });
  const registration = new WorkerRegistration({
    redis,
    prefix: config.redisPrefix,
    workerId,
    concurrency: config.concurrency,
    ttlMs: config.leaseTtlMs,
  });
  const cancellations = await TurnCancellations.start(subscriber, config.redisPrefix, logger);
  const metrics = deps.metrics ?? null;
  const notifier = createTurnNotifier(config, logger, metrics);
  await registration.heartbeat();
  const heartbeat = setInterval(
    () => {
      Promise.all([registration.heartbeat(), cancellations.checkDeleted(redis, config.redisPrefix)]).catch(
        (err: unknown) => logger.warn('worker heartbeat failed', { err: (err as Error).message }),
      );
    },
    Math.max(50, Math.floor(config.leaseTtlMs / 5)),
  );
  heartbeat.unref();

  const reaper = startTurnReaper(config, { redis, store, logger, notifier, metrics });

  const processor = createAgentTurnProcessor({
    store,
    pool,
    registration,
    cancellations,
    notifier,
    logger,
    turnTimeoutMs: config.turnTimeoutMs,
    metrics,
    tracer: deps.tracer ?? null,
  });
  const worker = new Worker(AGENT_TURN_QUEUE, processor, {
    connection: queueRedis,
    prefix: turnQueuePrefix(config.redisPrefix),
    concurrency: config.concurrency * JOB_PREFETCH_FACTOR,
    // A turn never runs twice: a job whose lock lapsed (its worker died) is failed, not retried,
    // and the reaper ends its turn in error.
    maxStalledCount: 0,
    stalledInterval: config.stalledIntervalMs,
    lockDuration: config.jobLockDurationMs,
  });
  worker.on('error', (err) => logger.error('turn queue error', { err: err.message }));
  worker.on('failed', (job, err) => logger.warn('turn job failed', { job_id: job?.id, err: err.message }));
  logger.info('worker started', { worker_id: workerId, concurrency: config.concurrency, agent_module: agentModule });

  let closing: Promise<void> | null = null;
  const close = () =>
    (closing ??= (async () => {
      await reaper.stop();
      pool.stopReserving();
      const closed = worker.close();
      let graceTimer: NodeJS.Timeout | undefined;
      const graceful = await Promise.race([
        closed.then(() => true),
        new Promise<false>((resolve) => (graceTimer = setTimeout(() => resolve(false), SHUTDOWN_TURN_GRACE_MS))),
      ]);
      clearTimeout(graceTimer);
      if (!graceful) logger.warn('turns still running at shutdown are ended in error');
      await pool.close();
      await closed;
      clearInterval(heartbeat);
      await registration.deregister().catch(() => undefined);
      await notifier.drain();
      await cancellations.close();
      await Promise.all([redis.quit(), queueRedis.quit()]);
    })());
  return { workerId, close };
}
