import { createServer, type Server } from 'node:net';
import { sendRaw } from './raw-http';

/** A TCP server that answers every connection with `reply` (then closes, or not). */
async function server(reply: string, close: boolean): Promise<{ port: number; server: Server }> {
  const s = createServer((socket) => {
    socket.once('data', () => {
      socket.write(reply);
      if (close) socket.end();
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const address = s.address();
  return { port: typeof address === 'object' && address ? address.port : 0, server: s };
}

const request = { parts: [Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n')], finish: 'keep' as const };

describe('sendRaw', () => {
  const servers: Server[] = [];
  afterAll(() => Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve)))));
  const answer = async (reply: string, close: boolean, timeoutMs = 2000) => {
    const { port, server: s } = await server(reply, close);
    servers.push(s);
    return sendRaw('127.0.0.1', port, request, timeoutMs);
  };

  it('reads a Content-Length body without waiting for the close', async () => {
    const outcome = await answer('HTTP/1.1 400 Bad Request\r\nContent-Length: 2\r\n\r\n{}', false);
    expect(outcome).toMatchObject({ kind: 'response', status: 400, bodyBytes: 2 });
  });

  it('de-chunks a chunked body and skips a 100 Continue', async () => {
    const outcome = await answer(
      'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n',
      false,
    );
    expect(outcome.kind === 'response' && [outcome.status, outcome.body.toString()]).toEqual([200, 'abcde']);
  });

  it('names the headers an answer sent twice, whatever their case', async () => {
    const outcome = await answer(
      'HTTP/1.1 200 OK\r\nX-Request-Id: a\r\nx-request-id: b\r\nConstructor: c\r\nContent-Length: 0\r\n\r\n',
      false,
    );
    expect(outcome).toMatchObject({
      kind: 'response',
      headers: { 'x-request-id': 'b' },
      repeatedHeaders: ['x-request-id'],
    });
  });

  it('tells a close without an answer from a hang', async () => {
    expect(await answer('', true)).toMatchObject({ kind: 'closed' });
    expect(await answer('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc', false, 300)).toMatchObject({
      kind: 'hang',
      status: 200,
      bodyBytes: 3,
    });
  });
});
