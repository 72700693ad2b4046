export * from './metric-samples';
export * from './otlp-receiver';
export * from './prometheus-server';
