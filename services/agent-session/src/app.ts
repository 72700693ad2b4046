import express, { type ErrorRequestHandler, type Express } from 'express';
import type { Redis } from 'ioredis';
import {
  DEFAULT_HTTP_LIMITS,
  errorMiddleware,
  isRedisUnavailable,
  jsonBody,
  listenWithLimits,
  notFoundHandler,
  requestId,
  ServiceError,
  type HttpLimits,
  type AccessLogSink,
  type Logger,
} from '@tollway/service-kit';
import { SESSION_ERROR_CODES } from '@tollway/contracts';
import { allowedMethods, OPEN_PATHS, sessionPaths } from './api/allowed-methods';
import { authenticateOrg, type OrgAuthenticator } from './api/auth';
import { healthRouter, type WorkerStatsReader } from './api/health.route';
import { messagesRouter } from './api/messages.route';
import { eventsRouter } from './api/events.route';
import type { EventReaderHub } from './streaming/event-reader-hub';
import { sessionErrors } from './api/session-errors';
import { sessionsRouter } from './api/sessions.route';
import type { SessionEventHub } from './store/session-event-hub';
import type { OrganizationLimitsSource } from './store/organization-limits';
import type { SessionStore } from './store/session-store';
import type { TurnNotifier } from './webhooks/turn-notifier';
import { requestTelemetry } from './observability/request-telemetry.middleware';
import { writeMetrics } from '@tollway/telemetry';
import type { Registry } from 'prom-client';
import type { Tracer } from '@opentelemetry/api';

/** Everything the API app is built from; main-api.ts wires the real ones, tests their own. */
export interface AppDeps {
  redis: Redis;
  store: SessionStore;
  /** Must be started (subscribed) before long-polls are served. */
  hub: SessionEventHub;
  /** Serves `GET /sessions/{id}/events` and sends answered as streams; started. Absent: neither is served. */
  events?: EventReaderHub | null;
  /** Each organization's session limits. */
  limits: OrganizationLimitsSource;
  /** Sends the cancellation callback of a waiting turn whose session is deleted; null or absent = none. */
  notifier?: TurnNotifier | null;
  /** Null turns authentication off (`--no-auth`): every caller is org null. */
  authenticator: OrgAuthenticator | null;
  workerStats: WorkerStatsReader;
  logger: Logger;
  maxSessions: number;
  allowCustomIds: boolean;
  /** Largest accepted body in bytes. */
  maxBodyBytes: number;
  /** Deepest nesting of arrays and objects in a body; default 64. */
  maxJsonDepth?: number;
  /** Largest history of a session, bytes of its messages as JSON; default 4 MiB. */
  maxHistoryBytes?: number;
  /** Connection limits of the server `app.listen` creates; default DEFAULT_HTTP_LIMITS. */
  httpLimits?: HttpLimits;
  /** Unix ms; default Date.now. */
  clock?: () => number;
  /** Served at `GET /metrics` when given (null: metrics off, or served on METRICS_PORT). */
  metricsRegistry?: Registry | null;
  /** The tracer when tracing is on; null or absent = off. */
  tracer?: Tracer | null;
  /** Where access log lines go; null or absent = no access log. */
  accessLog?: AccessLogSink | null;
}

/** Default nesting limit of request bodies (the config's default too). */
export const DEFAULT_MAX_JSON_DEPTH = 64;

/** Default history limit of a session (the config's default too). */
export const DEFAULT_MAX_HISTORY_BYTES = 4 * 1024 * 1024;

/** A Redis outage is the store being unreachable (503), not a bug in the server (500). */
const redisFailureAs503: ErrorRequestHandler = (err, _req, _res, next) => {
  const failure = !(err instanceof ServiceError) && isRedisUnavailable(err);
  next(failure ? sessionErrors.unavailable(err) : err);
};

/**
 * A path parameter that is not valid percent-encoding (`/sessions/%`) names no session: 404 like
 * any id that is not a UUID, and 400 `invalid_session_id` on PUT, where the spec says so.
 */
const malformedPath: ErrorRequestHandler = (err, req, _res, next) => {
  if (!(err instanceof URIError)) return next(err);
  const rawId = req.path.split('/')[2] ?? req.path;
  next(req.method === 'PUT' ? sessionErrors.invalidSessionId() : sessionErrors.notFound(rawId));
};

/** Builds the session API; its `listen` applies the connection limits. */
export function buildApp(deps: AppDeps): Express {
  const app = express();
  listenWithLimits(app, deps.httpLimits ?? DEFAULT_HTTP_LIMITS, deps.logger);
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(requestId());
  const registry = deps.metricsRegistry;
  if (registry) app.get('/metrics', (_req, res) => writeMetrics(registry, res));
  app.use(requestTelemetry({ tracer: deps.tracer ?? null, accessLog: deps.accessLog ?? null }));
  app.use(allowedMethods(OPEN_PATHS));
  app.use(healthRouter(deps));
  // The key first: a body is inflated and parsed for an authenticated caller only (a 31-byte
  // brotli body inflates to 10 MiB of JSON). Only the session endpoints read one. Any content
  // type is read as JSON, so a non-JSON body is a clear 400, never silently ignored.
  app.use('/sessions', authenticateOrg(deps.authenticator));
  app.use(
    '/sessions',
    jsonBody({ maxBytes: deps.maxBodyBytes, maxDepth: deps.maxJsonDepth ?? DEFAULT_MAX_JSON_DEPTH }),
  );
  app.use(allowedMethods(sessionPaths(deps.allowCustomIds, Boolean(deps.events))));
  const routeDeps = {
    ...deps,
    events: deps.events ?? null,
    notifier: deps.notifier ?? null,
    clock: deps.clock ?? Date.now,
    maxHistoryBytes: deps.maxHistoryBytes ?? DEFAULT_MAX_HISTORY_BYTES,
  };
  app.use(sessionsRouter(routeDeps));
  app.use(messagesRouter(routeDeps));
  if (routeDeps.events) app.use(eventsRouter({ ...routeDeps, events: routeDeps.events }));
  app.use(notFoundHandler((path) => sessionErrors.routeNotFound(path)));
  app.use(malformedPath);
  app.use(redisFailureAs503);
  app.use(
    errorMiddleware(deps.logger, {
      invalidJson: SESSION_ERROR_CODES.invalidJson,
      tooLarge: SESSION_ERROR_CODES.requestTooLarge,
      tooLargeStatus: 413,
    }),
  );
  return app;
}
