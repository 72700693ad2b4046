import type { RequestHandler } from 'express';
import { CLIENT_GONE, statusLogged, type AccessLogSink } from '@tollway/service-kit';
import { traceIdOf } from '@tollway/telemetry';
import { context } from '@opentelemetry/api';

/** Paths polled by machines, left out of the access log. */
const QUIET_PATHS = new Set(['/metrics', '/healthz', '/readyz']);

/**
 * One access log line per request served by express (everything but the chat fast path, which
 * writes its own): request id, method, path, status, duration. Never a header or a body: keys and
 * prompts stay out of the log. The path is read on arrival, whole: a router mounted at
 * `/admin/v1` or `/console` shortens `req.path` for its routes. A request whose client left before
 * its answer was complete is logged too, with `error_type` `client_gone` and, if nothing had
 * been sent, status 499 (as nginx logs it).
 */
export function accessLog(logger: AccessLogSink): RequestHandler {
  return (req, res, next) => {
    const path = req.path;
    if (QUIET_PATHS.has(path)) return next();
    const startedAt = performance.now();
    const traceId = traceIdOf(context.active());
    res.once('close', () => {
      const gone = !res.writableFinished;
      logger.info('request', {
        request_id: req.id,
        trace_id: traceId ?? undefined,
        method: req.method,
        path,
        status: statusLogged(res),
        duration_ms: Math.round((performance.now() - startedAt) * 1000) / 1000,
        error_type: gone ? CLIENT_GONE : undefined,
      });
    });
    next();
  };
}
