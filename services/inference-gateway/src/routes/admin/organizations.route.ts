import { Router, type Request } from 'express';
import { AccountError, CREDIT_LIMIT, type AccountStore } from '@tollway/accounts';
import {
  CreateOrganizationRequest,
  UpdateOrganizationRequest,
  UsageQuery,
  IDEMPOTENCY_KEY_PATTERN,
  type DeletedOrganization,
  type OrganizationList,
  type OrganizationUsage,
} from '@tollway/contracts';
import { operatorOnly, requireOrgAccess } from './admin-access';
import {
  creditOutOfRange,
  idempotentlyCreatedOrganizationDeleted,
  idempotencyKeyReused,
  invalidAdminRequest,
  invalidIdempotencyKey,
  organizationExists,
  organizationIdRetired,
  organizationNotFound,
} from './admin-errors';
import { organizationView, sessionLimitsOf } from './admin-views';

/** The request's `Idempotency-Key`, null without one; 400 when it is not a valid one. */
function readIdempotencyKey(req: Request): string | null {
  const key = req.get('idempotency-key') ?? null;
  if (key !== null && !IDEMPOTENCY_KEY_PATTERN.test(key)) throw invalidIdempotencyKey();
  return key;
}

/**
 * Organizations: create, list, get, update (budgets, credit top-up, session limits), delete; and
 * their usage. Reads show each bucket's balance and the live counts on the session service.
 * A create or an update sent with `Idempotency-Key` is made once (AccountStore's
 * createOrganizationOnce and updateOrganizationOnce), so a client whose connection broke, or that
 * got a 503, may send it again.
 * Organization admins may read their own organization and its usage; the rest is operator-only.
 */
export function organizationsRoutes(store: AccountStore): Router {
  const router = Router();
  router.param('orgId', requireOrgAccess);

  router.post('/organizations', operatorOnly, async (req, res) => {
    const body = CreateOrganizationRequest.safeParse(req.body === undefined ? {} : req.body);
    if (!body.success) throw invalidAdminRequest(body.error);
    const idempotencyKey = readIdempotencyKey(req);
    let created;
    try {
      const { session_limits: limits, ...rest } = body.data;
      created = await store.createOrganizationOnce({ ...rest, sessionLimits: sessionLimitsOf(limits) }, idempotencyKey);
    } catch (err) {
      // The id is the request's, or the one its Idempotency-Key names.
      if (err instanceof AccountError && err.reason === 'conflict') throw organizationExists(err.orgId ?? '');
      if (err instanceof AccountError && err.reason === 'id_retired') throw organizationIdRetired(err.orgId ?? '');
      if (err instanceof AccountError && err.reason === 'idempotency_key_reused') throw idempotencyKeyReused();
      throw err;
    }
    if (!created) throw idempotentlyCreatedOrganizationDeleted();
    if (created.replayed) res.set('idempotent-replayed', 'true');
    res.status(201).json(organizationView(created.organization));
  });

  router.get('/organizations', operatorOnly, async (_req, res) => {
    const orgs = await store.listOrganizations();
    const data = await Promise.all(orgs.map(async (org) => organizationView(org, await liveState(store, org.id))));
    const list: OrganizationList = { object: 'list', data };
    res.json(list);
  });

  router.get('/organizations/:orgId', async (req, res) => {
    const org = await store.getOrganization(req.params.orgId);
    if (!org) throw organizationNotFound(req.params.orgId);
    res.json(organizationView(org, await liveState(store, org.id)));
  });

  router.patch('/organizations/:orgId', operatorOnly, async (req, res) => {
    const body = UpdateOrganizationRequest.safeParse(req.body === undefined ? {} : req.body);
    if (!body.success) throw invalidAdminRequest(body.error);
    const idempotencyKey = readIdempotencyKey(req);
    const { name, budgets, credit_top_up: creditTopUp, session_limits: limits } = body.data;
    const update = { name, budgets, creditTopUp, sessionLimits: sessionLimitsOf(limits) };
    let updated;
    try {
      updated = await store.updateOrganizationOnce(req.params.orgId, update, idempotencyKey);
    } catch (err) {
      if (err instanceof AccountError && err.reason === 'idempotency_key_reused') throw idempotencyKeyReused();
      if (err instanceof AccountError && err.reason === 'credit_out_of_range') throw creditOutOfRange(CREDIT_LIMIT);
      throw err;
    }
    if (!updated) throw organizationNotFound(req.params.orgId);
    if (updated.replayed) res.set('idempotent-replayed', 'true');
    res.json(organizationView(updated.organization));
  });

  router.delete('/organizations/:orgId', operatorOnly, async (req, res) => {
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

/** What a read shows beside the record: the buckets' balances now and the live counts on the session service. */
async function liveState(store: AccountStore, orgId: string) {
  const [balances, turns] = await Promise.all([store.getBucketBalances(orgId), store.getOrganizationTurns(orgId)]);
  return { balances, turns };
}
