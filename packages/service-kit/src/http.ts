import type { Server } from 'node:http';
import type { Express } from 'express';

/** Listens on `port` (0 picks a free one) and resolves once the socket is bound. */
export function listen(app: Express, port: number, host = '0.0.0.0'): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = app.listen(port, host, (err?: Error) => (err ? reject(err) : resolve(server)));
    server.once('error', reject);
  });
}

/** Stops accepting connections and closes idle keep-alive sockets; resolves when all are closed. */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}
