import type { Redis } from 'ioredis';
import { accountKeys, type AccountStore } from '@tollway/accounts';
import type { Logger } from '@tollway/service-kit';
import { parseTurnJob } from '../domain/session-rules';
import type { TurnNotifier } from '../webhooks/turn-notifier';
import type { SessionStore } from './session-store';

/** Options of startOrganizationPurge. */
export interface OrganizationPurgeOptions {
  store: SessionStore;
  accounts: Pick<AccountStore, 'getOrganization'>;
  /** The process's subscriber connection (already in subscriber mode or not: it is only subscribed to). */
  subscriber: Redis;
  /** The accounts' key prefix (`REDIS_PREFIX`), whose org-change channel is listened to. */
  prefix: string;
  /** How often every organization holding sessions is checked, ms (0: only at start). */
  reconcileIntervalMs: number;
  logger: Logger;
  /** Sends the cancellation callbacks of the turns that were waiting; null = none sent. */
  notifier?: TurnNotifier | null;
  clock?: () => number;
}

/** A running purge; `stop()` unsubscribes and waits for a check in progress. */
export interface OrganizationPurge {
  stop(): Promise<void>;
}

/**
 * Deletes the sessions of deleted organizations: their histories must not outlive them, and no
 * one can reach them any more (their keys are revoked, their ids retired). A deletion anywhere
 * (admin API, console, CLI) publishes the organization's id on the accounts' org-change channel;
 * an organization named there that no longer exists has its sessions deleted as DELETE deletes
 * one (a running turn is cancelled). A message lost while the subscriber reconnects, or a session
 * made by a request that was already past authentication, is caught by a reconciliation at start
 * and every `reconcileIntervalMs`. Replicas may purge at once: each deletion is compare-and-set.
 * An organization whose existence cannot be read (Redis failing) is left alone.
 */
export async function startOrganizationPurge(options: OrganizationPurgeOptions): Promise<OrganizationPurge> {
  const { store, accounts, subscriber, logger } = options;
  const channel = accountKeys(options.prefix).orgChangeChannel();
  let stopped = false;
  // One check at a time, in arrival order: a burst of changes queues, never runs concurrently.
  let queue: Promise<void> = Promise.resolve();
  const check = (orgs: () => Promise<string[]>) => {
    queue = queue.then(async () => {
      if (stopped) return;
      try {
        for (const org of await orgs()) {
          if (stopped) return;
          if (await accounts.getOrganization(org)) continue;
          const { removed, waitingJobs } = await store.deleteOrganizationSessions(org);
          if (removed > 0) logger.info('deleted the sessions of a deleted organization', { org_id: org, removed });
          const now = (options.clock ?? Date.now)();
          for (const job of waitingJobs.map(parseTurnJob)) {
            if (job) options.notifier?.notifyCancelled(job, { durationMs: Math.max(0, now - job.accepted_at) });
          }
        }
      } catch (err) {
        logger.warn('purging the sessions of deleted organizations failed', { err: (err as Error).message });
      }
    });
  };
  const onMessage = (from: string, org: string) => {
    if (from === channel) check(async () => [org]);
  };
  subscriber.on('message', onMessage);
  await subscriber.subscribe(channel);
  const reconcile = () => check(() => store.organizationsWithSessions());
  reconcile();
  const timer = options.reconcileIntervalMs > 0 ? setInterval(reconcile, options.reconcileIntervalMs) : null;
  timer?.unref();
  return {
    async stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      subscriber.off('message', onMessage);
      await subscriber.unsubscribe(channel).catch(() => undefined);
      await queue;
    },
  };
}
