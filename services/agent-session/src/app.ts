import express, { type ErrorRequestHandler, type Express } from 'express';
import type { Redis } from 'ioredis';
import { errorMiddleware, notFoundHandler, requestId, ServiceError, type Logger } from '@tollway/service-kit';
import { SESSION_ERROR_CODES } from '@tollway/contracts';
import { authenticateOrg, type OrgAuthenticator } from './api/auth';
import { healthRouter, type WorkerStatsReader } from './api/health.route';
import { messagesRouter } from './api/messages.route';
import type { TurnQueue } from './api/route-deps';
import { sessionErrors } from './api/session-errors';
import { sessionsRouter } from './api/sessions.route';
import type { SessionEventHub } from './store/session-event-hub';
import type { SessionStore } from './store/session-store';
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
  turnQueue: TurnQueue;
  /** Null turns authentication off (`--no-auth`): every caller is org null. */
  authenticator: OrgAuthenticator | null;
  workerStats: WorkerStatsReader;
  logger: Logger;
  maxSessions: number;
  allowCustomIds: boolean;
  /** Largest accepted body in bytes. */
  maxBodyBytes: number;
  /** Unix ms; default Date.now. */
  clock?: () => number;
  /** Served at `GET /metrics` when given (null: metrics off, or served on METRICS_PORT). */
  metricsRegistry?: Registry | null;
  /** The tracer when tracing is on; null or absent = off. */
  tracer?: Tracer | null;
  /** Where access log lines go; null or absent = no access log. */
  accessLog?: Logger | null;
}

const REDIS_FAILURE =
  /Connection is closed|Stream isn't writeable|ECONNREFUSED|ETIMEDOUT|MaxRetriesPerRequest|Command timed out/;

/** A Redis outage is the store being unreachable (503), not a bug in the server (500). */
const redisFailureAs503: ErrorRequestHandler = (err, _req, _res, next) => {
  const failure =
    err instanceof Error && !(err instanceof ServiceError) && REDIS_FAILURE.test(`${err.name} ${err.message}`);
  next(failure ? sessionErrors.unavailable(err) : err);
};

/** Builds the session API (never listens). */
export function buildApp(deps: AppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(requestId());
  const registry = deps.metricsRegistry;
  if (registry) app.get('/metrics', (_req, res) => writeMetrics(registry, res));
  app.use(requestTelemetry({ tracer: deps.tracer ?? null, accessLog: deps.accessLog ?? null }));
  app.use(healthRouter(deps));
  // Any content type is read as JSON so a non-JSON body is a clear 400, never silently ignored.
  app.use(express.json({ limit: deps.maxBodyBytes, type: () => true }));
  app.use('/sessions', authenticateOrg(deps.authenticator));
  const routeDeps = { ...deps, clock: deps.clock ?? Date.now };
  app.use(sessionsRouter(routeDeps));
  app.use(messagesRouter(routeDeps));
  app.use(notFoundHandler((path) => sessionErrors.routeNotFound(path)));
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
