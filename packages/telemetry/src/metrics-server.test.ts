import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DEFAULT_HTTP_LIMITS } from '@tollway/service-kit';
import { rawExchange } from '@tollway/service-kit/testing';
import { createMetricsRegistry, startMetricsServer } from './metrics-registry';

// The METRICS_PORT listener has the main listener's limits and answers: it used to be a bare
// node:http server that kept every idle or half-sent connection and answered bad bytes with an
// empty 400.
let server: Server;
let port: number;

beforeAll(async () => {
  server = await startMetricsServer(createMetricsRegistry('test'), 0, '127.0.0.1', {
    ...DEFAULT_HTTP_LIMITS,
    headersTimeoutMs: 300,
    requestTimeoutMs: 600,
  });
  port = (server.address() as AddressInfo).port;
});

afterAll(() => {
  server.closeAllConnections();
  server.close();
});

describe('startMetricsServer', () => {
  it('serves GET /metrics, GET /healthz and 404 elsewhere', async () => {
    const metrics = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('service="test"');
    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect([health.status, health.headers.get('cache-control'), await health.json()]).toEqual([
      200,
      'no-store',
      { status: 'ok' },
    ]);
    // Only GET and HEAD of the exact path: no prefix or other method reaches either answer.
    for (const [method, path] of [
      ['POST', '/healthz'],
      ['GET', '/healthzz'],
      ['DELETE', '/metrics'],
    ] as const) {
      const refused = await fetch(`http://127.0.0.1:${port}${path}`, { method, body: method === 'POST' ? 'x' : null });
      expect([method, path, refused.status]).toEqual([method, path, 404]);
      await refused.arrayBuffer();
    }
    const other = await fetch(`http://127.0.0.1:${port}/other`, { method: 'POST', body: 'x' });
    expect(other.status).toBe(404);
    expect(other.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await other.json()).toEqual({
      error: {
        message: expect.stringContaining('GET /metrics and GET /healthz only'),
        type: 'invalid_request_error',
        param: null,
        code: 'not_found',
      },
    });
  });

  it('answers a head sent too slowly with 408 and closes, as the main listener does', async () => {
    const exchange = await rawExchange(port, ['GET /metrics HTTP/1.1\r\nHost: x\r\n'], { waitMs: 3000 });
    expect(exchange.status).toBe(408);
    expect(exchange.ended).toBe('closed');
  });

  it('answers bytes that are not HTTP with 400 in the error envelope', async () => {
    const exchange = await rawExchange(port, ['NOT HTTP\r\n\r\n']);
    expect(exchange.status).toBe(400);
    expect(JSON.parse(exchange.body)).toMatchObject({ error: { code: 'bad_request' } });
  });

  it('cuts off a client that pipelines scrapes it does not read', async () => {
    const flood = 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(2000);
    const exchange = await rawExchange(port, [flood]);
    expect(exchange.ended).toBe('closed');
    expect((exchange.text.match(/HTTP\/1\.1 200/g) ?? []).length).toBeLessThanOrEqual(16);
  });

  it('serves /healthz alone when metrics are turned off (a worker probed at METRICS_PORT)', async () => {
    const bare = await startMetricsServer(null, 0, '127.0.0.1');
    try {
      const base = `http://127.0.0.1:${(bare.address() as AddressInfo).port}`;
      expect((await fetch(`${base}/healthz?probe=1`)).status).toBe(200);
      const metrics = await fetch(`${base}/metrics`);
      expect(metrics.status).toBe(404);
      expect(await metrics.json()).toMatchObject({
        error: { code: 'not_found', message: expect.stringContaining('metrics are turned off') },
      });
    } finally {
      bare.close();
    }
  });
});
