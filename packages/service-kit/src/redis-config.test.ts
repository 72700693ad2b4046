import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import {
  checkRedisConnection,
  ConfigError,
  createRedis,
  describeRedis,
  loadConfig,
  REDIS_CONNECTION_FIELDS,
  REDIS_CONNECTION_SOURCES,
  redisConnectionOf,
  replicaWaitOf,
} from '@tollway/service-kit';

const schema = z
  .object({ ...REDIS_CONNECTION_FIELDS, other: z.string().default('x') })
  .superRefine(checkRedisConnection);
const sources = { ...REDIS_CONNECTION_SOURCES, other: { env: 'OTHER' } };
const load = (env: Record<string, string>) => loadConfig(schema, sources, { env, argv: [] });

const dir = mkdtempSync(path.join(tmpdir(), 'redis-config-test-'));
const pem = path.join(dir, 'ca.pem');
const notPem = path.join(dir, 'ca.txt');
writeFileSync(pem, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
writeFileSync(notPem, 'hello');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the Redis settings every process shares', () => {
  it('default to the local Redis, no Sentinel, no TLS and no replica wait', () => {
    const config = load({});
    expect(config).toMatchObject({ redisUrl: 'redis://127.0.0.1:6379', redisSentinelTls: false });
    expect(config.redisSentinels).toBeUndefined();
    expect(replicaWaitOf(config)).toBeNull();
  });

  it('read the sentinels as host:port (26379 when left out, IPv6 in brackets), and wait for one replica with them', () => {
    const config = load({
      REDIS_URL: 'redis://tollway:s3cret@ignored:6379/2',
      REDIS_SENTINELS: '10.0.0.5:26380, sentinel-b ,[fd00::5]:26381',
      REDIS_SENTINEL_NAME: 'tollway',
      REDIS_SENTINEL_USERNAME: 'watcher',
      REDIS_SENTINEL_PASSWORD: 'pw',
      REDIS_SENTINEL_TLS: 'true',
    });
    expect(config.redisSentinels).toEqual([
      { host: '10.0.0.5', port: 26380 },
      { host: 'sentinel-b', port: 26379 },
      { host: 'fd00::5', port: 26381 },
    ]);
    expect(replicaWaitOf(config)).toEqual({ replicas: 1, timeoutMs: 250 });
    expect(replicaWaitOf({ ...config, redisWaitReplicas: 0 })).toBeNull();
    expect(redisConnectionOf({ ...config, other: 'y' } as never)).not.toHaveProperty('other');
    expect(describeRedis(config)).toBe(
      'the primary "tollway" of sentinels 10.0.0.5:26380,sentinel-b:26379,[fd00::5]:26381 (redis://tollway:***@ignored:6379/2)',
    );
  });

  it.each([
    [{ REDIS_SENTINELS: '10.0.0.5:26379' }, /REDIS_SENTINEL_NAME: is required with REDIS_SENTINELS/],
    [{ REDIS_SENTINELS: '10.0.0.5:26379,', REDIS_SENTINEL_NAME: 'm' }, /REDIS_SENTINELS: "" is not a Sentinel address/],
    [{ REDIS_SENTINELS: 'a:99999', REDIS_SENTINEL_NAME: 'm' }, /REDIS_SENTINELS: "a:99999" is not/],
    [{ REDIS_SENTINELS: 'redis://a:1', REDIS_SENTINEL_NAME: 'm' }, /REDIS_SENTINELS: "redis:\/\/a:1" is not/],
    [{ REDIS_SENTINELS: 'a b:1', REDIS_SENTINEL_NAME: 'm' }, /REDIS_SENTINELS: "a b:1" is not/],
    [{ REDIS_SENTINELS: 'a:1', REDIS_SENTINEL_NAME: 'my master' }, /REDIS_SENTINEL_NAME: must be printable ASCII/],
    [{ REDIS_SENTINEL_NAME: 'm' }, /REDIS_SENTINEL_NAME: applies only with REDIS_SENTINELS/],
    [{ REDIS_SENTINEL_PASSWORD: 'pw' }, /REDIS_SENTINEL_PASSWORD: applies only with REDIS_SENTINELS/],
    [{ REDIS_SENTINEL_TLS: 'true' }, /REDIS_SENTINEL_TLS: applies only with REDIS_SENTINELS/],
    [{ REDIS_SENTINEL_TLS: 'maybe' }, /REDIS_SENTINEL_TLS/],
    [
      { REDIS_SENTINELS: 'a:1', REDIS_SENTINEL_NAME: 'm', REDIS_SENTINEL_USERNAME: 'u' },
      /REDIS_SENTINEL_PASSWORD: is required with REDIS_SENTINEL_USERNAME/,
    ],
    [
      { REDIS_SENTINELS: 'a:1', REDIS_SENTINEL_NAME: 'm', REDIS_URL: '/run/redis.sock' },
      /REDIS_URL \(--redis-url\): must be a redis:\/\/ or rediss:\/\/ URL with REDIS_SENTINELS/,
    ],
    [{ REDIS_TLS_CA_FILE: pem }, /REDIS_TLS_CA_FILE: applies only to TLS connections/],
    [
      { REDIS_URL: 'rediss://h:6380', REDIS_TLS_CA_FILE: path.join(dir, 'absent.pem') },
      /REDIS_TLS_CA_FILE: cannot read .*ENOENT/,
    ],
    [{ REDIS_URL: 'rediss://h:6380', REDIS_TLS_CA_FILE: notPem }, /REDIS_TLS_CA_FILE: .* is not a PEM file/],
    [{ REDIS_URL: 'rediss://h:6380', REDIS_TLS_CERT_FILE: pem }, /REDIS_TLS_KEY_FILE: a client certificate needs both/],
    [{ REDIS_URL: 'rediss://h:6380', REDIS_TLS_KEY_FILE: pem }, /REDIS_TLS_CERT_FILE: a client certificate needs both/],
    [{ REDIS_WAIT_REPLICAS: '-1' }, /REDIS_WAIT_REPLICAS/],
    [{ REDIS_WAIT_TIMEOUT_MS: '700' }, /REDIS_WAIT_TIMEOUT_MS/],
  ])('refuse %j at start, naming the variable', (env, message) => {
    expect(() => load(env)).toThrow(ConfigError);
    expect(() => load(env)).toThrow(message);
  });

  it('take a private CA, and a client certificate, for rediss:// or TLS sentinels', () => {
    const data = load({
      REDIS_URL: 'rediss://h:6380',
      REDIS_TLS_CA_FILE: pem,
      REDIS_TLS_CERT_FILE: pem,
      REDIS_TLS_KEY_FILE: pem,
    });
    expect(data.redisTlsCa).toContain('-----BEGIN CERTIFICATE-----');
    const sentinels = load({
      REDIS_SENTINELS: 'a:1',
      REDIS_SENTINEL_NAME: 'm',
      REDIS_SENTINEL_TLS: 'yes',
      REDIS_TLS_CA_FILE: pem,
    });
    expect(sentinels.redisSentinelTls).toBe(true);
  });

  it('are checked by the factory too: a connection no config check saw is refused, naming the variable', () => {
    expect(() => createRedis({ redisUrl: 'redis://h:1', redisSentinelPassword: 'pw' }, { name: 'bad' })).toThrow(
      /Invalid configuration: REDIS_SENTINEL_PASSWORD: applies only with REDIS_SENTINELS/,
    );
  });

  it('are described without their passwords', () => {
    expect(describeRedis({ redisUrl: 'redis://u:hunter2@127.0.0.1:9?password=hunter3' })).toBe(
      'redis://u:***@127.0.0.1:9?password=***',
    );
    expect(describeRedis({ redisUrl: '/run/redis.sock' })).toBe('/run/redis.sock');
  });
});
