import type { RequestHandler } from 'express';
import type { AccessLogSink } from '@tollway/service-kit';
import { traceIdOf } from '@tollway/telemetry';
import { context } from '@opentelemetry/api';

/** Paths polled by machines, left out of the access log. */
const QUIET_PATHS = new Set(['/metrics', '/healthz', '/readyz']);

/**
 * One access log line per request served by express (everything but the chat fast path, which
 * writes its own): request id, method, path, status, duration. Never a header or a body: keys and
 * prompts stay out of the log.
 */
export function accessLog(logger: AccessLogSink): RequestHandler {
  return (req, res, next) => {
    if (QUIET_PATHS.has(req.path)) return next();
    const startedAt = performance.now();
    const traceId = traceIdOf(context.active());
    res.once('finish', () => {
      logger.info('request', {
        request_id: req.id,
        trace_id: traceId ?? undefined,
        method: req.method,
        path: req.path,
        status: res.statusCode,
        duration_ms: Math.round((performance.now() - startedAt) * 1000) / 1000,
      });
    });
    next();
  };
}
