import type { Redis } from 'ioredis';
import { AccountStore } from './account-store';
import type { Budgets } from './account.types';

/** Id of the quickstart's organization. */
export const DEV_ORG_ID = 'dev';

/** Budgets of the dev organization: generous enough never to get in the way of local work. */
export const DEV_BUDGETS: Budgets = { requests: 100_000, input_tokens: 100_000_000, output_tokens: 100_000_000 };

/** Credit of a new dev organization, USD. */
export const DEV_CREDIT_USD = 1_000_000;

/** Options of ensureDevOrganization. */
export interface DevOrganizationOptions {
  redis: Redis;
  prefix: string;
  /** The plaintext dev key (config `DEV_API_KEY`): `tw-` and 32+ base64url characters. */
  key: string;
}

/**
 * Makes sure the `dev` organization exists (created with DEV_BUDGETS and DEV_CREDIT_USD; an
 * existing one is left as it is) and that `key` is registered to it. Safe to run on every start.
 */
export async function ensureDevOrganization(
  options: DevOrganizationOptions,
): Promise<{ orgId: string; keyId: string }> {
  const store = new AccountStore({ redis: options.redis, prefix: options.prefix });
  if (!(await store.getOrganization(DEV_ORG_ID))) {
    try {
      // Made again after an operator deleted it: what the old one left is the same developer's.
      await store.createOrganization(
        { id: DEV_ORG_ID, name: 'Development', budgets: DEV_BUDGETS, credit: DEV_CREDIT_USD },
        { reuseDeletedId: true },
      );
    } catch (err) {
      // Another replica created it first: that is the outcome we wanted.
      if (!(await store.getOrganization(DEV_ORG_ID))) throw err;
    }
  }
  const registered = await store.registerKey(DEV_ORG_ID, options.key, 'dev');
  if (!registered) throw new Error('The dev organization disappeared while its key was being registered.');
  return { orgId: DEV_ORG_ID, keyId: registered.id };
}
