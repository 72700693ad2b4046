import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A real HTTP server whose answer each test sets, counting the connections it accepted. */
export class Upstream {
  readonly server: http.Server;
  connections = 0;
  answer: (req: http.IncomingMessage, res: http.ServerResponse) => void = (_req, res) => res.end('ok');

  constructor() {
    this.server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => this.answer(req, res));
    });
    this.server.on('connection', () => {
      this.connections++;
    });
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
