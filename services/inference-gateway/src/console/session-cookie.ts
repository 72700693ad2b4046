import { parseCookie } from 'cookie';
import type { Request, Response } from 'express';

/** The session cookie's name over plain HTTP. */
export const SESSION_COOKIE = 'tollway_console';
/**
 * Its name over TLS: the `__Host-` prefix makes the browser refuse it unless it is Secure, has
 * `Path=/` and no Domain, so no sibling subdomain can plant or overwrite it.
 */
export const SECURE_SESSION_COOKIE = `__Host-${SESSION_COOKIE}`;

/**
 * True when the browser reached us over TLS: directly, or through a proxy that says so. Trusting
 * `x-forwarded-proto` here can only make the cookie stricter (Secure), never weaker: a browser
 * cannot add the header to a victim's request, so it is the proxy's word on the victim's scheme.
 */
export function overTls(req: Request): boolean {
  const forwarded = req.headers['x-forwarded-proto'];
  const first = (Array.isArray(forwarded) ? forwarded[0] : forwarded)?.split(',')[0]?.trim().toLowerCase();
  return req.secure || first === 'https';
}

/**
 * The session cookie's value, if the request carries one under the name of its scheme. Over TLS
 * only `__Host-tollway_console` counts: a sibling host of the same site can plant the unprefixed
 * name, and accepting it would sign the victim in to the planter's session (login CSRF).
 */
export function readSessionCookie(req: Request): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  return parseCookie(header)[overTls(req) ? SECURE_SESSION_COOKIE : SESSION_COOKIE];
}

/** Sets the session cookie: HttpOnly, SameSite=Strict, Path=/, Secure over TLS, expiring with the session. */
export function writeSessionCookie(req: Request, res: Response, value: string, maxAgeMs: number): void {
  const secure = overTls(req);
  res.cookie(secure ? SECURE_SESSION_COOKIE : SESSION_COOKIE, value, {
    httpOnly: true,
    sameSite: 'strict',
    secure,
    path: '/',
    maxAge: maxAgeMs,
  });
}

/** Expires the session cookie (both names, whichever the browser holds). */
export function clearSessionCookie(req: Request, res: Response): void {
  const secure = overTls(req);
  res.clearCookie(SESSION_COOKIE, { httpOnly: true, sameSite: 'strict', secure, path: '/' });
  if (secure) res.clearCookie(SECURE_SESSION_COOKIE, { httpOnly: true, sameSite: 'strict', secure, path: '/' });
}

/**
 * True when the request's `Origin` (sent by browsers on every state-changing fetch) is this
 * host, or absent (non-browser clients). A cross-site page cannot forge it.
 */
export function sameOrigin(req: Request): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}
