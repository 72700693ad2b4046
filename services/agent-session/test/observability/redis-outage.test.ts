import { closeServer, createLogger, createRedis, listen } from '@tollway/service-kit';
import { startPrivateRedis, type PrivateRedis } from '@tollway/service-kit/testing';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import { buildApp } from '../../src/app';
import { SessionEventHub } from '../../src/store/session-event-hub';
import { SessionStore } from '../../src/store/session-store';
import { OrganizationLimits } from '../../src/store/organization-limits';
import { TurnScheduler } from '../../src/store/turn-scheduler';
import { readWorkerStats } from '../../src/worker/worker-registry';
import { createMetricsRegistry } from '@tollway/telemetry';
import { registerApiMetrics } from '../../src/observability/session-metrics';

/**
 * A Redis outage, hung (SIGSTOP) or gone (SIGKILL): the session API answers 503 in its error
 * envelope within a second, /readyz fails, and it serves again by itself once Redis is back.
 */
const prefix = 'outage:';
let redisServer: PrivateRedis;
let connections: Redis[];
let hub: SessionEventHub;
let server: Server;
let baseUrl: string;

beforeAll(async () => {
  redisServer = await startPrivateRedis();
  const redis = createRedis(redisServer.url, { name: 'outage-api', failFast: true });
  const subscriber = createRedis(redisServer.url, { name: 'outage-events', maxRetriesPerRequest: null });
  connections = [redis, subscriber];
  for (const connection of connections) connection.on('error', () => undefined);
  const store = new SessionStore({ redis, prefix });
  hub = new SessionEventHub(subscriber, prefix);
  await hub.start();
  const scheduler = new TurnScheduler(redis, prefix);
  const registry = createMetricsRegistry('outage-test');
  registerApiMetrics(registry, {
    sessionsByStatus: () => store.countByStatus(),
    queueCounts: () => scheduler.counts(),
    workerStats: () => readWorkerStats(redis, prefix),
    longPollWaiters: () => hub.size,
  });
  const app = buildApp({
    metricsRegistry: registry,
    redis,
    store,
    hub,
    limits: new OrganizationLimits({
      redis,
      prefix,
      defaults: { maxSessions: 0, maxRunningTurns: 0, maxWaitingTurns: 0, weight: 1 },
    }),
    authenticator: null,
    workerStats: () => readWorkerStats(redis, prefix),
    logger: createLogger({ service: 'outage-test', silent: true }),
    maxSessions: 100,
    allowCustomIds: false,
    maxBodyBytes: 1024 * 1024,
  });
  server = await listen(app, 0, '127.0.0.1');
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await closeServer(server);
  hub.close();
  redisServer.resume();
  for (const connection of connections) connection.disconnect();
  await redisServer.stop();
});

async function timedCreate(): Promise<{ status: number; ms: number; body: { error?: { code?: string } } }> {
  const started = performance.now();
  const res = await fetch(`${baseUrl}/sessions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  });
  const body = (await res.json()) as { error?: { code?: string } };
  return { status: res.status, ms: performance.now() - started, body };
}

describe('session API during a Redis outage', () => {
  it.each([
    ['hung (SIGSTOP)', () => redisServer.pause(), () => Promise.resolve(redisServer.resume())],
    ['gone (SIGKILL), then restarted', () => redisServer.kill(), () => redisServer.restart()],
  ])('Redis %s: 503 within 1 s, readyz fails, then it serves again by itself', async (_name, stop, start) => {
    expect((await timedCreate()).status).toBe(201);
    await stop();
    // Within a second (the fastest of three; each under 2.5 s, as the test shares two loaded cores).
    const times: number[] = [];
    for (let i = 0; i < 3; i++) {
      const answer = await timedCreate();
      expect(answer.status).toBe(503);
      expect(answer.body.error).toMatchObject({ code: 'service_unavailable' });
      times.push(answer.ms);
    }
    expect(Math.min(...times)).toBeLessThan(1000);
    expect(Math.max(...times)).toBeLessThan(2500);
    expect((await fetch(`${baseUrl}/readyz`)).status).toBe(503);
    // /metrics still answers: the series Redis holds are left out and counted as read errors,
    // the process's own are there.
    // A scrape collects every metric at once, so the errors of one show in the next.
    expect((await fetch(`${baseUrl}/metrics`)).status).toBe(200);
    const scrape = await fetch(`${baseUrl}/metrics`);
    expect(scrape.status).toBe(200);
    const text = await scrape.text();
    expect(text).toMatch(/^process_cpu_seconds_total\{/m);
    expect(text).toMatch(/^tollway_long_poll_waiters\{/m);
    expect(text).not.toMatch(/^tollway_sessions\{/m);
    // The worker gauges have no labels of their own: left out too, not shown as 0 ("no workers").
    expect(text).not.toMatch(/^tollway_workers_max\{/m);
    expect(text).not.toMatch(/^tollway_workers_running\{/m);
    expect(text).toMatch(/^tollway_metrics_read_errors_total\{[^}]*gauge="tollway_workers_max"[^}]*\} [1-9]/m);
    expect(text).toMatch(/^tollway_metrics_read_errors_total\{[^}]*gauge="tollway_sessions"[^}]*\} [1-9]/m);
    await start();
    const deadline = Date.now() + 15_000;
    while ((await timedCreate()).status !== 201) {
      if (Date.now() > deadline) throw new Error('the API did not recover within 15 s');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    // Ready again too, once every connection it checks is back (the queue's may reconnect later
    // than the one that answered the create: a connection that timed out three times is made anew).
    while ((await fetch(`${baseUrl}/readyz`)).status !== 200) {
      if (Date.now() > deadline) throw new Error('/readyz did not recover within 15 s');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(await (await fetch(`${baseUrl}/metrics`)).text()).toMatch(/^tollway_workers_max\{[^}]*\} 0$/m);
  });
});
