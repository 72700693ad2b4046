import { ServiceError, formatIssuePath } from '@tollway/service-kit';
import type { z } from 'zod';

/** The admin API's error table; the gateway's errorMiddleware writes them in the envelope. */

/** 401: missing or wrong admin token, admin key or session (no `code`, like the inference API's 401). */
export function invalidAdminToken(): ServiceError {
  return new ServiceError({
    status: 401,
    message:
      'Invalid admin credentials. Send "Authorization: Bearer <ADMIN_TOKEN>" or an organization admin key, or sign in to the console.',
  });
}

/** 400 `invalid_request`: a body or query that does not fit the admin schema; `param` names the field. */
export function invalidAdminRequest(error: z.ZodError): ServiceError {
  const issue = error.issues[0];
  const param = issue ? formatIssuePath(issue.path) : null;
  return new ServiceError({
    status: 400,
    code: 'invalid_request',
    param,
    message: issue ? `${param ?? 'body'}: ${issue.message}` : 'The request is not valid.',
    cause: error,
  });
}

/** 404 `not_found`: a path or method the admin API does not have. */
export function adminEndpointNotFound(method: string, path: string): ServiceError {
  return new ServiceError({
    status: 404,
    code: 'not_found',
    message: `Unknown admin endpoint '${method} ${path.slice(0, 200)}'. See /openapi.json for the admin API.`,
  });
}

/** 404 `organization_not_found`. */
export function organizationNotFound(orgId: string): ServiceError {
  return new ServiceError({
    status: 404,
    code: 'organization_not_found',
    param: 'org_id',
    message: `No organization '${orgId.slice(0, 64)}'.`,
  });
}

/** 404 `organization_not_found`: a create sent again under its `Idempotency-Key` after its organization was deleted. */
export function idempotentlyCreatedOrganizationDeleted(): ServiceError {
  return new ServiceError({
    status: 404,
    code: 'organization_not_found',
    param: 'Idempotency-Key',
    message: 'The organization this Idempotency-Key created has been deleted since.',
  });
}

/** 404 `api_key_not_found`. */
export function apiKeyNotFound(keyId: string): ServiceError {
  return new ServiceError({
    status: 404,
    code: 'api_key_not_found',
    param: 'key_id',
    message: `No API key '${keyId.slice(0, 64)}' in this organization.`,
  });
}

/** 409 `organization_exists`. */
export function organizationExists(orgId: string): ServiceError {
  return new ServiceError({
    status: 409,
    code: 'organization_exists',
    param: 'id',
    message: `An organization '${orgId}' already exists.`,
  });
}

/**
 * 409 `organization_id_retired`: the id was a deleted organization's. Ids are not given out again,
 * so a new organization never inherits what an old one left (sessions, usage, queued turns).
 */
export function organizationIdRetired(orgId: string): ServiceError {
  return new ServiceError({
    status: 409,
    code: 'organization_id_retired',
    param: 'id',
    message: `The id '${orgId}' belonged to a deleted organization; ids are not given out again. Choose another.`,
  });
}

/** 400 `invalid_request` on `Idempotency-Key`: not 1-255 printable ASCII characters. */
export function invalidIdempotencyKey(): ServiceError {
  return new ServiceError({
    status: 400,
    code: 'invalid_request',
    param: 'Idempotency-Key',
    message: 'Idempotency-Key: must be 1-255 printable ASCII characters.',
  });
}

/** 422 `idempotency_key_reused`: the key already made another request (create, update) for this organization. */
export function idempotencyKeyReused(): ServiceError {
  return new ServiceError({
    status: 422,
    code: 'idempotency_key_reused',
    param: 'Idempotency-Key',
    message:
      'This Idempotency-Key was used with another request for this organization within the last 24 hours. Use a new key for a new request.',
  });
}

/**
 * 409 `key_limit_reached`: the organization holds the most keys it may (`MAX_KEYS_PER_ORGANIZATION`),
 * all of them live: a revoked one would have given its place to the new key. Sending the request
 * again changes nothing until a key is revoked.
 */
export function keyLimitReached(orgId: string, limit: number): ServiceError {
  return new ServiceError({
    status: 409,
    code: 'key_limit_reached',
    param: null,
    message: `Organization '${orgId.slice(0, 64)}' holds ${limit} live API keys, the most one may. Revoke one to make room, or ask the operator to raise MAX_KEYS_PER_ORGANIZATION.`,
  });
}

/** 400 `credit_out_of_range`: a top-up would take the credit past CREDIT_LIMIT either way. */
export function creditOutOfRange(limit: number): ServiceError {
  return new ServiceError({
    status: 400,
    code: 'credit_out_of_range',
    param: 'credit_top_up',
    message: `This top-up would take the organization's credit past ${limit} USD either way (above ${limit} or below -${limit}); nothing was changed.`,
  });
}

/** 403 `permission_denied`: an organization admin called an operator-only endpoint. */
export function operatorOnlyEndpoint(): ServiceError {
  return new ServiceError({
    status: 403,
    code: 'permission_denied',
    message: 'Only the operator (ADMIN_TOKEN) may do this: organizations, budgets and credit are operator-only.',
  });
}

/** 403 `csrf_failed`: a cookie-authenticated change without this origin or the session's `x-csrf-token`. */
export function csrfRejected(): ServiceError {
  return new ServiceError({
    status: 403,
    code: 'csrf_failed',
    message: 'Missing or wrong x-csrf-token header, or a cross-origin request. Reload the console and try again.',
  });
}
