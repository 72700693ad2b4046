import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { once } from 'node:events';
import { rawExchange } from './testing/raw-http';
import {
  createHttpServer,
  DEFAULT_HTTP_LIMITS,
  listenServer,
  MAX_PIPELINED_REQUESTS,
  type HttpLimits,
} from './http-server';
import { readJsonBody } from './json-body';

/** Requests the handler was given, by path. */
const served = new Map<string, number>();

/** A server that echoes the parsed body, with the given limits. */
async function start(limits: Partial<HttpLimits>): Promise<{ server: Server; port: number }> {
  const server = createHttpServer(
    (req, res) => {
      served.set(req.url ?? '', (served.get(req.url ?? '') ?? 0) + 1);
      if (req.url === '/now') {
        // Answered in the request's own turn, before the parser reads what follows it.
        req.resume();
        res.end('{"now":true}');
        return;
      }
      if (req.url === '/stream') {
        // Headers at once, then the body in three pieces 60 ms apart.
        req.resume();
        res.writeHead(200, { 'content-type': 'text/plain' });
        let piece = 0;
        const timer = setInterval(() => {
          piece += 1;
          if (piece < 3) res.write(`piece ${piece};`);
          else {
            clearInterval(timer);
            res.end('piece 3');
          }
        }, 60);
        res.on('close', () => clearInterval(timer));
        return;
      }
      readJsonBody(req, { maxBytes: 1 << 20, maxDepth: 16 }).then(
        async (body) => {
          if (req.url?.startsWith('/slow')) await new Promise((r) => setTimeout(r, 150));
          res.end(JSON.stringify({ body: body ?? null }));
        },
        () => {
          res.statusCode = 400;
          res.end('{}');
        },
      );
    },
    { ...DEFAULT_HTTP_LIMITS, ...limits },
  );
  await listenServer(server, 0, '127.0.0.1');
  return { server, port: (server.address() as AddressInfo).port };
}

function stop(server: Server): void {
  server.closeAllConnections();
  server.close();
}

const envelope = (body: string) => JSON.parse(body) as { error: { code: string; type: string; message: string } };

describe('createHttpServer', () => {
  let server: Server;
  let port: number;

  beforeAll(async () => {
    ({ server, port } = await start({
      maxHeaderBytes: 2048,
      maxHeadersCount: 10,
      headersTimeoutMs: 400,
      requestTimeoutMs: 800,
      keepAliveTimeoutMs: 300,
    }));
  });

  afterAll(() => stop(server));

  it('answers a normal request', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: '{"a":1}' });
    expect(await res.json()).toEqual({ body: { a: 1 } });
  });

  it(`serves ${MAX_PIPELINED_REQUESTS} pipelined requests in order, and cuts off a client that pipelines more`, async () => {
    const request = (path: string, n: number) =>
      `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: ${`{"n":${n}}`.length}\r\n\r\n{"n":${n}}`;
    const within = Array.from({ length: MAX_PIPELINED_REQUESTS }, (_, n) => request('/slow?within', n)).join('');
    const answered = await rawExchange(port, [within]);
    const bodies = answered.text.match(/\{"body":\{"n":\d+\}\}/g) ?? [];
    expect(bodies).toEqual(Array.from({ length: MAX_PIPELINED_REQUESTS }, (_, n) => `{"body":{"n":${n}}}`));
    // 2,000 requests in one write (a client that never reads its answers): the handler gets no
    // more than the bound, and the connection is closed.
    const flood = Array.from({ length: 2000 }, (_, n) => request('/slow?flood', n)).join('');
    const cut = await rawExchange(port, [flood]);
    expect(served.get('/slow?flood')).toBeLessThanOrEqual(MAX_PIPELINED_REQUESTS);
    expect(cut.ended).not.toBe('timeout');
  });

  it('a head larger than maxHeaderBytes gets 431 in the error envelope and a close', async () => {
    const exchange = await rawExchange(port, [`GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(4000)}\r\n\r\n`]);
    expect(exchange.status).toBe(431);
    expect(envelope(exchange.body).error.code).toBe('request_header_too_large');
    expect(exchange.ended).toBe('closed');
  });

  it('headers past maxHeadersCount are dropped, the request is still served', async () => {
    const extra = Array.from({ length: 50 }, (_, i) => `X-H${i}: v\r\n`).join('');
    const exchange = await rawExchange(port, [
      `POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n${extra}\r\n{}`,
    ]);
    expect(exchange.status).toBe(200);
  });

  it('garbage is a 400 in the envelope, not a dropped socket', async () => {
    const exchange = await rawExchange(port, ['NOT-HTTP at all\r\n\r\n']);
    expect(exchange.status).toBe(400);
    expect(envelope(exchange.body).error.code).toBe('bad_request');
  });

  describe('bad bytes after a request the server is still answering', () => {
    // HTTP/1.1 answers a connection's requests in order: an error written as soon as the parser
    // fails would be read as the answer to the request before it, which the server did serve.
    const statusLines = (text: string) => text.match(/HTTP\/1\.1 \d{3}/g) ?? [];

    it('that request keeps its answer, and the 400 follows it', async () => {
      const exchange = await rawExchange(port, [
        'POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\n{"a":1}NOT-HTTP at all\r\n\r\n',
      ]);
      expect(statusLines(exchange.text)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 400']);
      expect(exchange.body).toContain('{"body":{"a":1}}');
      expect(exchange.text).toContain('"code":"bad_request"');
      expect(exchange.ended).toBe('closed');
    });

    it('an answer written at once, before the parser reached the bad bytes, is followed by the 400 too', async () => {
      const exchange = await rawExchange(port, ['GET /now HTTP/1.1\r\nHost: x\r\n\r\nNOT-HTTP at all\r\n\r\n']);
      expect(statusLines(exchange.text)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 400']);
      expect(exchange.text).toContain('{"now":true}');
      expect(exchange.ended).toBe('closed');
    });

    it('two pipelined requests are both answered, in order, before the 400', async () => {
      const request = (n: number) => `POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\n{"n":${n}}`;
      const exchange = await rawExchange(port, [`${request(1)}${request(2)}GARBAGE\r\n\r\n`]);
      expect(statusLines(exchange.text)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 200', 'HTTP/1.1 400']);
      expect(exchange.text.indexOf('{"n":1}')).toBeLessThan(exchange.text.indexOf('{"n":2}'));
      expect(exchange.ended).toBe('closed');
    });

    it('a response already streaming is finished whole before the 400', async () => {
      const exchange = await rawExchange(port, ['GET /stream HTTP/1.1\r\nHost: x\r\n\r\n', 'NOT-HTTP at all\r\n\r\n'], {
        gapMs: 30,
      });
      expect(statusLines(exchange.text)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 400']);
      expect(exchange.text).toContain('piece 3');
      expect(exchange.text.indexOf('piece 3')).toBeLessThan(exchange.text.indexOf('HTTP/1.1 400'));
    });

    it('an Upgrade request after it gets its 400 after that answer', async () => {
      const exchange = await rawExchange(port, [
        'POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\n{"a":1}' +
          'GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n',
      ]);
      expect(statusLines(exchange.text)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 400']);
      expect(exchange.text).toContain('"code":"upgrade_not_supported"');
    });

    it('after a request that closes the connection, its answer is the last thing sent', async () => {
      for (const version of ['HTTP/1.0', 'HTTP/2.0']) {
        const exchange = await rawExchange(port, [
          `POST /slow ${version}\r\nHost: x\r\nContent-Length: 7\r\n\r\n{"a":1}NOT-HTTP at all\r\n\r\n`,
        ]);
        expect(statusLines(exchange.text.replace('HTTP/1.0', 'HTTP/1.1'))).toEqual(['HTTP/1.1 200']);
        expect(exchange.body).toBe('{"body":{"a":1}}');
        expect(exchange.ended).toBe('closed');
      }
    });

    it('bad bytes inside the request itself still get the 400 at once', async () => {
      const exchange = await rawExchange(port, [
        'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n',
      ]);
      expect(statusLines(exchange.text)).toEqual(['HTTP/1.1 400']);
      expect(exchange.ended).toBe('closed');
    });

    it('a client that leaves while the answer is pending leaves nothing behind', async () => {
      const socket = connect(port, '127.0.0.1');
      await once(socket, 'connect');
      socket.write('POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}GARBAGE\r\n\r\n');
      await new Promise((r) => setTimeout(r, 30));
      socket.destroy();
      await new Promise((r) => setTimeout(r, 250));
      const connections = await new Promise<number>((resolve, reject) =>
        server.getConnections((err, n) => (err ? reject(err) : resolve(n))),
      );
      expect(connections).toBe(0);
      const res = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: '{"b":2}' });
      expect(await res.json()).toEqual({ body: { b: 2 } });
    });
  });

  it('CONNECT gets 405 and Upgrade gets 400, each with a body', async () => {
    const connectExchange = await rawExchange(port, [
      'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n',
    ]);
    expect(connectExchange.status).toBe(405);
    expect(envelope(connectExchange.body).error.code).toBe('method_not_allowed');
    const upgrade = await rawExchange(port, [
      'GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n',
    ]);
    expect(upgrade.status).toBe(400);
    expect(envelope(upgrade.body).error.code).toBe('upgrade_not_supported');
  });

  it('a request without Host is served, and an unknown Expect gets 417 in the envelope', async () => {
    const noHost = await rawExchange(port, ['POST / HTTP/1.1\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}']);
    expect(noHost.status).toBe(200);
    const expectation = await rawExchange(port, [
      'POST / HTTP/1.1\r\nHost: x\r\nExpect: garbage\r\nContent-Length: 2\r\n\r\n{}',
    ]);
    expect(expectation.status).toBe(417);
    expect(envelope(expectation.body).error.code).toBe('expectation_failed');
  });

  it('a client that sends its head too slowly gets 408 and a close', async () => {
    const started = Date.now();
    const exchange = await rawExchange(port, ['GET / HTTP/1.1\r\n', 'Host: x\r\n'], { waitMs: 5000 });
    expect(exchange.status).toBe(408);
    expect(exchange.ended).toBe('closed');
    expect(Date.now() - started).toBeLessThan(4000);
  });

  it('a chunked body that stops is ended by the request timeout', async () => {
    const exchange = await rawExchange(
      port,
      ['POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"a":\r\n'],
      { waitMs: 5000 },
    );
    expect(exchange.ended).toBe('closed');
    expect([null, 408]).toContain(exchange.status);
  });

  it('a body shorter than its Content-Length is ended by the request timeout', async () => {
    const exchange = await rawExchange(port, ['POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"a":'], {
      waitMs: 5000,
    });
    expect(exchange.ended).toBe('closed');
  });

  it('an idle keep-alive connection is closed after keepAliveTimeoutMs', async () => {
    const exchange = await rawExchange(port, ['POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}'], {
      waitMs: 3000,
    });
    expect(exchange.status).toBe(200);
    expect(exchange.ended).toBe('closed');
  });
});

describe('createHttpServer maxConnections', () => {
  it('closes connections beyond the cap, and serves again once one is gone', async () => {
    const { server, port } = await start({ maxConnections: 2 });
    try {
      const held = [connect(port, '127.0.0.1'), connect(port, '127.0.0.1')];
      await Promise.all(held.map((socket) => once(socket, 'connect')));
      await new Promise((r) => setTimeout(r, 100));
      const refused = await rawExchange(port, ['GET / HTTP/1.1\r\nHost: x\r\n\r\n'], { waitMs: 2000 });
      expect(refused.status).toBeNull();
      expect(refused.ended).toBe('closed');
      for (const socket of held) socket.destroy();
      await new Promise((r) => setTimeout(r, 100));
      const res = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: '{}' });
      expect(res.status).toBe(200);
    } finally {
      stop(server);
    }
  });
});
