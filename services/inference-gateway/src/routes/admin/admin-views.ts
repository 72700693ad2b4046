import {
  redactApiKey,
  type ApiKeyInfo,
  type BucketBalances,
  type CreatedApiKey as StoredCreatedKey,
  type Organization as StoredOrganization,
} from '@tollway/accounts';
import type { ApiKey, CreatedApiKey, Organization } from '@tollway/contracts';

/** Shapes of the admin API's answers, from the account store's records. */

/** An organization as the admin API shows it, with its buckets' balances when given. */
export function organizationView(org: StoredOrganization, balances?: BucketBalances | null): Organization {
  const view: Organization = {
    object: 'organization',
    id: org.id,
    name: org.name,
    budgets: org.budgets,
    credit: org.credit,
    created: org.created,
  };
  if (balances) view.balances = balances;
  return view;
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
