import { z } from 'zod';

/**
 * The admin API of the gateway (`/admin/v1`, guarded by `Authorization: Bearer <ADMIN_TOKEN>`):
 * organizations, their API keys and their usage. Money is in USD.
 */

/** Organization ids: letters, digits, `_` and `-`, up to 64 characters. */
export const OrganizationId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1-64 letters, digits, _ or -');
export type OrganizationId = z.infer<typeof OrganizationId>;

const budget = z.number().int().min(0).max(1e12);

/** The three per-minute budgets: capacity of the organization's token buckets. */
export const Budgets = z.strictObject({
  requests: budget,
  input_tokens: budget,
  output_tokens: budget,
});
export type Budgets = z.infer<typeof Budgets>;

/** Body of `POST /admin/v1/organizations`; `id` is generated when absent. */
export const CreateOrganizationRequest = z.strictObject({
  id: OrganizationId.optional(),
  name: z.string().min(1).max(200),
  budgets: Budgets,
  /** Initial credit, USD. */
  credit: z.number().min(0).max(1e12).default(0),
});
export type CreateOrganizationRequest = z.infer<typeof CreateOrganizationRequest>;

/** Body of `PATCH /admin/v1/organizations/{org_id}`: any of name, budgets, credit top-up. */
export const UpdateOrganizationRequest = z
  .strictObject({
    name: z.string().min(1).max(200).optional(),
    budgets: Budgets.partial().optional(),
    /** USD added to the balance; negative to correct it. */
    credit_top_up: z.number().min(-1e12).max(1e12).optional(),
  })
  .refine((body) => body.name !== undefined || body.budgets !== undefined || body.credit_top_up !== undefined, {
    message: 'give at least one of name, budgets, credit_top_up',
  });
export type UpdateOrganizationRequest = z.infer<typeof UpdateOrganizationRequest>;

export const Organization = z.object({
  object: z.literal('organization'),
  id: OrganizationId,
  name: z.string(),
  budgets: Budgets,
  /** Credit balance, USD; may dip below zero by the spend of requests that were in flight. */
  credit: z.number(),
  /** Unix seconds. */
  created: z.number().int(),
});
export type Organization = z.infer<typeof Organization>;

export const OrganizationList = z.object({ object: z.literal('list'), data: z.array(Organization) });
export type OrganizationList = z.infer<typeof OrganizationList>;

/** Body of `POST /admin/v1/organizations/{org_id}/keys`. */
export const CreateApiKeyRequest = z.strictObject({ name: z.string().min(1).max(200).optional() });
export type CreateApiKeyRequest = z.infer<typeof CreateApiKeyRequest>;

/** A key as listed: never the key itself. */
export const ApiKey = z.object({
  object: z.literal('api_key'),
  id: z.string(),
  organization_id: OrganizationId,
  name: z.string().nullable(),
  /** The key with all but its last four characters hidden, e.g. `tw-…x9Qz`. */
  redacted: z.string(),
  /** Unix seconds. */
  created: z.number().int(),
  /** Unix seconds, or null while the key is live. */
  revoked_at: z.number().int().nullable(),
});
export type ApiKey = z.infer<typeof ApiKey>;

/** The answer to creating a key: the only time the plaintext `key` is shown. */
export const CreatedApiKey = ApiKey.extend({ key: z.string() });
export type CreatedApiKey = z.infer<typeof CreatedApiKey>;

export const ApiKeyList = z.object({ object: z.literal('list'), data: z.array(ApiKey) });
export type ApiKeyList = z.infer<typeof ApiKeyList>;

/** Answer to a delete. */
export const DeletedOrganization = z.object({
  object: z.literal('organization.deleted'),
  id: OrganizationId,
  deleted: z.literal(true),
});
export type DeletedOrganization = z.infer<typeof DeletedOrganization>;

export const UsageCounters = z.object({
  requests: z.number().int(),
  input_tokens: z.number().int(),
  output_tokens: z.number().int(),
  /** USD. */
  spend: z.number(),
});
export type UsageCounters = z.infer<typeof UsageCounters>;

/** `GET /admin/v1/organizations/{org_id}/usage`: the last hour (or `?minutes=`), in total, per model, per minute. */
export const OrganizationUsage = z.object({
  object: z.literal('organization.usage'),
  organization_id: OrganizationId,
  /** Unix seconds: start of the first minute covered, end of the last. */
  start: z.number().int(),
  end: z.number().int(),
  totals: UsageCounters,
  by_model: z.array(UsageCounters.extend({ model: z.string() })),
  /** Minutes with traffic, oldest first; `minute` is the minute's start in unix seconds. */
  by_minute: z.array(UsageCounters.extend({ minute: z.number().int() })),
});
export type OrganizationUsage = z.infer<typeof OrganizationUsage>;

/** Query of the usage endpoint. */
export const UsageQuery = z.object({ minutes: z.coerce.number().int().min(1).max(120).default(60) });
export type UsageQuery = z.infer<typeof UsageQuery>;
