import express, { type ErrorRequestHandler, type Express, type Router } from 'express';
import type { Redis } from 'ioredis';
import type { InferenceOpenApiOptions } from '@tollway/contracts';
import {
  errorMiddleware,
  isRedisUnavailable,
  jsonBody,
  listenWithLimits,
  requestId,
  ServiceError,
  type Logger,
} from '@tollway/service-kit';
import type { Admission, Authenticator } from './admission/admission.types';
import type { CatalogStore } from './catalog/catalog-store';
import type { GatewayConfig } from './config';
import type { EngineRegistry } from './engines';
import { accountStoreUnavailable, endpointNotFound } from './errors';
import { requireApiKey } from './http/auth.middleware';
import { chatFastPath } from './http/chat-fast-path';
import { engineShapedErrors } from './http/engine-error.middleware';
import { chatCompletionsHandler } from './routes/chat-completions.route';
import { healthRouter } from './routes/health.route';
import { modelsRouter } from './routes/models.route';
import { openApiRouter } from './routes/openapi.route';
import { accessLog } from './observability/access-log.middleware';
import type { GatewayTelemetry } from './observability/chat-observation';
import { buildGatewayTelemetry } from './observability/gateway-telemetry';
import { PromptTokenCounter } from './tokenizer/count-tokens';
import { writeMetrics } from '@tollway/telemetry';
import type { LiveRelays } from './streaming/live-relays';

/**
 * Redis unreachable or silent past its reply timeout, on the admin API or the console (the
 * inference path answers its own 503 `admission_unavailable`): 503, not a 500.
 */
export const redisFailureAs503: ErrorRequestHandler = (err, _req, _res, next) => {
  next(!(err instanceof ServiceError) && isRedisUnavailable(err) ? accountStoreUnavailable(err) : err);
};

/** Everything the gateway app is built from; `main.ts` wires the real ones, tests their own. */
export interface GatewayDeps {
  config: GatewayConfig;
  logger: Logger;
  catalog: CatalogStore;
  engines: EngineRegistry;
  authenticator: Authenticator;
  admission: Admission;
  redis: Redis;
  /** The admin API, mounted at `/admin/v1` outside the `/v1` key check. */
  adminRouter?: Router;
  /** The key-management console, mounted at `/console`. */
  consoleRouter?: Router;
  /** Extra paths (the admin API) for `GET /openapi.json`. */
  openApi?: InferenceOpenApiOptions;
  /** Metrics, tracer, access log (see observability/); default built from the config, tracing off. */
  telemetry?: GatewayTelemetry;
  /** Counts prompts for admission; default one keeping PROMPT_TOKEN_CACHE_ENTRIES counts. Give the same to the telemetry. */
  promptTokens?: PromptTokenCounter;
  /** The streams being relayed, for a shutdown to end when its drain time is up (main.ts). */
  liveRelays?: LiveRelays;
}

/**
 * Builds the gateway's express app (never listens). Its `listen` serves `POST /v1/chat/completions`
 * on a fast path ahead of express (see http/chat-fast-path.ts); everything else goes to express.
 */
export function buildApp(deps: GatewayDeps): Express {
  const app = express();
  const promptTokens = deps.promptTokens ?? new PromptTokenCounter(deps.config.promptTokenCacheEntries);
  const telemetry = deps.telemetry ?? buildGatewayTelemetry({ ...deps, promptTokenStats: () => promptTokens.stats() });
  const chatDeps = {
    catalog: deps.catalog,
    engines: deps.engines,
    admission: deps.admission,
    logger: deps.logger,
    defaultOutputReservationTokens: deps.config.defaultOutputReservationTokens,
    promptTokens,
    telemetry,
    relays: deps.liveRelays,
  };
  const bodyLimits = { maxBytes: deps.config.maxBodyBytes, maxDepth: deps.config.maxJsonDepth };
  const fast = chatFastPath({ ...chatDeps, authenticator: deps.authenticator, bodyLimits });
  listenWithLimits(app, deps.config, deps.logger, (req, res) => {
    if (!fast(req, res)) app(req, res);
  });
  app.disable('x-powered-by');
  app.disable('etag');
  app.use(requestId());
  const registry = telemetry.metrics?.registry;
  // With METRICS_PORT set, main.ts serves the metrics on their own listener instead.
  if (registry && deps.config.metricsPort === undefined)
    app.get('/metrics', (_req, res) => writeMetrics(registry, res));
  if (telemetry.accessLog) app.use(accessLog(telemetry.accessLog));
  app.use(healthRouter(deps));
  app.use(openApiRouter(deps.openApi));
  if (deps.adminRouter) app.use('/admin/v1', deps.adminRouter);
  if (deps.consoleRouter) app.use('/console', deps.consoleRouter);

  const auth = requireApiKey(deps.authenticator);
  // Any content type is read as JSON: clients that forget the header still get a JSON answer.
  const json = jsonBody(bodyLimits);
  app.use('/v1', modelsRouter(deps.catalog, auth));
  app.post('/v1/chat/completions', auth, json, chatCompletionsHandler(chatDeps));
  // Unimplemented endpoints are 404 whether or not a key was sent.
  app.use((req, _res, next) => next(endpointNotFound(req.method, req.path)));
  app.use(engineShapedErrors());
  app.use(redisFailureAs503);
  app.use(errorMiddleware(deps.logger));
  return app;
}
