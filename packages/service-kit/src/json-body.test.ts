import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { BodyError, jsonDepthExceeds, readJsonBody } from './json-body';

describe('jsonDepthExceeds', () => {
  it.each([
    ['{}', 1, false],
    ['{"a":[1,{"b":2}]}', 3, false],
    ['{"a":[1,{"b":2}]}', 2, true],
    ['"[[[[[[[["', 1, false],
    ['{"a":"\\"[[[[","b":"x\\\\"}', 1, false],
    ['[[["\\\\\\""]]]', 3, false],
    ['[[["\\\\\\""]]]', 2, true],
  ])('%s with limit %d: %s', (text, limit, expected) => {
    expect(jsonDepthExceeds(Buffer.from(text), limit)).toBe(expected);
  });

  it('scans 10 000 levels without recursion', () => {
    expect(jsonDepthExceeds(Buffer.from('['.repeat(10_000) + ']'.repeat(10_000)), 64)).toBe(true);
  });
});

describe('readJsonBody over a real server', () => {
  let server: Server;
  let port: number;
  const limits = { maxBytes: 1024, maxDepth: 8 };

  beforeAll(async () => {
    server = createServer((req, res) => {
      readJsonBody(req, limits).then(
        (body) => res.end(JSON.stringify({ ok: true, body: body ?? null })),
        (err: unknown) => {
          res.statusCode = 400;
          res.end(JSON.stringify({ kind: err instanceof BodyError ? err.kind : 'other' }));
        },
      );
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    server.closeAllConnections();
    server.close();
  });

  const post = (body: Buffer | string, headers: Record<string, string> = {}) =>
    fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body, headers });

  it('parses JSON, empty bodies and gzip-encoded JSON', async () => {
    expect(await (await post('{"a":1}')).json()).toEqual({ ok: true, body: { a: 1 } });
    expect(await (await post('')).json()).toEqual({ ok: true, body: null });
    const res = await post(gzipSync('{"z":[1,2]}'), { 'content-encoding': 'gzip' });
    expect(await res.json()).toEqual({ ok: true, body: { z: [1, 2] } });
  });

  it.each([
    ['broken JSON', '{"a":', {}, 'invalid_json'],
    ['invalid UTF-8', Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]), {}, 'not_utf8'],
    ['nesting past the limit', '['.repeat(9) + ']'.repeat(9), {}, 'too_deep'],
    ['a body over the limit', `"${'x'.repeat(2000)}"`, {}, 'too_large'],
    ['gzip that is not gzip', '{"a":1}', { 'content-encoding': 'gzip' }, 'bad_encoding'],
    ['an unknown encoding', '{"a":1}', { 'content-encoding': 'zstd-ish' }, 'unsupported_encoding'],
    [
      'an encoding named like a prototype member',
      '{"a":1}',
      { 'content-encoding': 'constructor' },
      'unsupported_encoding',
    ],
    ['an encoding named __proto__', '{"a":1}', { 'content-encoding': '__proto__' }, 'unsupported_encoding'],
    // 100 KB of zeros compresses to about 100 bytes: the limit applies to what it decodes to.
    ['a decompression bomb', gzipSync(Buffer.alloc(100_000, 0x20)), { 'content-encoding': 'gzip' }, 'too_large'],
  ])('%s is a BodyError of its kind', async (_name, body, headers, kind) => {
    const res = await post(body, headers as Record<string, string>);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ kind });
  });
});
