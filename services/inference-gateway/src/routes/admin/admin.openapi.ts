import { z } from 'zod';
import {
  ApiKey,
  ApiKeyList,
  CreateApiKeyRequest,
  CreatedApiKey,
  CreateOrganizationRequest,
  DeletedOrganization,
  ModelStatusList,
  Organization,
  OrganizationList,
  OrganizationUsage,
  UpdateOrganizationRequest,
  type InferenceOpenApiOptions,
  type OpenApiOperation,
  type OpenApiPathItem,
  type OpenApiResponse,
} from '@tollway/contracts';
import { ADMIN_BASE_PATH } from './admin.router';

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (description: string, schema: string): OpenApiResponse => ({
  description,
  content: { 'application/json': { schema: ref(schema) } },
});
const error = (description: string): OpenApiResponse => json(description, 'ErrorResponse');
const body = (schema: string) => ({ required: true, content: { 'application/json': { schema: ref(schema) } } });
const pathParam = (name: string, description: string) => ({
  name,
  in: 'path' as const,
  required: true,
  description,
  schema: { type: 'string' },
});
const ORG = pathParam('org_id', 'Organization id.');
const KEY = pathParam('key_id', 'API key id.');
const COMMON = {
  '401': error('Missing or wrong admin token, admin key or console session (no `code`).'),
  '503': error(
    'Redis is unreachable or did not answer in time (`service_unavailable`, `retry-after`): retry. A write may have been applied; send a credit top-up again with its `Idempotency-Key`.',
  ),
};
const OPERATOR_ONLY = error('Operator-only: an organization admin called it (`permission_denied`).');
const CSRF = 'Cookie-authenticated (console) calls must send `x-csrf-token`; 403 `csrf_failed` otherwise.';
const NOT_FOUND = error('No such organization (`organization_not_found`) or key (`api_key_not_found`).');
const INVALID = error('Body or query does not fit the schema (`invalid_request`, `param` names the field).');

const SESSION_LIMITS =
  '`session_limits` (sessions held, turns running at once, turns waiting at once, turn weight) are enforced by the ' +
  'session service; each null (or left out) falls back to its configuration (`ORG_MAX_SESSIONS`, ' +
  '`ORG_MAX_RUNNING_TURNS`, `ORG_MAX_WAITING_TURNS`, `ORG_TURN_WEIGHT`). An update sets any subset; null puts one ' +
  'back to the default. The session service applies a change at once (it follows the update on `orgs:changed`).';
const READ_SHOWS =
  "Reads show each bucket's balance now (`balances`) and the live counts on the session service (`turns`: " +
  'sessions held, turns running, turns waiting), beside `session_limits`.';

const REUSED_KEY = error(
  'The `Idempotency-Key` already made another request for this organization (`idempotency_key_reused`).',
);

/** The optional `Idempotency-Key` header of a write that may be sent again. */
function idempotencyKeyHeader(what: string) {
  return {
    name: 'Idempotency-Key',
    in: 'header' as const,
    required: false,
    description: `${what} 1-255 printable ASCII characters.`,
    schema: { type: 'string', minLength: 1, maxLength: 255 },
  };
}

function op(operationId: string, summary: string, rest: Omit<OpenApiOperation, 'operationId' | 'summary' | 'tags'>) {
  const operation: OpenApiOperation = { operationId, summary, tags: ['admin'], ...rest };
  operation.responses = { ...operation.responses, ...COMMON };
  return operation;
}

/** Schemas of the admin API as OpenAPI components (request shapes as input, answers as output). */
function adminSchemas(): Record<string, Record<string, unknown>> {
  const convert = (schema: z.ZodType, io: 'input' | 'output') => {
    const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, {
      target: 'draft-2020-12',
      io,
      unrepresentable: 'any',
    });
    return rest as Record<string, unknown>;
  };
  return {
    CreateOrganizationRequest: convert(CreateOrganizationRequest, 'input'),
    UpdateOrganizationRequest: convert(UpdateOrganizationRequest, 'input'),
    CreateApiKeyRequest: convert(CreateApiKeyRequest, 'input'),
    Organization: convert(Organization, 'output'),
    OrganizationList: convert(OrganizationList, 'output'),
    DeletedOrganization: convert(DeletedOrganization, 'output'),
    ApiKey: convert(ApiKey, 'output'),
    CreatedApiKey: convert(CreatedApiKey, 'output'),
    ApiKeyList: convert(ApiKeyList, 'output'),
    OrganizationUsage: convert(OrganizationUsage, 'output'),
    ModelStatusList: convert(ModelStatusList, 'output'),
  };
}

/** The admin API's paths and schemas, for the gateway's `GET /openapi.json` (see buildInferenceOpenApi). */
export function adminOpenApi(): InferenceOpenApiOptions {
  // The document's default server is `/v1`; admin paths override it and are written in full.
  const servers = [
    {
      url: '/',
      description:
        'The admin API; needs `Authorization: Bearer <ADMIN_TOKEN>` (operator), an organization admin key (its own ' +
        'organization only), or a console session cookie. ' +
        CSRF,
    },
  ];
  const A = ADMIN_BASE_PATH;
  const paths: Record<string, OpenApiPathItem> = {
    [`${A}/organizations`]: {
      servers,
      post: op('createOrganization', 'Create an organization (operator-only)', {
        description: SESSION_LIMITS,
        parameters: [
          idempotencyKeyHeader(
            'Creates the organization once: without an `id`, the key names it, and the same create sent again under the same key within 24 hours changes nothing and answers 201 with `idempotent-replayed: true` and the organization as it is now.',
          ),
        ],
        requestBody: body('CreateOrganizationRequest'),
        responses: {
          '201': json('The new organization (or, replayed, the organization as it is now).', 'Organization'),
          '400': INVALID,
          '403': OPERATOR_ONLY,
          '404': error('Replayed, but the organization the key created was deleted since (`organization_not_found`).'),
          '409': error(
            "The id is taken (`organization_exists`), or was a deleted organization's (`organization_id_retired`: ids are not given out again).",
          ),
          '422': REUSED_KEY,
        },
      }),
      get: op('listOrganizations', 'List organizations (operator-only)', {
        description: READ_SHOWS,
        responses: { '200': json('Every organization.', 'OrganizationList'), '403': OPERATOR_ONLY },
      }),
    },
    [`${A}/organizations/{org_id}`]: {
      servers,
      get: op('getOrganization', 'Get an organization', {
        description: READ_SHOWS,
        parameters: [ORG],
        responses: { '200': json('The organization.', 'Organization'), '404': NOT_FOUND },
      }),
      patch: op('updateOrganization', 'Update name, budgets or session limits, or top up credit (operator-only)', {
        description: SESSION_LIMITS,
        parameters: [
          ORG,
          idempotencyKeyHeader(
            'Applies the update once: the same update sent again under the same key within 24 hours changes nothing and answers 200 with `idempotent-replayed: true` and the organization as it is now. Send one (a UUID) with every credit top-up, so a top-up whose answer was lost can be sent again.',
          ),
        ],
        requestBody: body('UpdateOrganizationRequest'),
        responses: {
          '200': json('The updated organization (or, replayed, the organization as it is now).', 'Organization'),
          '400': INVALID,
          '403': OPERATOR_ONLY,
          '404': NOT_FOUND,
          '422': REUSED_KEY,
        },
      }),
      delete: op('deleteOrganization', 'Delete an organization and revoke its keys (operator-only)', {
        parameters: [ORG],
        responses: { '200': json('Deleted.', 'DeletedOrganization'), '403': OPERATOR_ONLY, '404': NOT_FOUND },
      }),
    },
    [`${A}/organizations/{org_id}/keys`]: {
      servers,
      post: op('createApiKey', 'Create an API key (the plaintext is shown only in this answer)', {
        parameters: [ORG],
        requestBody: { ...body('CreateApiKeyRequest'), required: false },
        responses: {
          '201': json('The new key, with `key`.', 'CreatedApiKey'),
          '400': INVALID,
          '404': NOT_FOUND,
          '409': error(
            'The organization holds `MAX_KEYS_PER_ORGANIZATION` keys already, all live (`key_limit_reached`); at the cap a revoked key gives its place to the new one.',
          ),
        },
      }),
      get: op('listApiKeys', 'List API keys, live and revoked', {
        parameters: [ORG],
        responses: { '200': json('The keys, redacted.', 'ApiKeyList'), '404': NOT_FOUND },
      }),
    },
    [`${A}/organizations/{org_id}/keys/{key_id}`]: {
      servers,
      delete: op('revokeApiKey', 'Revoke an API key (every replica refuses it within a second)', {
        parameters: [ORG, KEY],
        responses: { '200': json('The revoked key.', 'ApiKey'), '404': NOT_FOUND },
      }),
    },
    [`${A}/organizations/{org_id}/usage`]: {
      servers,
      get: op('getOrganizationUsage', 'Usage: requests, tokens and spend, per model and per minute', {
        parameters: [
          ORG,
          {
            name: 'minutes',
            in: 'query',
            required: false,
            description: 'How many minutes back, 1-120; default 60.',
            schema: { type: 'integer', minimum: 1, maximum: 120, default: 60 },
          },
        ],
        responses: { '200': json('Usage of the period.', 'OrganizationUsage'), '400': INVALID, '404': NOT_FOUND },
      }),
    },
    [`${A}/models`]: {
      servers,
      get: op('listModelStatus', 'The model catalog with engine kind, replica health, capacity in use and prices', {
        responses: { '200': json('Every catalog model.', 'ModelStatusList') },
      }),
    },
  };
  return { extraPaths: paths, extraSchemas: adminSchemas() };
}
