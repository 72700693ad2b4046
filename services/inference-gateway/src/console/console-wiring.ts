import { createHmac } from 'node:crypto';
import path from 'node:path';
import type { Router } from 'express';
import type { Redis } from 'ioredis';
import type { AccountStore } from '@tollway/accounts';
import type { GatewayConfig } from '../config';
import type { AdminKeyResolver } from '../routes/admin/admin-access';
import { buildConsoleRouter } from './console.router';
import { ConsoleSessions } from './console-sessions';
import { SignInLimiter } from './sign-in-limiter';

/** The console's pieces: the sessions (the admin API reads them too) and its router. */
export interface ConsoleWiring {
  sessions: ConsoleSessions;
  router: Router;
}

/** Builds the console for a gateway whose admin API is on (needs ADMIN_TOKEN). */
export function wireConsole(
  config: GatewayConfig & { adminToken: string },
  redis: Redis,
  store: AccountStore,
  keys: AdminKeyResolver,
): ConsoleWiring {
  const prefix = config.redisPrefix;
  const sessions = new ConsoleSessions({
    redis,
    prefix,
    secret: config.consoleSessionSecret ?? deriveSessionSecret(config.adminToken),
    adminToken: config.adminToken,
    ttlMs: config.consoleSessionTtlMs,
  });
  const limiter = new SignInLimiter({
    redis,
    prefix,
    maxFailures: config.consoleSignInMaxFailures,
    windowMs: config.consoleSignInWindowMs,
  });
  const assetsDir = config.consoleDir ?? defaultConsoleDir();
  return {
    sessions,
    router: buildConsoleRouter({ store, adminToken: config.adminToken, keys, sessions, limiter, assetsDir }),
  };
}

/** The default session secret: a one-way derivation of ADMIN_TOKEN (the token itself never signs anything). */
export function deriveSessionSecret(adminToken: string): string {
  return createHmac('sha256', adminToken).update('tollway console session v1').digest('base64url');
}

function defaultConsoleDir(): string | null {
  try {
    return path.join(path.dirname(require.resolve('@tollway/console/package.json')), 'dist');
  } catch {
    return null;
  }
}
