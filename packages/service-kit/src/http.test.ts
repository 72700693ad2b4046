import { once } from 'node:events';
import { Agent, createServer, get as httpGet, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { closeServer, onClientGone } from './http';

/**
 * A server that answers every request after `delayMs`, counting the answers whose client left
 * first, and the most 'close' listeners a connection has had.
 */
async function start(
  delayMs: number,
): Promise<{ server: Server; port: number; gone: () => number; mostListeners: () => number }> {
  let gone = 0;
  let mostListeners = 0;
  const server = createServer((req, res) => {
    req.resume();
    onClientGone(res, () => (gone += 1));
    mostListeners = Math.max(mostListeners, req.socket.listenerCount('close'));
    const timer = setTimeout(() => res.end('ok'), delayMs);
    res.on('close', () => clearTimeout(timer));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    server,
    port: (server.address() as AddressInfo).port,
    gone: () => gone,
    mostListeners: () => mostListeners,
  };
}

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 5));
}

describe('onClientGone', () => {
  it('tells every answer of a client that pipelined and left, those queued behind the first too, with one listener on the connection', async () => {
    const { server, port, gone, mostListeners } = await start(10_000);
    try {
      const socket = connect(port, '127.0.0.1');
      await once(socket, 'connect');
      socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(25));
      await new Promise((r) => setTimeout(r, 100));
      socket.destroy();
      await until(() => gone() === 25);
      expect(gone()).toBe(25);
      // Node's own few, and one for all the queued answers: a listener each would pass node's
      // limit of 10 and print its leak warning for every such connection.
      expect(mostListeners()).toBeLessThanOrEqual(5);
    } finally {
      server.close();
    }
  });

  it('says nothing of answers that were finished, and nothing after it is stopped', async () => {
    const { server, port, gone } = await start(0);
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(3));
    let received = '';
    socket.on('data', (d: Buffer) => (received += String(d)));
    await until(() => (received.match(/HTTP\/1\.1 200/g) ?? []).length === 3);
    socket.destroy();
    await new Promise((r) => setTimeout(r, 50));
    expect(gone()).toBe(0);
    server.close();
  });
});

describe('closeServer', () => {
  it('closes a keep-alive connection as soon as its answer in flight is done, not at its keep-alive timeout', async () => {
    const { server, port } = await start(300);
    server.keepAliveTimeout = 60_000;
    const agent = new Agent({ keepAlive: true });
    try {
      const answer = fetchText(port, agent);
      await new Promise((resolve) => setTimeout(resolve, 50)); // the request is in flight
      const started = performance.now();
      await closeServer(server);
      const took = performance.now() - started;
      expect(await answer).toEqual({ status: 200, body: 'ok' });
      expect(took).toBeLessThan(2000);
    } finally {
      agent.destroy();
    }
  });
});

function fetchText(port: number, agent: Agent): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    httpGet({ host: '127.0.0.1', port, path: '/', agent }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    }).on('error', reject);
  });
}
