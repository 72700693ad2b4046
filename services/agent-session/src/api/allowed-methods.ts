import type { RequestHandler } from 'express';
import { sessionErrors } from './session-errors';

/** A path of the session API and the methods it serves (HEAD wherever GET is, as express does). */
export interface KnownPath {
  pattern: RegExp;
  allow: string;
  /** A method not allowed that its route refuses itself, with a more precise error. */
  refusedByRoute?: string;
}

// Case-insensitive, as express routes: `/HEALTH` is `/health`.

/** Paths open to anyone. `/metrics` is listed even when metrics are on their own port (then GET is 404). */
export const OPEN_PATHS: readonly KnownPath[] = [
  { pattern: /^\/(?:health|healthz|readyz|openapi\.json|metrics)\/?$/i, allow: 'GET, HEAD' },
];

/**
 * Paths behind the organization key; PUT of a session only with `--allow-custom-ids`, the events
 * of a session where the process serves them.
 */
export function sessionPaths(allowCustomIds: boolean, events = false): readonly KnownPath[] {
  return [
    ...(events ? [{ pattern: /^\/sessions\/[^/]+\/events\/?$/i, allow: 'GET, HEAD' }] : []),
    { pattern: /^\/sessions\/?$/i, allow: 'GET, HEAD, POST' },
    allowCustomIds
      ? { pattern: /^\/sessions\/[^/]+\/?$/i, allow: 'GET, HEAD, PUT, DELETE' }
      : // PUT is the spec's 405, `custom_ids_disabled`, answered by the route.
        { pattern: /^\/sessions\/[^/]+\/?$/i, allow: 'GET, HEAD, DELETE', refusedByRoute: 'PUT' },
    { pattern: /^\/sessions\/[^/]+\/messages\/?$/i, allow: 'GET, HEAD, POST' },
  ];
}

/**
 * A known path asked with a method it does not serve is 405 `method_not_allowed` with `Allow`
 * (as FastAPI-based agent servers answer), not the 404 of an unknown path; `OPTIONS` on a known
 * path is 204 with `Allow` and no body. Mounted ahead of the routes of `paths`: for the session
 * paths after authentication, so a caller without a key gets 401 whatever the method; the id is
 * not looked up.
 */
export function allowedMethods(paths: readonly KnownPath[]): RequestHandler {
  return (req, res, next) => {
    const known = paths.find((candidate) => candidate.pattern.test(req.path));
    if (!known) return next();
    if (req.method === 'OPTIONS') {
      res.status(204).setHeader('Allow', known.allow);
      res.end();
      return;
    }
    if (known.allow.split(', ').includes(req.method) || known.refusedByRoute === req.method) return next();
    next(sessionErrors.methodNotAllowed(req.method, req.path, known.allow));
  };
}
