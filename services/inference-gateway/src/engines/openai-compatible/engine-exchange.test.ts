import { createServer, type AddressInfo, type Socket } from 'node:net';
import { Pool } from 'undici';
import { Upstream } from '../../../test/helpers/upstream';
import { ClientAbort } from '../engine.types';
import { DUMP_LIMIT_BYTES, exchange, QUEUE_HIGH_WATER_CHUNKS } from './engine-exchange';

const POST = { method: 'POST' as const, path: '/v1/chat/completions', body: '{}' };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('engine exchange (undici dispatch)', () => {
  let upstream: Upstream;
  let pool: Pool;

  beforeEach(async () => {
    upstream = new Upstream();
    pool = new Pool(await upstream.start(), { connections: 1, pipelining: 1 });
  });

  afterEach(async () => {
    await pool.destroy();
    await upstream.close();
  });

  it('gives the status and content type, and the body in full across many reads', async () => {
    const piece = Buffer.alloc(64 * 1024, 'a');
    upstream.answer = (_req, res) => {
      res.writeHead(201, { 'content-type': 'text/event-stream' });
      let left = 64;
      const more = () => {
        while (left > 0) {
          left--;
          if (!res.write(piece)) return void res.once('drain', more);
        }
        res.end();
      };
      more();
    };
    const response = await exchange(pool, POST, new ClientAbort());
    expect(response.statusCode).toBe(201);
    expect(response.contentType()).toBe('text/event-stream');
    let size = 0;
    let reads = 0;
    for await (const part of response.body) {
      size += part.length;
      reads++;
    }
    expect(size).toBe(64 * piece.length);
    expect(reads).toBeGreaterThan(1);
  });

  it('stops reading the connection while a read waits unconsumed (backpressure reaches the engine)', async () => {
    const total = 256 * 1024 * 1024;
    let written = 0;
    upstream.answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const piece = Buffer.alloc(1024 * 1024);
      const more = () => {
        while (written < total) {
          written += piece.length;
          if (!res.write(piece)) return void res.once('drain', more);
        }
        res.end();
      };
      more();
    };
    const response = await exchange(pool, POST, new ClientAbort());
    const reader = response.body[Symbol.asyncIterator]();
    await reader.next();
    await sleep(200);
    const held = written;
    await sleep(200);
    // Nobody read, so the engine stopped at what the socket buffers hold, far from the whole answer.
    expect(written).toBe(held);
    expect(written).toBeLessThan(64 * 1024 * 1024);
    await reader.return?.();
  });

  /**
   * A pool on a raw TCP server that answers every request with `answer` written in one socket
   * write, or, given `later`, with `answer` (the head, say) and then, 50 ms on, `later` in one write.
   */
  const rawUpstream = async (answer: string, later?: string) => {
    const raw = createServer((socket) => {
      socket.once('data', () => {
        if (later === undefined) return void socket.end(answer);
        socket.write(answer);
        setTimeout(() => socket.end(later), 50);
      });
    });
    await new Promise<void>((resolve) => raw.listen(0, '127.0.0.1', resolve));
    const rawPool = new Pool(`http://127.0.0.1:${(raw.address() as AddressInfo).port}`, { connections: 1 });
    return {
      pool: rawPool,
      close: async () => {
        await rawPool.destroy();
        await new Promise((resolve) => raw.close(resolve));
      },
    };
  };
  const HEAD = 'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n';
  const httpChunks = (chunks: string[]) =>
    chunks.map((chunk) => `${Buffer.byteLength(chunk).toString(16)}\r\n${chunk}\r\n`).join('');
  const chunkedAnswer = (chunks: string[]) => `${HEAD}${httpChunks(chunks)}0\r\n\r\n`;

  it('a read that breaks the framing after whole chunks gives those chunks, then the error', async () => {
    // The consumer already waits when the read comes: two whole chunks, then bytes that are not one.
    const upstreamRaw = await rawUpstream(HEAD, `${httpChunks(['data: a\n\n', 'data: b\n\n'])}zz\r\nnot a chunk\r\n`);
    try {
      const response = await exchange(upstreamRaw.pool, POST, new ClientAbort());
      const reader = response.body[Symbol.asyncIterator]();
      let received = '';
      let error: unknown = null;
      try {
        for (let step = await reader.next(); !step.done; step = await reader.next()) received += step.value.toString();
      } catch (err) {
        error = err;
      }
      expect(received).toBe('data: a\n\ndata: b\n\n');
      expect(error).toBeInstanceOf(Error);
    } finally {
      await upstreamRaw.close();
    }
  });

  it('hands over the HTTP chunks of one socket read together: two steps per read at most, not one per event', async () => {
    // An engine that writes each event as an HTTP chunk of its own; here all 16 leave in one
    // socket write, so they arrive in one read.
    const events = Array.from({ length: 16 }, (_, i) => `data: {"n":${i}}\n\n`);
    const upstreamRaw = await rawUpstream(chunkedAnswer(events));
    try {
      const response = await exchange(upstreamRaw.pool, POST, new ClientAbort());
      const reads: string[] = [];
      for await (const part of response.body) reads.push(part.toString());
      expect(reads.join('')).toBe(events.join(''));
      expect(reads.length).toBeLessThanOrEqual(2);
    } finally {
      await upstreamRaw.close();
    }
  });

  it('holds at most QUEUE_HIGH_WATER_CHUNKS chunks unconsumed, however small (one-byte chunks by the thousand)', async () => {
    const text = 'x'.repeat(20 * QUEUE_HIGH_WATER_CHUNKS);
    const upstreamRaw = await rawUpstream(chunkedAnswer(Array.from(text)));
    try {
      const response = await exchange(upstreamRaw.pool, POST, new ClientAbort());
      const reader = response.body[Symbol.asyncIterator]();
      const steps: number[] = [];
      let received = '';
      for (let next = await reader.next(); !next.done; next = await reader.next()) {
        steps.push(next.value.length);
        received += next.value.toString();
        if (steps.length === 1) await sleep(50); // the parser runs on while nobody takes
      }
      expect(received).toBe(text);
      // One-byte chunks: a step longer than the bound would be more chunks than it lets wait.
      expect(Math.max(...steps)).toBeLessThanOrEqual(QUEUE_HIGH_WATER_CHUNKS);
    } finally {
      await upstreamRaw.close();
    }
  });

  it('dump keeps a short body’s connection for the next request and drops a long one', async () => {
    upstream.answer = (_req, res) => res.end('x'.repeat(1000));
    await (await exchange(pool, POST, new ClientAbort())).body.dump();
    await (await exchange(pool, POST, new ClientAbort())).body.dump();
    expect(upstream.connections).toBe(1);

    let socket: Socket | undefined;
    upstream.answer = (req, res) => {
      socket = req.socket;
      res.end('y'.repeat(DUMP_LIMIT_BYTES * 8));
    };
    await (await exchange(pool, POST, new ClientAbort())).body.dump();
    await sleep(100);
    // (undici opens a fresh idle connection after dropping one, as it does for its own request API)
    expect(socket?.destroyed).toBe(true);
  });

  it('leaving the loop before the end drops the connection', async () => {
    let closedEarly = false;
    upstream.answer = (_req, res) => {
      res.writeHead(200);
      res.write('first');
      res.on('close', () => (closedEarly = !res.writableFinished));
    };
    const response = await exchange(pool, POST, new ClientAbort());
    for await (const part of response.body) {
      expect(part.toString()).toBe('first');
      break;
    }
    await sleep(100);
    expect(closedEarly).toBe(true);
  });

  it('a client abort before the answer rejects; after it, the waiting read rejects and the engine sees the close', async () => {
    upstream.answer = () => undefined; // never answers
    const early = new ClientAbort();
    const pending = exchange(pool, POST, early);
    await sleep(50);
    early.abort();
    await expect(pending).rejects.toThrow();

    let engineSawClose = false;
    upstream.answer = (_req, res) => {
      res.writeHead(200);
      res.write('part');
      res.on('close', () => (engineSawClose = true));
    };
    const late = new ClientAbort();
    const response = await exchange(pool, POST, late);
    const reader = response.body[Symbol.asyncIterator]();
    expect((await reader.next()).value?.toString()).toBe('part');
    const waiting = reader.next();
    late.abort();
    await expect(waiting).rejects.toThrow();
    await sleep(100);
    expect(engineSawClose).toBe(true);
  });

  it('a connection refused rejects with undici’s error code', async () => {
    await upstream.close();
    await expect(exchange(pool, POST, new ClientAbort())).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });
});
