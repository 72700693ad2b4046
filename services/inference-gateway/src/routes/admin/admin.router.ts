import { Router } from 'express';
import type { AccountStore } from '@tollway/accounts';
import { jsonBody } from '@tollway/service-kit';
import type { ConsoleSessions } from '../../console/console-sessions';
import { authenticateAdminCaller, type AdminKeyResolver } from './admin-access';
import { adminEndpointNotFound } from './admin-errors';
import { organizationsRoutes } from './organizations.route';
import { keysRoutes } from './keys.route';
import { modelStatusRoutes, type ModelStatusSource } from './models-status.route';

/** Where the gateway app mounts the admin router. */
export const ADMIN_BASE_PATH = '/admin/v1';

/** Admin bodies are small objects: 64 KiB, 32 levels. */
const ADMIN_BODY_LIMITS = { maxBytes: 64 * 1024, maxDepth: 32 };

/** Options of buildAdminRouter. */
export interface AdminRouterOptions {
  store: AccountStore;
  /** The operator's bearer token (config `ADMIN_TOKEN`). */
  adminToken: string;
  /** Resolves organization admin keys sent as bearer tokens; absent = operator only. */
  keys?: AdminKeyResolver;
  /** Console sessions, accepted from the session cookie; absent = bearer tokens only. */
  sessions?: ConsoleSessions;
  /** The catalog with health and capacity, for `GET /models`; absent = no such endpoint. */
  models?: ModelStatusSource;
}

/**
 * The admin API, mounted by the app at ADMIN_BASE_PATH: organizations, their keys and usage, the
 * model catalog. The operator (`ADMIN_TOKEN`) reaches everything; an organization admin (admin key
 * or console session) reaches only their own organization's keys and usage (see admin-access.ts).
 * Anything else is 401. The gateway mounts it only when a token is configured.
 */
export function buildAdminRouter(options: AdminRouterOptions): Router {
  const router = Router();
  // Every answer is about organizations, keys and spend: no cache keeps it, and no browser reads
  // it as anything but the JSON it is (refusals included).
  router.use((_req, res, next) => {
    res.setHeader('cache-control', 'no-store');
    res.setHeader('x-content-type-options', 'nosniff');
    next();
  });
  router.use(authenticateAdminCaller(options), jsonBody(ADMIN_BODY_LIMITS));
  router.use(organizationsRoutes(options.store));
  router.use(keysRoutes(options.store));
  if (options.models) router.use(modelStatusRoutes(options.models));
  // Its own 404, so an admin typo is not answered with the inference API's model_not_found.
  router.use((req, _res, next) => next(adminEndpointNotFound(req.method, req.path)));
  return router;
}
