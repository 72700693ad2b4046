import { ServiceError } from '@tollway/service-kit';

/** The console's own errors (sign-in); the admin API's are in routes/admin/admin-errors.ts. */

/** 401 (no `code`, like every 401 here): neither the admin token nor a live organization admin key. */
export function signInFailed(): ServiceError {
  return new ServiceError({
    status: 401,
    message: 'Sign-in failed: use the admin token or an organization admin key (ordinary API keys cannot sign in).',
  });
}

/** 401: no live console session (signed out, expired, or its admin key was revoked). */
export function notSignedIn(): ServiceError {
  return new ServiceError({ status: 401, message: 'Not signed in to the console, or the session ended.' });
}

/** 429 `rate_limit_exceeded`: too many failed sign-ins from this address. */
export function signInRateLimited(retryAfterMs: number): ServiceError {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  return new ServiceError({
    status: 429,
    type: 'sign_in_attempts',
    code: 'rate_limit_exceeded',
    message: `Too many failed sign-ins from this address. Try again in ${seconds} s.`,
    headers: { 'retry-after': String(seconds), 'retry-after-ms': String(Math.ceil(retryAfterMs)) },
  });
}

/** 404 `not_found`: a console path (API or file) that does not exist. */
export function consoleEndpointNotFound(method: string, path: string): ServiceError {
  return new ServiceError({
    status: 404,
    code: 'not_found',
    message: `Nothing at '${method} /console${path.slice(0, 200)}'.`,
  });
}
