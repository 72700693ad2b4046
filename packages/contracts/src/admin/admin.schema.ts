import { z } from 'zod';

/**
 * The admin API of the gateway (`/admin/v1`): organizations, their API keys, their usage and the
 * model catalog. Money is in USD. Callers: the operator (`Authorization: Bearer <ADMIN_TOKEN>`) and
 * organization admins (`Authorization: Bearer <admin key>`, or a console session), who reach only
 * their own organization's keys and usage.
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

/**
 * A name people read in the console and the CLI: 1-200 characters, not only spaces, with no
 * control characters (they would break a terminal or a log line), no line or paragraph separators
 * (U+2028, U+2029: the same), no bidirectional formatting characters (an override such as U+202E
 * shows a name as other text than it is, the "Trojan Source" trick; Unicode's bidi algorithm still
 * lays out Arabic or Hebrew names without them), nothing invisible (two names that look alike, or
 * text hidden in a name: Unicode's default-ignorable code points, such as the zero-width space,
 * the word joiner, U+FEFF, the soft hyphen, the Hangul fillers and the tag characters, and the
 * blank braille pattern U+2800, which renders as a space but is not one; the joiners U+200C and
 * U+200D and the variation selectors stay, Persian and emoji need them, but only within such a
 * word or emoji, never next to ASCII or alone; other format characters, U+FFF9… among them, go too),
 * no noncharacters (U+FFFE,
 * U+FDD0…: not for interchange) and no lone surrogates (which no store keeps as they came: a name
 * is read back as it was written).
 */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const BIDI_FORMATTING = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/;
const INVISIBLE_OR_SEPARATOR =
  // eslint-disable-next-line no-misleading-character-class -- the joiners and selectors are listed one by one, to be let through
  /(?![\u200C\u200D\uFE00-\uFE0F\u{E0100}-\u{E01EF}])[\p{Default_Ignorable_Code_Point}\p{Cf}\p{Noncharacter_Code_Point}\u2028\u2029\u2800]/u;
/**
 * A joiner (U+200C, U+200D) first, last or next to an ASCII character, or a variation selector
 * first or after an ASCII letter: where no emoji or script needs one, and `Ac\u200Dme` would look
 * like `Acme`.
 */
const STRAY_JOINER =
  // eslint-disable-next-line no-control-regex -- ASCII, control characters included (refused anyway)
  /(?:^|[\u0000-\u007F])[\u200C\u200D]|[\u200C\u200D](?:$|[\u0000-\u007F])|(?:^|[A-Za-z])[\uFE00-\uFE0F\u{E0100}-\u{E01EF}]/u;
/** Something that shows: not a blank, joiner or variation selector. */
// eslint-disable-next-line no-misleading-character-class -- the joiners and selectors are listed one by one
const VISIBLE = /[^\s\u200C\u200D\uFE00-\uFE0F\u{E0100}-\u{E01EF}]/u;
export const DisplayName = z
  .string()
  .min(1)
  .max(200)
  .refine((name) => VISIBLE.test(name), { message: 'must not be only whitespace or joiners' })
  // eslint-disable-next-line no-control-regex -- control characters are what is refused
  .refine((name) => !/[\u0000-\u001f\u007f-\u009f]/.test(name), { message: 'must not contain control characters' })
  .refine((name) => !BIDI_FORMATTING.test(name), { message: 'must not contain bidirectional formatting characters' })
  .refine((name) => !INVISIBLE_OR_SEPARATOR.test(name), {
    message:
      'must not contain line separators, noncharacters or invisible characters (U+200B, U+2060, U+FEFF, U+3164, …)',
  })
  .refine((name) => !STRAY_JOINER.test(name), {
    message: 'must not hold a joiner or variation selector outside an emoji or a word of a script that needs it',
  })
  .refine((name) => !LONE_SURROGATE.test(name), { message: 'must be well-formed Unicode (no lone surrogates)' });

/** A session limit: an integer from 1 to `max`, or null for the session service's configured default. */
const sessionLimit = (max: number) => z.number().int().min(1).max(max).nullable();

/**
 * The organization's limits on the session service, which enforces them; each null falls back to
 * the session service's configuration (`ORG_MAX_SESSIONS`, `ORG_MAX_RUNNING_TURNS`,
 * `ORG_MAX_WAITING_TURNS`, `ORG_TURN_WEIGHT`). The bounds are @tollway/accounts' SESSION_LIMIT_BOUNDS.
 */
export const SessionLimits = z.object({
  /** Sessions held at once, 1-10^9. */
  sessions: sessionLimit(1_000_000_000),
  /** Turns running at once, 1-10^6; more wait without holding an agent process. */
  running_turns: sessionLimit(1_000_000),
  /** Turns waiting at once, 1-10^9; past it, a message is refused (429). */
  waiting_turns: sessionLimit(1_000_000_000),
  /** Share of dispatch while other organizations have turns waiting, 1-1000: `w` turns for every 1 of weight 1. */
  weight: sessionLimit(1000),
});
export type SessionLimits = z.infer<typeof SessionLimits>;

/**
 * Session limits as a create or update gives them: any subset (strict: a misspelt limit is refused,
 * not ignored); null puts one back to the default.
 */
export const SessionLimitsUpdate = z.strictObject(SessionLimits.shape).partial();
export type SessionLimitsUpdate = z.infer<typeof SessionLimitsUpdate>;

/** Body of `POST /admin/v1/organizations`; `id` is generated when absent. */
export const CreateOrganizationRequest = z.strictObject({
  id: OrganizationId.optional(),
  name: DisplayName,
  budgets: Budgets,
  /** Initial credit, USD. */
  credit: z.number().min(0).max(1e12).default(0),
  /** Limits on the session service; a missing or null one is its default. */
  session_limits: SessionLimitsUpdate.optional(),
});
export type CreateOrganizationRequest = z.infer<typeof CreateOrganizationRequest>;

/** Body of `PATCH /admin/v1/organizations/{org_id}`: any of name, budgets, credit top-up, session limits. */
export const UpdateOrganizationRequest = z
  .strictObject({
    name: DisplayName.optional(),
    budgets: Budgets.partial().optional(),
    /** USD added to the balance; negative to correct it. */
    credit_top_up: z.number().min(-1e12).max(1e12).optional(),
    /** Any of the session limits; null puts one back to the session service's default. */
    session_limits: SessionLimitsUpdate.optional(),
  })
  .refine(
    (body) =>
      body.name !== undefined ||
      body.budgets !== undefined ||
      body.credit_top_up !== undefined ||
      body.session_limits !== undefined,
    { message: 'give at least one of name, budgets, credit_top_up, session_limits' },
  );
export type UpdateOrganizationRequest = z.infer<typeof UpdateOrganizationRequest>;

/** One per-minute token bucket right now. */
export const BucketBalance = z.object({
  /** The per-minute budget. */
  limit: z.number().int(),
  /** What is left now, refilled to this moment. */
  remaining: z.number().int(),
});
export type BucketBalance = z.infer<typeof BucketBalance>;

/** An organization's live counts on the session service. */
export const OrganizationTurns = z.object({
  /** Sessions it holds. */
  sessions: z.number().int(),
  /** Its turns running now. */
  running: z.number().int(),
  /** Its turns waiting to run. */
  waiting: z.number().int(),
});
export type OrganizationTurns = z.infer<typeof OrganizationTurns>;

export const Organization = z.object({
  object: z.literal('organization'),
  id: OrganizationId,
  name: z.string(),
  budgets: Budgets,
  /** Credit balance, USD; may dip below zero by the spend of requests that were in flight. */
  credit: z.number(),
  /** Unix seconds. */
  created: z.number().int(),
  /** Each bucket's current balance (on reads; absent from the answer to a create). */
  balances: z.object({ requests: BucketBalance, input_tokens: BucketBalance, output_tokens: BucketBalance }).optional(),
  /** Limits on the session service; each null is its configured default. */
  session_limits: SessionLimits,
  /** Live counts on the session service (on reads; absent from the answers to create and update). */
  turns: OrganizationTurns.optional(),
});
export type Organization = z.infer<typeof Organization>;

export const OrganizationList = z.object({ object: z.literal('list'), data: z.array(Organization) });
export type OrganizationList = z.infer<typeof OrganizationList>;

/**
 * What a key may do: `standard` keys call the inference API; `admin` keys sign in to the console and
 * manage their own organization's keys (they cannot call the inference API).
 */
export const ApiKeyRole = z.enum(['standard', 'admin']);
export type ApiKeyRole = z.infer<typeof ApiKeyRole>;

/** Body of `POST /admin/v1/organizations/{org_id}/keys`. */
export const CreateApiKeyRequest = z.strictObject({
  name: DisplayName.optional(),
  /** Default `standard`. */
  role: ApiKeyRole.default('standard'),
});
export type CreateApiKeyRequest = z.infer<typeof CreateApiKeyRequest>;

/** A key as listed: never the key itself. */
export const ApiKey = z.object({
  object: z.literal('api_key'),
  id: z.string(),
  organization_id: OrganizationId,
  name: z.string().nullable(),
  role: ApiKeyRole,
  /** The key with all but its last four characters hidden, e.g. `tw-…x9Qz`. */
  redacted: z.string(),
  /** Unix seconds. */
  created: z.number().int(),
  /** Unix seconds of the latest use, to the minute; null when never used. */
  last_used_at: z.number().int().nullable(),
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

/**
 * An `Idempotency-Key` of the admin API's writes: printable ASCII, as Stripe's (a UUID, say), at
 * most 255 characters. The CLI takes its `--idempotency-key` by the same rule.
 */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x20-\x7e]{1,255}$/;

/**
 * Query of the usage endpoint: `minutes`, 1-120, default 60, written as decimal digits. A query
 * value is text, and coercing it with Number() would read `?minutes[]=5` (an array), `0x10`, `1e1`
 * and ` 5 ` as numbers; each is refused instead, as a typo the caller should hear about.
 */
export const UsageQuery = z.object({
  minutes: z
    .string()
    .regex(/^[0-9]{1,6}$/, 'must be a whole number of minutes from 1 to 120, in decimal digits')
    .optional()
    .transform((text) => (text === undefined ? 60 : Number(text)))
    .pipe(z.number().int().min(1).max(120)),
});
export type UsageQuery = z.infer<typeof UsageQuery>;

/** One engine replica of a model as the admin API shows it (never its address or key). */
export const ModelReplicaStatus = z.object({
  /** Position in the catalog's replica list, from 1. */
  index: z.number().int(),
  /** True when the replica answered the readiness probe just now. */
  healthy: z.boolean(),
  /** Requests this gateway replica has in flight to it (engines with remote replicas). */
  in_flight: z.number().int().optional(),
  /** The load routing sees on it: the engine's running + waiting requests when its metrics are fresh, else `in_flight`. */
  load: z.number().optional(),
  /** Where `load` comes from: the engine's vLLM metrics (scraped) or this gateway's in-flight count. */
  load_source: z.enum(['engine_metrics', 'in_flight']).optional(),
  /** The engine's KV cache usage, 0–1, when its metrics are fresh; null otherwise. */
  kv_cache_usage: z.number().nullable().optional(),
});
export type ModelReplicaStatus = z.infer<typeof ModelReplicaStatus>;

/** `GET /admin/v1/models` item: a catalog model with its engine, health, capacity and prices. */
export const ModelStatus = z.object({
  object: z.literal('model.status'),
  id: z.string(),
  owned_by: z.string(),
  /** The engine kind of the catalog entry, e.g. `openai-compatible` or `simulated`. */
  engine_kind: z.string(),
  replicas: z.array(ModelReplicaStatus),
  /** How requests pick a replica, as this gateway replica saw it since start; absent for single in-process engines. */
  routing: z
    .object({
      /** `least_outstanding`, `prefix_cache` or `sticky` (catalog `engine.routing.policy`). */
      policy: z.string(),
      /** Decisions by outcome since start. */
      decisions: z.record(z.string(), z.number().int()),
      /** prefix_cache: prompt blocks found on the chosen replica over blocks looked up; null before any or for other policies. */
      prefix_index_hit_rate: z.number().nullable(),
      /** prefix_cache: block hashes held in the index. */
      prefix_index_entries: z.number().int(),
      /** prefix_cache with `share_index`: block hashes published to, and received from, the other gateway replicas since start. */
      prefix_index_shared: z.object({ sent: z.number().int(), received: z.number().int() }),
    })
    .optional(),
  /** Concurrent requests the model takes across the cluster; null = unlimited. */
  capacity: z.number().int().nullable(),
  /** Capacity leases held now across every gateway replica (including blocks held for local admission). */
  capacity_in_use: z.number().int(),
  /** USD per million tokens. */
  price_per_million: z.object({ input: z.number(), output: z.number() }),
});
export type ModelStatus = z.infer<typeof ModelStatus>;

export const ModelStatusList = z.object({ object: z.literal('list'), data: z.array(ModelStatus) });
export type ModelStatusList = z.infer<typeof ModelStatusList>;

/** Body of `POST /console/api/session`: the admin token, or an organization admin key. */
export const ConsoleSignInRequest = z.strictObject({
  token: z.string().min(1, 'enter the admin token or an organization admin key').max(512),
});
export type ConsoleSignInRequest = z.infer<typeof ConsoleSignInRequest>;

/** The console session (`GET`/`POST /console/api/session`). The session itself is in an HttpOnly cookie. */
export const ConsoleSession = z.object({
  object: z.literal('console.session'),
  /** `operator` (signed in with ADMIN_TOKEN) or `organization_admin` (with an admin key). */
  role: z.enum(['operator', 'organization_admin']),
  /** The organization of an organization admin; null for the operator. */
  organization_id: OrganizationId.nullable(),
  /** Send back as the `x-csrf-token` header on every state-changing call. */
  csrf_token: z.string(),
  /** Unix seconds. */
  expires_at: z.number().int(),
});
export type ConsoleSession = z.infer<typeof ConsoleSession>;
