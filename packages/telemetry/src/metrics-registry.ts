import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { collectDefaultMetrics, Registry } from 'prom-client';

/** A process's metrics: its registry, or null when metrics are turned off (`METRICS_ENABLED=false`). */
export type MetricsRegistry = Registry;

/**
 * A fresh registry (never prom-client's global one, so tests can build several apps in one
 * process) with the Node.js process metrics (`process_*`, `nodejs_*`) and a `service` label.
 */
export function createMetricsRegistry(service: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  return registry;
}

/** Writes the registry in the Prometheus text format (version 0.0.4). */
export async function writeMetrics(registry: Registry, res: ServerResponse): Promise<void> {
  try {
    const text = await registry.metrics();
    res.writeHead(200, { 'content-type': registry.contentType, 'cache-control': 'no-store' });
    res.end(text);
  } catch (err) {
    res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
    res.end(`collecting metrics failed: ${err instanceof Error ? err.message : String(err)}\n`);
  }
}

/** True for `GET /metrics` (with or without a query string). */
export function isMetricsRequest(req: IncomingMessage): boolean {
  return (
    (req.method === 'GET' || req.method === 'HEAD') && (req.url === '/metrics' || !!req.url?.startsWith('/metrics?'))
  );
}

/**
 * A listener of its own serving only `GET /metrics` (404 otherwise), for `METRICS_PORT`: keeps the
 * metrics off a public listener, and gives workers, which serve no other HTTP, an endpoint.
 */
export function startMetricsServer(registry: Registry, port: number, host: string): Promise<Server> {
  const server = createServer((req, res) => {
    if (isMetricsRequest(req)) {
      void writeMetrics(registry, res);
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' });
    res.end('not found: this listener serves GET /metrics only\n');
  });
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
