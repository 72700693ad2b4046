import { createHash, timingSafeEqual } from 'node:crypto';
import { Router, type NextFunction, type Request, type Response } from 'express';
import type { AccountStore } from '@tollway/accounts';
import { jsonBody } from '@tollway/service-kit';
import { adminEndpointNotFound, invalidAdminToken } from './admin-errors';
import { organizationsRoutes } from './organizations.route';
import { keysRoutes } from './keys.route';

/** Where the gateway app mounts the admin router. */
export const ADMIN_BASE_PATH = '/admin/v1';

/** Admin bodies are small objects: 64 KiB, 32 levels. */
const ADMIN_BODY_LIMITS = { maxBytes: 64 * 1024, maxDepth: 32 };

/** Options of buildAdminRouter. */
export interface AdminRouterOptions {
  store: AccountStore;
  /** The bearer token every admin call must carry (config `ADMIN_TOKEN`). */
  adminToken: string;
}

/**
 * The admin API, mounted by the app at ADMIN_BASE_PATH: organizations, their keys and usage. Every call needs
 * `Authorization: Bearer <ADMIN_TOKEN>` (401 otherwise); the gateway mounts it only when a token
 * is configured.
 */
export function buildAdminRouter(options: AdminRouterOptions): Router {
  const router = Router();
  router.use(requireAdminToken(options.adminToken), jsonBody(ADMIN_BODY_LIMITS));
  router.use(organizationsRoutes(options.store));
  router.use(keysRoutes(options.store));
  // Its own 404, so an admin typo is not answered with the inference API's model_not_found.
  router.use((req, _res, next) => next(adminEndpointNotFound(req.method, req.path)));
  return router;
}

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

function requireAdminToken(adminToken: string) {
  const expected = digest(adminToken);
  return (req: Request, _res: Response, next: NextFunction): void => {
    const token = BEARER.exec(req.headers.authorization ?? '')?.[1];
    // Compare digests, so the comparison takes the same time whatever the token's length.
    if (token !== undefined && timingSafeEqual(digest(token), expected)) return next();
    next(invalidAdminToken());
  };
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}
