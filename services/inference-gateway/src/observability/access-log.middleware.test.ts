import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { Router } from 'express';
import { closeServer, listen, requestId } from '@tollway/service-kit';
import { accessLog } from './access-log.middleware';

// The access log of the express routes over a real listening server: the whole path of a mounted
// router's routes, and a line for a client that left before its answer.
const lines: Array<Record<string, unknown>> = [];
let server: Server;
let baseUrl: string;

beforeAll(async () => {
  const app = express();
  app.use(requestId());
  app.use(accessLog({ info: (_message, fields) => lines.push(fields) }));
  const admin = Router();
  admin.get('/organizations', (_req, res) => void res.json({ object: 'list', data: [] }));
  admin.get('/never', () => undefined); // answers nothing: the client gives up
  admin.get('/headers-then-nothing', (_req, res) => void res.writeHead(200).flushHeaders());
  app.use('/admin/v1', admin);
  server = await listen(app, 0, '127.0.0.1');
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await closeServer(server);
});

async function lineFor(path: string): Promise<Record<string, unknown>> {
  for (let i = 0; i < 100; i++) {
    const line = lines.find((candidate) => candidate.path === path);
    if (line) return line;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`no access log line for ${path}: ${JSON.stringify(lines)}`);
}

describe('access log of the express routes', () => {
  it("logs a mounted router's route with its whole path, not the router's part of it", async () => {
    expect((await fetch(`${baseUrl}/admin/v1/organizations?limit=5`)).status).toBe(200);
    const line = await lineFor('/admin/v1/organizations');
    expect(line).toMatchObject({ method: 'GET', status: 200 });
    expect(line.error_type).toBeUndefined();
    expect(lines.some((candidate) => candidate.path === '/organizations')).toBe(false);
  });

  it('logs a request whose client left: 499 when nothing was sent, else the status sent; error_type client_gone', async () => {
    await expect(fetch(`${baseUrl}/admin/v1/never`, { signal: AbortSignal.timeout(100) })).rejects.toThrow();
    expect(await lineFor('/admin/v1/never')).toMatchObject({ status: 499, error_type: 'client_gone' });
    const abort = new AbortController();
    const res = await fetch(`${baseUrl}/admin/v1/headers-then-nothing`, { signal: abort.signal });
    expect(res.status).toBe(200);
    abort.abort();
    expect(await lineFor('/admin/v1/headers-then-nothing')).toMatchObject({ status: 200, error_type: 'client_gone' });
  });
});
