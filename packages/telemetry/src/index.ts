export * from './genai-semconv';
export * from './metrics-registry';
export * from './telemetry-config';
export * from './tracing';
export * from './hot-metrics';
export * from './script-metrics';
