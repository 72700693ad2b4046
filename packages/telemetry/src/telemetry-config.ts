import { z } from 'zod';
import { envBoolean, portNumber } from '@tollway/service-kit';

/**
 * Config fields every process shares for metrics and tracing; each service spreads them into its
 * own schema (config.ts stays the only reader of the environment). The `OTEL_*` variables are the
 * standard ones: only whether tracing is on is decided here; the SDK reads the rest itself.
 */
export const TELEMETRY_CONFIG_FIELDS = {
  /** Serve Prometheus metrics; default true. False leaves `/metrics` a 404 and records nothing. */
  metricsEnabled: envBoolean.default(true),
  /** Serve `/metrics` on a listener of its own at this port instead of the main one; unset = the main listener (workers: none). */
  metricsPort: portNumber.optional(),
  /** Interface of the metrics listener; default all interfaces. */
  metricsHost: z.string().default('0.0.0.0'),
  /** `OTEL_SDK_DISABLED`: true turns tracing off whatever else is set. */
  otelSdkDisabled: envBoolean.default(false),
  /** `OTEL_TRACES_EXPORTER`: `otlp` turns tracing on; `none` off. */
  otelTracesExporter: z.string().optional(),
  /** `OTEL_EXPORTER_OTLP_ENDPOINT`: set = tracing on (spans go to `<endpoint>/v1/traces`). */
  otelExporterOtlpEndpoint: z.string().optional(),
  /** `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: set = tracing on (spans go to exactly this URL). */
  otelExporterOtlpTracesEndpoint: z.string().optional(),
};

/** Where each telemetry field is read from. */
export const TELEMETRY_CONFIG_SOURCES = {
  metricsEnabled: { env: 'METRICS_ENABLED' },
  metricsPort: { env: 'METRICS_PORT', flag: 'metrics-port' },
  metricsHost: { env: 'METRICS_HOST' },
  otelSdkDisabled: { env: 'OTEL_SDK_DISABLED' },
  otelTracesExporter: { env: 'OTEL_TRACES_EXPORTER' },
  otelExporterOtlpEndpoint: { env: 'OTEL_EXPORTER_OTLP_ENDPOINT' },
  otelExporterOtlpTracesEndpoint: { env: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' },
} as const;

/** The parsed telemetry fields. */
export interface TelemetryConfig {
  metricsEnabled: boolean;
  metricsPort?: number | undefined;
  metricsHost: string;
  otelSdkDisabled: boolean;
  otelTracesExporter?: string | undefined;
  otelExporterOtlpEndpoint?: string | undefined;
  otelExporterOtlpTracesEndpoint?: string | undefined;
}

/**
 * Tracing is off unless configured: on when an OTLP endpoint is set or `OTEL_TRACES_EXPORTER=otlp`,
 * off when `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`.
 */
export function tracingConfigured(config: TelemetryConfig): boolean {
  if (config.otelSdkDisabled) return false;
  const exporter = config.otelTracesExporter?.trim().toLowerCase();
  if (exporter === 'none') return false;
  return exporter === 'otlp' || !!config.otelExporterOtlpEndpoint || !!config.otelExporterOtlpTracesEndpoint;
}
