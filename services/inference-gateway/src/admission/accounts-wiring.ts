import type { Router } from 'express';
import type { Redis } from 'ioredis';
import {
  createAccountStore,
  createKeyAuthenticator,
  ensureDevOrganization,
  isWellFormedApiKey,
} from '@tollway/accounts';
import { OrganizationId, type InferenceOpenApiOptions } from '@tollway/contracts';
import { replicaWaitOf, type Logger } from '@tollway/service-kit';
import type { CatalogStore } from '../catalog/catalog-store';
import type { GatewayConfig } from '../config';
import { wireConsole } from '../console/console-wiring';
import type { EngineRegistry } from '../engines';
import { adminOpenApi } from '../routes/admin/admin.openapi';
import { buildAdminRouter } from '../routes/admin/admin.router';
import { cannotActForOrganization } from '../errors';
import type { Admission, AdmissionStats, Authenticator, Principal } from './admission.types';
import { ConfigKeyAuthenticator } from './config-key.authenticator';
import { admissionUnavailable } from './admission-errors';
import { RedisAdmission } from './redis-admission';
import { UnmeteredAdmission } from './unmetered.admission';

/** How long admission's connection waits for a reply before ioredis drops it (see wireAccounts). */
export const ADMISSION_REPLY_DEADLINE_MS = 10_000;

/** What the gateway gets from the accounts in Redis: authentication, admission, the admin API. */
export interface AccountsWiring {
  authenticator: Authenticator;
  admission: Admission;
  /** Mounted at `/admin/v1`; absent when `ADMIN_TOKEN` is unset. */
  adminRouter?: Router;
  /** The key-management console, mounted at `/console`; absent when `ADMIN_TOKEN` is unset. */
  consoleRouter?: Router;
  openApi: InferenceOpenApiOptions;
  /** What admission holds now (slices, leases), for the metrics. */
  admissionStats: () => AdmissionStats;
  /** Writes the settlements still queued and stops listening for key revocations. */
  close(): Promise<void>;
}

/**
 * Builds the Redis-backed authenticator and admission, the admin API (when ADMIN_TOKEN is set),
 * and registers the quickstart's dev key (when DEV_API_KEY is set). The key itself is never logged.
 */
export async function wireAccounts(
  config: GatewayConfig,
  redis: Redis,
  logger: Logger,
  models?: { catalog: CatalogStore; engines: EngineRegistry },
): Promise<AccountsWiring> {
  const prefix = config.redisPrefix;
  const keys = createKeyAuthenticator({ redis, prefix, cacheTtlMs: config.authCacheTtlMs });
  const subscriber = config.admissionSlices ? redis.duplicate({ connectionName: 'gateway:org-changes' }) : undefined;
  // Admission's own connection, with a reply timeout far past the fail-fast client's: the admit
  // batcher times requests out itself (REDIS_COMMAND_TIMEOUT_MS), and gives back what a script
  // that ran after all took (see admit-batcher.ts); ioredis's timeout drops the answer, so it only
  // bounds how long a dead connection (half-open, no reset) holds admissions and settlements.
  const admissionRedis = redis.duplicate({
    connectionName: 'gateway:admission',
    commandTimeout: ADMISSION_REPLY_DEADLINE_MS,
  });
  const metered = new RedisAdmission({
    redis: admissionRedis,
    prefix,
    leaseMs: config.capacityLeaseMs,
    capacityRetryAfterMs: config.capacityRetryAfterMs,
    defaultOutputReservationTokens: config.defaultOutputReservationTokens,
    logger,
    localQuota: config.admissionSlices ? { useMs: config.admissionSliceMs } : null,
    subscriber,
    settlementReplicaWait: replicaWaitOf(config),
  });
  // Static operator keys from API_KEYS (tests, private deployments) stay usable, unmetered;
  // every organization key is metered. Service keys act for the organization a request names.
  const configKeys = staticKeys(config.apiKeys, 'config');
  const serviceKeys = staticKeys(config.serviceApiKeys, 'service');
  if (config.serviceApiKeys.some((key) => config.apiKeys.includes(key) || key === config.devApiKey)) {
    // One key would be two things at once.
    throw new Error('SERVICE_API_KEYS: a service key is also in API_KEYS or is DEV_API_KEY');
  }
  const unmetered = new UnmeteredAdmission();
  const authenticator: Authenticator = {
    async authenticate(token, organization) {
      // Read only where static or service keys are configured (it decides whether to digest the token).
      const tokenIsOrgShaped = serviceKeys || configKeys ? isWellFormedApiKey(token) : true;
      const serviceMatch = serviceKeys?.(token, tokenIsOrgShaped);
      const service = serviceMatch ? await serviceMatch : null;
      if (service) {
        // A service key belongs to no organization: it acts for the one the request names, which
        // admission then meters (and refuses with 401 when no such organization exists).
        if (organization === undefined || !OrganizationId.safeParse(organization).success) {
          throw cannotActForOrganization(organization);
        }
        return { orgId: organization, keyId: service.keyId, actingFor: true };
      }
      const configMatch = configKeys?.(token, tokenIsOrgShaped);
      let principal: Principal | null = configMatch ? await configMatch : null;
      if (!principal) {
        try {
          const found = await keys.authenticate(token);
          // Admin keys manage an organization (console, admin API); they do not call models.
          principal = found?.role === 'admin' ? null : found;
        } catch (err) {
          // Redis is unreachable: a 503 to retry, not a 401 (the key may be fine) nor a 500.
          throw admissionUnavailable(err);
        }
      }
      // Any other key may name its own organization, never another's: refused, not ignored, so a
      // session service whose GATEWAY_API_KEY is an organization key cannot bill one organization's
      // agent turns to another.
      if (principal && organization !== undefined && organization !== principal.orgId) {
        throw cannotActForOrganization(organization);
      }
      return principal;
    },
  };
  const admission: Admission = {
    admit: (request) => (isConfigKey(request.principal) ? unmetered.admit(request) : metered.admit(request)),
  };
  if (config.devApiKey) {
    const dev = await ensureDevOrganization({ redis, prefix, key: config.devApiKey });
    logger.info('dev API key active', { org: dev.orgId, key_id: dev.keyId });
  }
  if (config.apiKeys.length > 0) {
    logger.warn('API_KEYS set: those static keys are accepted without budgets, credit or capacity limits');
  }
  let adminRouter: Router | undefined;
  let consoleRouter: Router | undefined;
  if (config.adminToken) {
    const store = createAccountStore({ redis, prefix, maxKeysPerOrganization: config.maxKeysPerOrganization });
    const consoleParts = wireConsole({ ...config, adminToken: config.adminToken }, redis, store, keys);
    consoleRouter = consoleParts.router;
    adminRouter = buildAdminRouter({
      store,
      adminToken: config.adminToken,
      keys,
      sessions: consoleParts.sessions,
      models: models && { ...models, redis, prefix },
    });
  } else {
    logger.info('admin API and console off (ADMIN_TOKEN is not set)');
  }
  return {
    authenticator,
    admission,
    adminRouter,
    consoleRouter,
    openApi: adminOpenApi(),
    admissionStats: () => metered.stats(),
    close: async () => {
      await metered.close();
      await keys.close();
      subscriber?.disconnect();
      admissionRedis.disconnect(); // after the drain above: nothing of ours is left on it
    },
  };
}

/**
 * Matches a token against static keys (`API_KEYS`: key ids `config-key-<n>`; `SERVICE_API_KEYS`:
 * `service-key-<n>`); null when there are none. A token shaped like an organization key cannot be
 * one of them unless one of them has that shape: then it skips their digest (one SHA-256 less per
 * request) and the match is null at once. The choice depends on the token's shape and the
 * configuration only, never on how close a guess was.
 */
function staticKeys(
  keys: readonly string[],
  kind: 'config' | 'service',
): ((token: string | undefined, tokenIsOrgShaped: boolean) => Promise<Principal | null> | null) | null {
  if (keys.length === 0) return null;
  const authenticator = new ConfigKeyAuthenticator(keys, kind);
  const someAreOrgShaped = keys.some((key) => isWellFormedApiKey(key));
  return (token, tokenIsOrgShaped) =>
    someAreOrgShaped || !tokenIsOrgShaped ? authenticator.authenticate(token) : null;
}

/** Principals minted by ConfigKeyAuthenticator (key ids `config-key-<n>`; Redis key ids are `key_…`). */
function isConfigKey(principal: Principal): boolean {
  return principal.orgId === 'config' && principal.keyId.startsWith('config-key-');
}
