import { Router } from 'express';
import { AccountError, type AccountStore } from '@tollway/accounts';
import { CreateApiKeyRequest, type ApiKeyList } from '@tollway/contracts';
import { requireOrgAccess } from './admin-access';
import { apiKeyNotFound, invalidAdminRequest, keyLimitReached, organizationNotFound } from './admin-errors';
import { apiKeyView, createdApiKeyView } from './admin-views';

/** An organization's API keys: create (plaintext shown once), list, revoke. Its admins may use these too. */
export function keysRoutes(store: AccountStore): Router {
  const router = Router();
  router.param('orgId', requireOrgAccess);

  router.post('/organizations/:orgId/keys', async (req, res) => {
    const body = CreateApiKeyRequest.safeParse(req.body === undefined ? {} : req.body);
    if (!body.success) throw invalidAdminRequest(body.error);
    let created;
    try {
      created = await store.createKey(req.params.orgId, body.data.name, body.data.role);
    } catch (err) {
      if (err instanceof AccountError && err.reason === 'key_limit_reached') {
        throw keyLimitReached(req.params.orgId, store.maxKeysPerOrganization);
      }
      throw err;
    }
    if (!created) throw organizationNotFound(req.params.orgId);
    res.status(201).json(createdApiKeyView(created));
  });

  router.get('/organizations/:orgId/keys', async (req, res) => {
    const keys = await store.listKeys(req.params.orgId);
    if (!keys) throw organizationNotFound(req.params.orgId);
    const list: ApiKeyList = { object: 'list', data: keys.map(apiKeyView) };
    res.json(list);
  });

  // Revocation keeps the record (listed with `revoked_at`); the key stops working on every replica.
  router.delete('/organizations/:orgId/keys/:keyId', async (req, res) => {
    const key = await store.getKey(req.params.keyId);
    if (!key || key.org_id !== req.params.orgId) throw apiKeyNotFound(req.params.keyId);
    const revoked = await store.revokeKey(key.id);
    if (!revoked) throw apiKeyNotFound(req.params.keyId);
    res.json(apiKeyView(revoked));
  });

  return router;
}
