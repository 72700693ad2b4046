import type { Tracer } from '@opentelemetry/api';
import { AccessLog, type AccessLogSink, type Logger } from '@tollway/service-kit';
import { createMetricsRegistry } from '@tollway/telemetry';
import type { AdmissionStats } from '../admission/admission.types';
import type { GatewayConfig } from '../config';
import type { CatalogStore } from '../catalog/catalog-store';
import type { EngineRegistry } from '../engines';
import type { PromptTokenStats } from '../tokenizer/count-tokens';
import type { GatewayTelemetry } from './chat-observation';
import { GatewayMetrics } from './gateway-metrics';

/** What the gateway's telemetry is built from. */
export interface GatewayTelemetryDeps {
  config: Pick<GatewayConfig, 'metricsEnabled' | 'accessLog'>;
  logger: Logger;
  catalog: CatalogStore;
  engines: EngineRegistry;
  admissionStats?: () => AdmissionStats;
  /** The chat path's prompt token counter (buildApp passes its own). */
  promptTokenStats?: () => PromptTokenStats;
  /** Where access log lines go when ACCESS_LOG is on; default an AccessLog on stdout. */
  accessLog?: AccessLogSink;
  /** The tracer when tracing is on (see startTracing); null or absent = off. */
  tracer?: Tracer | null;
}

/** Metrics (per METRICS_ENABLED), tracing (when a tracer is given) and the access log (per ACCESS_LOG). */
export function buildGatewayTelemetry(deps: GatewayTelemetryDeps): GatewayTelemetry {
  const metrics = deps.config.metricsEnabled
    ? new GatewayMetrics(createMetricsRegistry('inference-gateway'), {
        engines: deps.engines,
        admissionStats: deps.admissionStats,
        promptTokenStats: deps.promptTokenStats,
      })
    : null;
  // Every catalog model's series exist from the start, at zero, so rate() and increase() see the
  // first requests of a model (a series born with its first request would hide them).
  if (metrics)
    deps.catalog.subscribe((models) => models.forEach((model) => metrics.forModel(model.id, model.engine.kind)));
  // Access lines are info records: a LOG_LEVEL above info turns them off, as it would winston's.
  const accessLog =
    deps.config.accessLog && deps.logger.isInfoEnabled()
      ? (deps.accessLog ?? new AccessLog({ service: 'inference-gateway' }))
      : null;
  return { metrics, tracer: deps.tracer ?? null, accessLog };
}
