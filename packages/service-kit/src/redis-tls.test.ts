import type { Redis } from 'ioredis';
import { createRedis } from '@tollway/service-kit';
import { startTlsRedis, type TlsRedis } from '@tollway/service-kit/testing';

/**
 * A managed Redis as the factory meets it: TLS only, signed by a private CA, a client
 * certificate required (mutual TLS), and an ACL user in place of the default one.
 */
let server: TlsRedis;
const clients: Redis[] = [];

function client(connection: Parameters<typeof createRedis>[0]): Redis {
  const redis = createRedis(connection, {
    name: 'tls-test',
    failFast: true,
    // No retries: a refusal is final. A stream the server left half-open is destroyed at once.
    extra: { retryStrategy: () => null, maxRetriesPerRequest: 0, disconnectTimeout: 50 },
  });
  redis.on('error', () => undefined);
  clients.push(redis);
  return redis;
}

beforeAll(async () => {
  server = await startTlsRedis({ name: 'tollway', password: 'p@ss:w/rd' });
});

afterAll(async () => {
  for (const redis of clients) redis.disconnect();
  await server.stop();
});

test('rediss:// with the private CA and a client certificate reaches it as the ACL user', async () => {
  const redis = client(server.connection);
  expect(await redis.acl('WHOAMI')).toBe('tollway');
  expect(await redis.ping()).toBe('PONG');
});

test.each([
  [
    'without the CA (the certificate is not trusted)',
    (tls: TlsRedis) => ({ ...tls.connection, redisTlsCa: undefined }),
  ],
  [
    'without the client certificate (mutual TLS is required)',
    (tls: TlsRedis) => ({ ...tls.connection, redisTlsCert: undefined, redisTlsKey: undefined }),
  ],
  ['in plain TCP (redis://)', (tls: TlsRedis) => ({ redisUrl: tls.url.replace('rediss://', 'redis://') })],
  ['with a wrong password', (tls: TlsRedis) => ({ ...tls.connection, redisUrl: tls.url.replace('p%40ss', 'nope') })],
])('%s, it is refused', async (_name, connection) => {
  const redis = client(connection(server));
  const outcome = await redis.ping().catch((err: unknown) => err);
  expect(outcome).toBeInstanceOf(Error);
});
