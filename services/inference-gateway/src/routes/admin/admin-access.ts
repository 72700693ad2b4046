import { createHash, timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { AccountStore, KeyPrincipal } from '@tollway/accounts';
import type { ConsoleSessionRecord, ConsoleSessions } from '../../console/console-sessions';
import { readSessionCookie, sameOrigin } from '../../console/session-cookie';
import { csrfRejected, invalidAdminToken, operatorOnlyEndpoint, organizationNotFound } from './admin-errors';

/** Who is calling the admin API. */
export type AdminCaller = { role: 'operator' } | { role: 'organization_admin'; orgId: string; keyId: string };

/** Resolves an API key to its principal (the accounts KeyAuthenticator). */
export interface AdminKeyResolver {
  authenticate(bearerToken: string | undefined): Promise<KeyPrincipal | null>;
}

/** What the admin API accepts as credentials. */
export interface AdminAccessOptions {
  store: AccountStore;
  /** `ADMIN_TOKEN`: the operator. */
  adminToken: string;
  /** Resolves organization admin keys sent as bearer tokens; absent = only the admin token is accepted. */
  keys?: AdminKeyResolver;
  /** Console sessions (cookie); absent = no cookie sign-in. */
  sessions?: ConsoleSessions;
}

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Identifies the caller: `Authorization: Bearer <ADMIN_TOKEN>` is the operator; a bearer admin key
 * or a console session cookie is that organization's admin. A cookie-borne call that changes
 * state must also come from this origin and carry the session's CSRF token (`x-csrf-token`);
 * bearer calls need neither, as a browser never attaches them on its own. The caller lands in
 * `res.locals.adminCaller`; anything else is 401.
 */
export function authenticateAdminCaller(options: AdminAccessOptions) {
  const isAdminToken = adminTokenMatcher(options.adminToken);
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const header = req.headers.authorization;
    if (header !== undefined) {
      const token = BEARER.exec(header)?.[1];
      const caller = token === undefined ? null : await tokenCaller(token, isAdminToken, options.keys);
      if (!caller) throw invalidAdminToken();
      return setCaller(res, next, caller);
    }
    const session = options.sessions ? await options.sessions.read(readSessionCookie(req)) : null;
    if (!session || !options.sessions) throw invalidAdminToken();
    if (!SAFE_METHODS.has(req.method)) {
      if (!sameOrigin(req) || !options.sessions.checkCsrf(session, req.get('x-csrf-token'))) throw csrfRejected();
    }
    const caller = await sessionCaller(options.store, options.sessions, session);
    if (!caller) throw invalidAdminToken();
    setCaller(res, next, caller);
  };
}

/** True for the admin token; compares digests, so it takes the same time whatever the guess's length. */
export function adminTokenMatcher(adminToken: string): (token: string) => boolean {
  const expected = digest(adminToken);
  return (token) => timingSafeEqual(digest(token), expected);
}

/** The caller a bearer token stands for: the operator, an organization admin key, or null (ordinary keys included). */
export async function tokenCaller(
  token: string,
  isAdminToken: (token: string) => boolean,
  keys: AdminKeyResolver | undefined,
): Promise<AdminCaller | null> {
  if (isAdminToken(token)) return { role: 'operator' };
  const principal = await keys?.authenticate(token);
  if (principal?.role !== 'admin') return null;
  return { role: 'organization_admin', orgId: principal.orgId, keyId: principal.keyId };
}

/**
 * The caller of a live console session. An organization admin's session lasts only while the admin
 * key it was opened with does: once the key is revoked or its organization deleted (even by a
 * delete that died before revoking the key) the session is destroyed and null returned. An
 * operator's lasts only while the admin token it was opened with does, which ConsoleSessions.read
 * checks before a session gets here.
 */
export async function sessionCaller(
  store: AccountStore,
  sessions: ConsoleSessions,
  session: ConsoleSessionRecord,
): Promise<AdminCaller | null> {
  if (session.role === 'operator') return { role: 'operator' };
  const key = session.keyId ? await store.getKey(session.keyId) : null;
  // An organization deleted by a delete that died before revoking its keys leaves their records
  // unrevoked: its absence ends the session all the same.
  const orgGone = key !== null && (await store.getOrganization(key.org_id)) === null;
  if (!key || orgGone || key.revoked_at !== null || key.role !== 'admin' || key.org_id !== session.orgId) {
    await sessions.destroy(session.id);
    return null;
  }
  return { role: 'organization_admin', orgId: key.org_id, keyId: key.id };
}

function setCaller(res: Response, next: NextFunction, caller: AdminCaller): void {
  res.locals.adminCaller = caller;
  next();
}

/** The caller authenticateAdminCaller stored. */
export function adminCallerOf(res: Response): AdminCaller {
  return res.locals.adminCaller as AdminCaller;
}

/** Lets only the operator through (budgets, credit, creating, listing and deleting organizations): 403 otherwise. */
export function operatorOnly<P>(_req: Request<P>, res: Response, next: NextFunction): void {
  if (adminCallerOf(res).role !== 'operator') return next(operatorOnlyEndpoint());
  next();
}

/**
 * `router.param('orgId', …)`: an organization admin reaches only their own organization. Another
 * one is answered exactly like a missing one (404), so its existence does not leak either.
 */
export function requireOrgAccess(_req: Request, res: Response, next: NextFunction, orgId: string): void {
  const caller = adminCallerOf(res);
  if (caller.role === 'organization_admin' && caller.orgId !== orgId) return next(organizationNotFound(orgId));
  next();
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}
