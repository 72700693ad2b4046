import {
  redactApiKey,
  type ApiKeyInfo,
  type BucketBalances,
  type CreatedApiKey as StoredCreatedKey,
  type Organization as StoredOrganization,
  type OrganizationTurns,
  type SessionLimits as StoredSessionLimits,
} from '@tollway/accounts';
import type { ApiKey, CreatedApiKey, Organization, SessionLimitsUpdate } from '@tollway/contracts';

/** Shapes of the admin API's answers, from the account store's records (and requests, to the store's). */

/**
 * An organization as the admin API shows it, with its buckets' balances and its live counts on the
 * session service when given (reads).
 */
export function organizationView(
  org: StoredOrganization,
  live?: { balances: BucketBalances | null; turns: OrganizationTurns },
): Organization {
  const limits = org.sessionLimits;
  const view: Organization = {
    object: 'organization',
    id: org.id,
    name: org.name,
    budgets: org.budgets,
    credit: org.credit,
    created: org.created,
    session_limits: {
      sessions: limits.sessions,
      running_turns: limits.runningTurns,
      waiting_turns: limits.waitingTurns,
      weight: limits.weight,
    },
  };
  if (live?.balances) view.balances = live.balances;
  if (live) view.turns = live.turns;
  return view;
}

/** The session limits of a create or update request, as the account store takes them (undefined when none). */
export function sessionLimitsOf(limits: SessionLimitsUpdate | undefined): Partial<StoredSessionLimits> | undefined {
  if (limits === undefined) return undefined;
  const given: Partial<StoredSessionLimits> = {};
  if (limits.sessions !== undefined) given.sessions = limits.sessions;
  if (limits.running_turns !== undefined) given.runningTurns = limits.running_turns;
  if (limits.waiting_turns !== undefined) given.waitingTurns = limits.waiting_turns;
  if (limits.weight !== undefined) given.weight = limits.weight;
  return given;
}

/** A key as listed: never the key itself. */
export function apiKeyView(key: ApiKeyInfo): ApiKey {
  return {
    object: 'api_key',
    id: key.id,
    organization_id: key.org_id,
    name: key.name,
    role: key.role,
    redacted: redactApiKey(key.last4),
    created: key.created,
    last_used_at: key.last_used_at,
    revoked_at: key.revoked_at,
  };
}

/** A key just created, with its plaintext (shown this once). */
export function createdApiKeyView(key: StoredCreatedKey): CreatedApiKey {
  return { ...apiKeyView(key), key: key.key };
}
