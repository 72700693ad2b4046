import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createHttpServer, DEFAULT_HTTP_LIMITS, type HttpLimits } from '@tollway/service-kit';
import { Counter, Gauge, Registry } from 'prom-client';

/** A process's metrics: its registry, or null when metrics are turned off (`METRICS_ENABLED=false`). */
export type MetricsRegistry = Registry;

/**
 * A fresh registry (never prom-client's global one, so tests can build several apps in one
 * process) with a `service` label on every series and the process metrics below.
 */
export function createMetricsRegistry(service: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  registerProcessMetrics(registry);
  return registry;
}

/**
 * CPU, memory and uptime, read when Prometheus scrapes. Not prom-client's default metrics: those
 * watch every garbage collection and sample the event loop continuously, which costs the request
 * path measurably (see bench/metrics-overhead.mjs); these cost nothing between scrapes.
 */
function registerProcessMetrics(registry: Registry): void {
  const registers = [registry];
  const startSeconds = Math.round(Date.now() / 1000 - process.uptime());
  new Counter({
    name: 'process_cpu_seconds_total',
    help: 'User and system CPU time spent, in seconds',
    registers,
    collect() {
      const usage = process.cpuUsage();
      this.reset();
      this.inc((usage.user + usage.system) / 1e6);
    },
  });
  new Gauge({
    name: 'process_resident_memory_bytes',
    help: 'Resident memory size, in bytes',
    registers,
    collect() {
      this.set(process.memoryUsage.rss());
    },
  });
  new Gauge({
    name: 'nodejs_heap_size_used_bytes',
    help: 'V8 heap in use, in bytes',
    registers,
    collect() {
      this.set(process.memoryUsage().heapUsed);
    },
  });
  new Gauge({
    name: 'process_start_time_seconds',
    help: 'Start time of the process since the Unix epoch, in seconds',
    registers,
    collect() {
      this.set(startSeconds);
    },
  });
}

/** Writes the registry in the Prometheus text format (version 0.0.4). */
export async function writeMetrics(registry: Registry, res: ServerResponse): Promise<void> {
  try {
    const text = await registry.metrics();
    res.writeHead(200, { 'content-type': registry.contentType, 'cache-control': 'no-store' });
    res.end(text);
  } catch (err) {
    writeErrorEnvelope(res, 500, 'internal_error', `collecting metrics failed: ${errorText(err)}`);
  }
}

/** Answers in the services' error envelope, as every other refusal of their listeners. */
function writeErrorEnvelope(res: ServerResponse, status: number, code: string, message: string): void {
  const type = status >= 500 ? 'server_error' : 'invalid_request_error';
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
  res.end(JSON.stringify({ error: { message, type, param: null, code } }));
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** True for `GET /metrics` (with or without a query string). */
export function isMetricsRequest(req: IncomingMessage): boolean {
  return (
    (req.method === 'GET' || req.method === 'HEAD') && (req.url === '/metrics' || !!req.url?.startsWith('/metrics?'))
  );
}

/** True for `GET /healthz` (with or without a query string). */
function isHealthRequest(req: IncomingMessage): boolean {
  return (
    (req.method === 'GET' || req.method === 'HEAD') && (req.url === '/healthz' || !!req.url?.startsWith('/healthz?'))
  );
}

/**
 * A listener of its own for `METRICS_PORT`, serving `GET /metrics` and `GET /healthz` (404
 * otherwise): keeps the metrics off a public listener, and gives workers, which serve no other
 * HTTP, an endpoint to be scraped and probed at. `/healthz` answers 200 while the process's event
 * loop turns (an orchestrator's liveness probe); with `registry` null (metrics turned off) it is
 * served alone and `/metrics` is a 404, as on the main listeners. It has the connection limits and
 * error answers of the main listener (createHttpServer): the process's HTTP_* settings where it has
 * them, else their defaults.
 */
export function startMetricsServer(
  registry: Registry | null,
  port: number,
  host: string,
  limits: HttpLimits = DEFAULT_HTTP_LIMITS,
): Promise<Server> {
  const server = createHttpServer((req, res) => {
    if (registry && isMetricsRequest(req)) {
      void writeMetrics(registry, res);
      return;
    }
    req.resume();
    if (isHealthRequest(req)) {
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
      res.end(JSON.stringify({ status: 'ok' }));
      return;
    }
    const served = registry ? 'GET /metrics and GET /healthz' : 'GET /healthz (metrics are turned off)';
    writeErrorEnvelope(res, 404, 'not_found', `Not found: this listener serves ${served} only.`);
  }, limits);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

/** Seconds since `startedAt` (a `performance.now()` reading). */
export function secondsSince(startedAt: number): number {
  return (performance.now() - startedAt) / 1000;
}
