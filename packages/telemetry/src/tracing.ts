import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanStatusCode,
  trace,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';

/** Tracing of one process: its tracer and how to flush and stop it. */
export interface Tracing {
  tracer: Tracer;
  /** Exports the spans still buffered and stops the SDK. */
  shutdown(): Promise<void>;
}

/**
 * Starts the OpenTelemetry Node SDK with the OTLP/HTTP trace exporter, configured by the standard
 * `OTEL_*` variables (endpoint, headers, service name, resource attributes, sampler, batch delay),
 * which the SDK and the exporter read themselves. The SDK's own metrics and logs pipelines stay
 * off: metrics are Prometheus's (`/metrics`), logs are winston's. Resolves null when `enabled` is
 * false: the SDK is then not even loaded (it is a large module tree, slow to start under load),
 * and callers skip every tracer call.
 */
export async function startTracing(options: { serviceName: string; enabled: boolean }): Promise<Tracing | null> {
  if (!options.enabled) return null;
  const [{ NodeSDK }, { OTLPTraceExporter }] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/exporter-trace-otlp-http'),
  ]);
  const sdk = new NodeSDK({
    serviceName: options.serviceName,
    traceExporter: new OTLPTraceExporter(),
    metricReaders: [],
    logRecordProcessors: [],
  });
  sdk.start();
  return { tracer: trace.getTracer('tollway', '0.1.0'), shutdown: () => sdk.shutdown() };
}

/** The W3C `traceparent` of the span in `ctx` (undefined when there is none). */
export function traceparentOf(ctx: Context): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier.traceparent;
}

/** The context a `traceparent` (and `tracestate`) carries; the root context when absent or malformed. */
export function contextFromHeaders(headers: Record<string, unknown>): Context {
  if (typeof headers.traceparent !== 'string') return ROOT_CONTEXT;
  const carrier: Record<string, string> = { traceparent: headers.traceparent };
  if (typeof headers.tracestate === 'string') carrier.tracestate = headers.tracestate;
  return propagation.extract(ROOT_CONTEXT, carrier);
}

/** `span` as the active span of a new context derived from `parent` (default the active one). */
export function withSpan(span: Span, parent: Context = context.active()): Context {
  return trace.setSpan(parent, span);
}

/** Ends `span` with an error status and `error.type` (a low-cardinality class of the failure). */
export function endSpanWithError(span: Span, errorType: string, message?: string): void {
  span.setAttribute('error.type', errorType);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  span.end();
}

/** The trace id of the span in `ctx`, or null when there is no valid one (tracing off). */
export function traceIdOf(ctx: Context): string | null {
  const spanContext = trace.getSpanContext(ctx);
  return spanContext && trace.isSpanContextValid(spanContext) ? spanContext.traceId : null;
}
