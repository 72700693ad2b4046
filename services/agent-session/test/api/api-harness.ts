import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { Express } from 'express';
import { Redis } from 'ioredis';
import { accountKeys, createAccountStore, createKeyAuthenticator, type KeyAuthenticator } from '@tollway/accounts';
import { closeServer, createLogger, listen } from '@tollway/service-kit';
import { buildApp, type AppDeps } from '../../src/app';
import { readWorkerStats } from '../../src/worker/worker-registry';
import { SessionEventHub } from '../../src/store/session-event-hub';
import { SessionStore } from '../../src/store/session-store';
import { OrganizationLimits } from '../../src/store/organization-limits';
import { TurnScheduler } from '../../src/store/turn-scheduler';
import { EventReaderHub, type EventReaderHubOptions } from '../../src/streaming/event-reader-hub';

const REDIS_URL = 'redis://127.0.0.1:6379';

/** One API replica on real Redis under a test prefix: its app, store, hub and connections. */
export interface ApiReplica {
  app: Express;
  store: SessionStore;
  hub: SessionEventHub;
  /** The event streams' hub, with `events` in the options. */
  events: EventReaderHub | null;
  /** The hub's blocking-read connection. */
  eventReader: Redis | null;
  /** The scheduler's reads and steps on this replica's connection (tests play workers with it). */
  scheduler: TurnScheduler;
  redis: Redis;
  subscriber: Redis;
  /** Every Redis connection of this replica is named `<connectionTag>:<role>` (see CLIENT LIST). */
  connectionTag: string;
  close(): Promise<void>;
}

/** Options of startReplica: everything of AppDeps a test may want to change. */
export type ReplicaOptions = ReplicaConnection &
  Partial<
    Pick<
      AppDeps,
      | 'authenticator'
      | 'maxSessions'
      | 'maxHistoryBytes'
      | 'allowCustomIds'
      | 'clock'
      | 'limits'
      | 'notifier'
      | 'metricsRegistry'
      | 'accessLog'
    >
  >;

/** Where a replica's Redis is: the shared one unless told (a private one, for outage tests). */
interface ReplicaConnection {
  redisUrl?: string;
  /** false: the hub never answers a long-poll from a turn's end (default: as main-api.ts, it does). */
  endAnswers?: boolean;
  /** The hub's clock (how long ago a turn's end arrived). */
  hubClock?: () => number;
  /** Serve the session event streams, with these hub options (defaults: 15 s heartbeat, 1 MiB buffer, 1000 streams). */
  events?: Partial<
    Pick<EventReaderHubOptions, 'heartbeatMs' | 'clientBufferBytes' | 'maxStreamsPerOrg' | 'watchTtlMs'>
  >;
}

/** A unique key prefix for one test file. */
export function testPrefix(): string {
  return `test-${randomUUID()}:`;
}

/** Builds one API replica (a process's worth of connections) on `prefix`. */
export async function startReplica(prefix: string, options: ReplicaOptions = {}): Promise<ApiReplica> {
  const connectionTag = `replica-${randomUUID()}`;
  const url = options.redisUrl ?? REDIS_URL;
  const redis = new Redis(url, { connectionName: `${connectionTag}:api` });
  const subscriber = new Redis(url, { connectionName: `${connectionTag}:events`, maxRetriesPerRequest: null });
  const store = new SessionStore({ redis, prefix, clock: options.clock });
  // As main-api.ts makes it (long-polls that a turn's end overtook answered from it), unless told.
  const hub = new SessionEventHub(subscriber, prefix, {
    ...(options.endAnswers === false ? {} : { redis }),
    ...(options.hubClock ? { clock: options.hubClock } : {}),
  });
  await hub.start();
  const limits =
    options.limits ??
    new OrganizationLimits({
      redis,
      prefix,
      defaults: { maxSessions: 0, maxRunningTurns: 0, maxWaitingTurns: 0, weight: 1 },
    });
  const reader = options.events
    ? // As main-api.ts makes it: a read the connection lost is not sent again (the hub reads again).
      new Redis(url, {
        connectionName: `${connectionTag}:event-reader`,
        maxRetriesPerRequest: null,
        autoResendUnfulfilledCommands: false,
      })
    : null;
  const events = reader
    ? new EventReaderHub({
        redis,
        reader,
        prefix,
        logger: createLogger({ service: 'agent-session-test', silent: true }),
        heartbeatMs: 15_000,
        clientBufferBytes: 1024 * 1024,
        maxStreamsPerOrg: 1000,
        ...options.events,
      })
    : null;
  events?.start();
  const app = buildApp({
    redis,
    store,
    hub,
    events,
    limits,
    notifier: options.notifier,
    authenticator: options.authenticator ?? null,
    workerStats: () => readWorkerStats(redis, prefix),
    logger: createLogger({ service: 'agent-session-test', silent: true }),
    maxSessions: options.maxSessions ?? 1000,
    allowCustomIds: options.allowCustomIds ?? false,
    maxBodyBytes: 1024 * 1024,
    maxHistoryBytes: options.maxHistoryBytes,
    clock: options.clock,
    metricsRegistry: options.metricsRegistry,
    accessLog: options.accessLog,
  });
  return {
    app,
    store,
    hub,
    events,
    eventReader: reader,
    scheduler: new TurnScheduler(redis, prefix, options.clock),
    redis,
    subscriber,
    connectionTag,
    async close() {
      hub.close();
      await events?.close();
      await reader?.quit();
      await Promise.all([redis.quit(), subscriber.quit()]);
    },
  };
}

/** Listens on 127.0.0.1:0 and returns the base URL and the server. */
export async function serve(app: Express): Promise<{ url: string; server: Server; close(): Promise<void> }> {
  const server = await listen(app, 0, '127.0.0.1');
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    close: () => {
      server.closeAllConnections();
      return closeServer(server);
    },
  };
}

/** Deletes every key under `prefix` (SCAN + DEL). */
export async function deleteKeys(prefix: string): Promise<void> {
  const redis = new Redis(REDIS_URL);
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    if (keys.length > 0) await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
  await redis.quit();
}

/** All keys under `prefix`, sorted. */
export async function keysUnder(redis: Redis, prefix: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    found.push(...keys);
    cursor = next;
  } while (cursor !== '0');
  return found.sort();
}

/** An API replica with authentication on and each organization's limits read from its record. */
export interface AuthedReplica {
  api: ApiReplica;
  /** A connection of the test's own. */
  redis: Redis;
  limits: OrganizationLimits;
  authenticator: KeyAuthenticator;
  /**
   * A new organization and one of its keys (`auth`, the Authorization header); `fields` are written
   * to its record as the admin API writes its limits (`limit_sessions`, `limit_running_turns`, …).
   */
  organization(fields?: Record<string, string>): Promise<{ orgId: string; auth: string }>;
  close(): Promise<void>;
}

/** Starts an AuthedReplica on `prefix` (the service's defaults: no limit of an organization's own). */
export async function startAuthedReplica(prefix: string, options: ReplicaOptions = {}): Promise<AuthedReplica> {
  const redis = new Redis(REDIS_URL);
  const subscriber = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const authenticator = createKeyAuthenticator({ redis, prefix });
  await authenticator.ready();
  const limits = new OrganizationLimits({
    redis,
    prefix,
    subscriber,
    defaults: { maxSessions: 0, maxRunningTurns: 0, maxWaitingTurns: 0, weight: 1 },
  });
  await limits.start();
  const api = await startReplica(prefix, { authenticator, limits, maxSessions: 1000, ...options });
  const accounts = createAccountStore({ redis, prefix });
  return {
    api,
    redis,
    limits,
    authenticator,
    async organization(fields = {}) {
      const org = await accounts.createOrganization({
        name: 'test',
        budgets: { requests: 100, input_tokens: 1000, output_tokens: 1000 },
        credit: 1,
      });
      if (Object.keys(fields).length > 0) await redis.hset(accountKeys(prefix).org(org.id), fields);
      return { orgId: org.id, auth: `Bearer ${(await accounts.createKey(org.id))!.key}` };
    },
    async close() {
      limits.close();
      await authenticator.close();
      await api.close();
      subscriber.disconnect();
      await redis.quit();
    },
  };
}
