import {
  redactApiKey,
  type ApiKeyInfo,
  type CreatedApiKey as StoredCreatedKey,
  type Organization as StoredOrganization,
} from '@tollway/accounts';
import type { ApiKey, CreatedApiKey, Organization } from '@tollway/contracts';

/** Shapes of the admin API's answers, from the account store's records. */

/** An organization as the admin API shows it. */
export function organizationView(org: StoredOrganization): Organization {
  return {
    object: 'organization',
    id: org.id,
    name: org.name,
    budgets: org.budgets,
    credit: org.credit,
    created: org.created,
  };
}

/** A key as listed: never the key itself. */
export function apiKeyView(key: ApiKeyInfo): ApiKey {
  return {
    object: 'api_key',
    id: key.id,
    organization_id: key.org_id,
    name: key.name,
    redacted: redactApiKey(key.last4),
    created: key.created,
    revoked_at: key.revoked_at,
  };
}

/** A key just created, with its plaintext (shown this once). */
export function createdApiKeyView(key: StoredCreatedKey): CreatedApiKey {
  return { ...apiKeyView(key), key: key.key };
}
