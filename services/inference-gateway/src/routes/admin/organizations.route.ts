import { Router } from 'express';
import { AccountError, type AccountStore } from '@tollway/accounts';
import {
  CreateOrganizationRequest,
  UpdateOrganizationRequest,
  UsageQuery,
  type DeletedOrganization,
  type OrganizationList,
  type OrganizationUsage,
} from '@tollway/contracts';
import { invalidAdminRequest, organizationExists, organizationNotFound } from './admin-errors';
import { organizationView } from './admin-views';

/** Organizations: create, list, get, update (budgets, credit top-up), delete; and their usage. */
export function organizationsRoutes(store: AccountStore): Router {
  const router = Router();

  router.post('/organizations', async (req, res) => {
    const body = CreateOrganizationRequest.safeParse(req.body === undefined ? {} : req.body);
    if (!body.success) throw invalidAdminRequest(body.error);
    try {
      const org = await store.createOrganization(body.data);
      res.status(201).json(organizationView(org));
    } catch (err) {
      if (err instanceof AccountError && err.reason === 'conflict') throw organizationExists(body.data.id ?? '');
      throw err;
    }
  });

  router.get('/organizations', async (_req, res) => {
    const list: OrganizationList = { object: 'list', data: (await store.listOrganizations()).map(organizationView) };
    res.json(list);
  });

  router.get('/organizations/:orgId', async (req, res) => {
    const org = await store.getOrganization(req.params.orgId);
    if (!org) throw organizationNotFound(req.params.orgId);
    res.json(organizationView(org));
  });

  router.patch('/organizations/:orgId', async (req, res) => {
    const body = UpdateOrganizationRequest.safeParse(req.body === undefined ? {} : req.body);
    if (!body.success) throw invalidAdminRequest(body.error);
    const { name, budgets, credit_top_up: creditTopUp } = body.data;
    const org = await store.updateOrganization(req.params.orgId, { name, budgets, creditTopUp });
    if (!org) throw organizationNotFound(req.params.orgId);
    res.json(organizationView(org));
  });

  router.delete('/organizations/:orgId', async (req, res) => {
    if (!(await store.deleteOrganization(req.params.orgId))) throw organizationNotFound(req.params.orgId);
    const deleted: DeletedOrganization = { object: 'organization.deleted', id: req.params.orgId, deleted: true };
    res.json(deleted);
  });

  router.get('/organizations/:orgId/usage', async (req, res) => {
    const query = UsageQuery.safeParse(req.query);
    if (!query.success) throw invalidAdminRequest(query.error);
    const usage = await store.getUsage(req.params.orgId, query.data.minutes);
    if (!usage) throw organizationNotFound(req.params.orgId);
    const { org_id: organizationId, ...rest } = usage;
    const view: OrganizationUsage = { object: 'organization.usage', organization_id: organizationId, ...rest };
    res.json(view);
  });

  return router;
}
