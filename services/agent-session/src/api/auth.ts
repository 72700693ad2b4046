import type { NextFunction, Request, Response } from 'express';
import { sessionErrors } from './session-errors';

/** Resolves a bearer token to its organization and role; `createKeyAuthenticator` of `@tollway/accounts` fits. */
export interface OrgAuthenticator {
  authenticate(bearerToken: string | undefined): Promise<{ orgId: string; role?: string } | null>;
}

const BEARER = /^Bearer[ \t]+([^\s]+)[ \t]*$/i;

/**
 * Middleware: with an authenticator, requires `Authorization: Bearer <org key>` (401 otherwise)
 * and records the key's organization; without one (`--no-auth`) every caller is org null. An
 * organization's admin keys manage the organization (console, admin API) and are refused here as
 * they are on the gateway's inference API: agents are run with the keys that call models.
 */
export function authenticateOrg(authenticator: OrgAuthenticator | null) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    if (!authenticator) {
      res.locals.org = null;
      return next();
    }
    const match = BEARER.exec(req.headers.authorization ?? '');
    const principal = match ? await authenticator.authenticate(match[1]) : null;
    if (!principal || principal.role === 'admin') return next(sessionErrors.unauthorized());
    res.locals.org = principal.orgId;
    next();
  };
}

/** The caller's organization as set by authenticateOrg; null when auth is off. */
export function orgOf(res: Response): string | null {
  return (res.locals.org as string | null | undefined) ?? null;
}
