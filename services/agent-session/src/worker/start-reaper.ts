import type { Redis } from 'ioredis';
import type { Logger } from '@tollway/service-kit';
import type { SessionStore } from '../store/session-store';
import { TurnScheduler } from '../store/turn-scheduler';
import { TurnNotifier } from '../webhooks/turn-notifier';
import { WebhookDelivery } from '../webhooks/webhook-delivery';
import type { WorkerConfig } from '../worker-config';
import { TurnReaper } from './turn-reaper';
import type { WorkerMetrics } from '../observability/session-metrics';
import { tracingConfigured } from '@tollway/telemetry';

/** What startTurnReaper works with. */
export interface StartTurnReaperDeps {
  redis: Redis;
  store: SessionStore;
  logger: Logger;
  /** Sends the webhooks of reaped turns; default one built from `config`. */
  notifier?: TurnNotifier;
  /** Counts recoveries (and webhook deliveries of the default notifier); null = metrics off. */
  metrics?: WorkerMetrics | null;
}

/** A running reaper. */
export interface RunningReaper {
  /** Stops the passes and waits for the webhooks under way. */
  stop(): Promise<void>;
}

/**
 * The webhook sender of a worker config (timeout, signing secret, allow-list). Payloads carry
 * `trace_metrics` when TRACING_ENABLED is set or OpenTelemetry tracing is on.
 */
export function createTurnNotifier(
  config: WorkerConfig,
  logger: Logger,
  metrics: WorkerMetrics | null = null,
): TurnNotifier {
  const delivery = new WebhookDelivery({
    logger,
    timeoutMs: config.webhookTimeoutMs,
    signingSecret: config.webhookSigningSecret,
    allowedHosts: config.webhookAllowedHosts,
    observe: metrics ? (ok, seconds) => metrics.webhookDelivered(ok, seconds) : undefined,
  });
  return new TurnNotifier(delivery, config.tracingEnabled || tracingConfigured(config));
}

/**
 * Starts the reaper of orphaned turns (see TurnReaper). Every worker runs one; a process that runs
 * no worker (the API without `--embedded-worker`) can run one too, so a turn whose only worker died
 * still ends in `error` within seconds. Reapers are idempotent: any number may run.
 */
export function startTurnReaper(config: WorkerConfig, deps: StartTurnReaperDeps): RunningReaper {
  const notifier = deps.notifier ?? createTurnNotifier(config, deps.logger, deps.metrics ?? null);
  const reaper = new TurnReaper({
    store: deps.store,
    scheduler: new TurnScheduler(deps.redis, config.redisPrefix, undefined, {
      maxEntries: config.eventLogMaxEntries,
      retentionMs: config.eventLogRetentionMs,
    }),
    notifier,
    logger: deps.logger,
    intervalMs: config.reaperIntervalMs,
    leaseTtlMs: config.leaseTtlMs,
    onRecovered: deps.metrics ? () => deps.metrics?.turnRecovered() : undefined,
  });
  reaper.start();
  return {
    async stop() {
      await reaper.stop();
      if (!deps.notifier) await notifier.drain();
    },
  };
}
