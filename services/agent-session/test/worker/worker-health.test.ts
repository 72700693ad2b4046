import path from 'node:path';
import { freePort } from '@tollway/telemetry/testing';
import { deleteKeys, testPrefix } from '../api/api-harness';
import { startServiceProcess, type ServiceProcess } from '../observability/service-process';

/**
 * A worker run as itself (its main) answers the orchestrator's liveness probe at `/healthz` on
 * METRICS_PORT, its one listener, whether metrics are on or off (deploy/helm probes it there).
 */
jest.setTimeout(90_000);

const MAIN = path.join(__dirname, '..', '..', 'src', 'main-worker.ts');
const prefix = testPrefix();
let worker: ServiceProcess | null = null;

afterEach(async () => {
  await worker?.stop();
  worker = null;
});

afterAll(async () => {
  await deleteKeys(prefix);
});

async function startWorkerWith(env: Record<string, string>): Promise<string> {
  const port = await freePort();
  worker = await startServiceProcess(
    MAIN,
    { REDIS_PREFIX: prefix, METRICS_PORT: String(port), METRICS_HOST: '127.0.0.1', WORKER_CONCURRENCY: '1', ...env },
    'worker metrics listening',
  );
  return `http://127.0.0.1:${port}`;
}

describe('worker /healthz on METRICS_PORT', () => {
  it('answers 200 beside /metrics', async () => {
    const base = await startWorkerWith({});
    const health = await fetch(`${base}/healthz`);
    expect([health.status, await health.json()]).toEqual([200, { status: 'ok' }]);
    const metrics = await fetch(`${base}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('service="agent-session-worker"');
  });

  it('answers 200 with metrics turned off, and /metrics is then a 404', async () => {
    const base = await startWorkerWith({ METRICS_ENABLED: 'false' });
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/metrics`)).status).toBe(404);
  });
});
