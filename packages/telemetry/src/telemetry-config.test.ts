import { tracingConfigured, type TelemetryConfig } from './telemetry-config';

const base: TelemetryConfig = { metricsEnabled: true, metricsHost: '0.0.0.0', otelSdkDisabled: false };

describe('tracingConfigured', () => {
  it.each([
    ['nothing set', {}, false],
    ['an OTLP endpoint', { otelExporterOtlpEndpoint: 'http://c:4318' }, true],
    ['a traces endpoint', { otelExporterOtlpTracesEndpoint: 'http://c:4318/v1/traces' }, true],
    ['OTEL_TRACES_EXPORTER=otlp', { otelTracesExporter: 'otlp' }, true],
    [
      'an endpoint with OTEL_TRACES_EXPORTER=none',
      { otelExporterOtlpEndpoint: 'http://c', otelTracesExporter: 'none' },
      false,
    ],
    ['an endpoint with OTEL_SDK_DISABLED', { otelExporterOtlpEndpoint: 'http://c', otelSdkDisabled: true }, false],
    ['an empty endpoint (compose default)', { otelExporterOtlpEndpoint: '' }, false],
  ])('%s → %s', (_name, patch, expected) => {
    expect(tracingConfigured({ ...base, ...patch })).toBe(expected);
  });
});
