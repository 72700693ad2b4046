import type { Tracer } from '@opentelemetry/api';
import type { Logger } from '@tollway/service-kit';
import { createMetricsRegistry } from '@tollway/telemetry';
import type { AdmissionStats } from '../admission/admission.types';
import type { GatewayConfig } from '../config';
import type { CatalogStore } from '../catalog/catalog-store';
import type { EngineRegistry } from '../engines';
import type { GatewayTelemetry } from './chat-observation';
import { GatewayMetrics } from './gateway-metrics';

/** What the gateway's telemetry is built from. */
export interface GatewayTelemetryDeps {
  config: Pick<GatewayConfig, 'metricsEnabled' | 'accessLog'>;
  logger: Logger;
  catalog: CatalogStore;
  engines: EngineRegistry;
  admissionStats?: () => AdmissionStats;
  /** The tracer when tracing is on (see startTracing); null or absent = off. */
  tracer?: Tracer | null;
}

/** Metrics (per METRICS_ENABLED), tracing (when a tracer is given) and the access log (per ACCESS_LOG). */
export function buildGatewayTelemetry(deps: GatewayTelemetryDeps): GatewayTelemetry {
  const metrics = deps.config.metricsEnabled
    ? new GatewayMetrics(createMetricsRegistry('inference-gateway'), {
        engines: deps.engines,
        admissionStats: deps.admissionStats,
      })
    : null;
  // Every catalog model's series exist from the start, at zero, so rate() and increase() see the
  // first requests of a model (a series born with its first request would hide them).
  if (metrics)
    deps.catalog.subscribe((models) => models.forEach((model) => metrics.forModel(model.id, model.engine.kind)));
  return { metrics, tracer: deps.tracer ?? null, accessLog: deps.config.accessLog ? deps.logger : null };
}
