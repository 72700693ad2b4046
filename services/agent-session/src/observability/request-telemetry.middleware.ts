import type { Response, RequestHandler } from 'express';
import { SpanKind, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { CLIENT_GONE, statusLogged, type AccessLogSink } from '@tollway/service-kit';
import { contextFromHeaders, endSpanWithError, traceIdOf, traceparentOf, withSpan } from '@tollway/telemetry';
import { orgOf } from '../api/auth';

/** Paths polled by machines, left out of the access log. */
const QUIET_PATHS = new Set(['/metrics', '/healthz', '/readyz']);

/** Where the request's trace context is kept for the routes (res.locals). */
const TRACE_CONTEXT = 'traceContext';

/**
 * Per request: a server span (when tracing is on; the incoming `traceparent` is honoured) and one
 * JSON access log line (request id, trace id, organization, method, route, status, duration).
 * Never a header or a body: keys, webhook tokens and message content stay out of the log.
 */
export function requestTelemetry(options: { tracer: Tracer | null; accessLog: AccessLogSink | null }): RequestHandler {
  const { tracer, accessLog } = options;
  return (req, res, next) => {
    if (QUIET_PATHS.has(req.path) || (!tracer && !accessLog)) return next();
    const startedAt = performance.now();
    let context: Context | null = null;
    let span: Span | null = null;
    if (tracer) {
      const parent = contextFromHeaders(req.headers);
      span = tracer.startSpan(
        req.method,
        { kind: SpanKind.SERVER, attributes: { 'http.request.method': req.method } },
        parent,
      );
      context = withSpan(span, parent);
      res.locals[TRACE_CONTEXT] = context;
    }
    // 'close', not 'finish': a request whose client left (a long-poll given up, say) is logged
    // and traced too, with `error_type` `client_gone` and, if nothing had been sent, status 499.
    res.once('close', () => {
      const route = routeOf(req.route as { path?: unknown } | undefined);
      const gone = !res.writableFinished;
      const status = statusLogged(res);
      if (span) {
        span.updateName(`${req.method} ${route}`);
        span.setAttribute('http.route', route);
        span.setAttribute('http.response.status_code', status);
        if (gone) endSpanWithError(span, CLIENT_GONE);
        else if (status >= 500) endSpanWithError(span, String(status));
        else span.end();
      }
      accessLog?.info('request', {
        request_id: req.id,
        trace_id: context ? (traceIdOf(context) ?? undefined) : undefined,
        org_id: orgOf(res),
        method: req.method,
        route,
        status,
        duration_ms: Math.round((performance.now() - startedAt) * 1000) / 1000,
        error_type: gone ? CLIENT_GONE : undefined,
      });
    });
    next();
  };
}

/** The `traceparent` of the request's server span, for the job it queues; undefined when tracing is off. */
export function requestTraceparent(res: Response): string | undefined {
  const context = res.locals[TRACE_CONTEXT] as Context | undefined;
  return context ? traceparentOf(context) : undefined;
}

/** The matched route template (bounded), never the raw path with its ids. */
function routeOf(route: { path?: unknown } | undefined): string {
  return typeof route?.path === 'string' ? route.path : 'unmatched';
}
