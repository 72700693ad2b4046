import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import type { RedisConnectionConfig, SentinelAddress } from '../redis-config';
import { freePort } from './free-port';
import { spawnRedis, type RedisProcess } from './redis-server';

/**
 * The helper's clients close at once when stopped: ioredis otherwise waits up to 2 s for a socket
 * that a killed node had already closed (its timer is never cleared), and the test process with it.
 */
const QUICK_CLOSE = { disconnectTimeout: 100 } as const;

/** How long a switchover holds the writes on the old primary, ms: past the clients' move to the new one. */
const SWITCHOVER_PAUSE_MS = 10_000;

/** Options of startRedisSentinelGroup. */
export interface RedisSentinelGroupOptions {
  /**
   * The monitored primary's name; default `tollway-` and random letters, so that sentinels left
   * behind by a crashed test never take this group's nodes for theirs (they match by name).
   */
  name?: string;
  /** Replicas of the primary; default 1. */
  replicas?: number;
  /** Sentinels (quorum: a majority of them); default 3. */
  sentinels?: number;
  /** Sentinel's `down-after-milliseconds`: how long a silent primary takes to be judged down; default 1000. */
  downAfterMs?: number;
  /** An ACL user of the data nodes (their `default` user is then off); default none (no password). */
  user?: { name: string; password: string };
  /** The sentinels' own password (`requirepass`); default none. */
  sentinelPassword?: string;
}

/** A primary, its replicas and the sentinels that watch them, all on loopback, for failover tests. */
export interface RedisSentinelGroup {
  name: string;
  sentinels: SentinelAddress[];
  /** What createRedis takes to reach the primary through the sentinels (REDIS_URL and REDIS_SENTINEL_*). */
  connection: RedisConnectionConfig;
  /** The same as environment variables, for a process. */
  env: Record<string, string>;
  /** The data nodes, by port. */
  nodes: Map<number, RedisProcess>;
  /** The primary's port, as the sentinels that answer agree on it. */
  primaryPort(): Promise<number>;
  /** SIGKILL of the primary; resolves with its port once it is gone. */
  killPrimary(): Promise<number>;
  /**
   * A planned switchover, nothing killed, as the service READMEs tell operators to make one: the
   * primary stops taking writes (`CLIENT PAUSE 10000 WRITE`), `SENTINEL FAILOVER` promotes a
   * replica, and once the sentinels name it the old primary is made its replica (`REPLICAOF`)
   * and unpaused.
   * Without the pause, what clients write to the old primary until they have moved (about a
   * second) is lost; without the REPLICAOF, the sentinels demote it only 8-20 s later, and until
   * then the new primary has one replica fewer. Resolves with the new primary's port.
   */
  switchover(): Promise<number>;
  /**
   * Resolves with the new primary's port once every sentinel still alive names a node other than
   * `formerPort`, and that node says it is a primary with `replicas` replicas online.
   */
  waitForNewPrimary(formerPort: number, timeoutMs: number, replicas?: number): Promise<number>;
  /** A plain client of the data node on `port` (no Sentinel), for checks. */
  client(port: number): Redis;
  /** Kills every process and removes their folders. */
  stop(): Promise<void>;
}

/**
 * Starts a replicated Redis watched by Sentinel: a primary, `replicas` replicas and `sentinels`
 * sentinel processes (Debian's `redis-sentinel`) on free loopback ports, with short Sentinel
 * timings; resolves once the sentinels know every replica and each other, so a failover can start.
 */
export async function startRedisSentinelGroup(options: RedisSentinelGroupOptions = {}): Promise<RedisSentinelGroup> {
  const name = options.name ?? `tollway-${randomBytes(4).toString('hex')}`;
  const user = options.user;
  const dir = mkdtempSync(path.join(tmpdir(), 'tollway-sentinel-'));
  const nodes = new Map<number, RedisProcess>();
  const sentinelNodes: RedisProcess[] = [];
  const clients: Redis[] = [];
  const auth = user ? { username: user.name, password: user.password } : {};
  const client = (port: number) => {
    const redis = new Redis({
      port,
      host: '127.0.0.1',
      ...auth,
      maxRetriesPerRequest: 1,
      lazyConnect: true,
      ...QUICK_CLOSE,
    });
    redis.on('error', () => undefined);
    clients.push(redis);
    return redis;
  };
  const sentinelClient = (port: number) => {
    const redis = new Redis({
      port,
      host: '127.0.0.1',
      password: options.sentinelPassword,
      maxRetriesPerRequest: 1,
      commandTimeout: 1000,
      lazyConnect: true,
      ...QUICK_CLOSE,
    });
    redis.on('error', () => undefined);
    clients.push(redis);
    return redis;
  };
  const stop = async () => {
    for (const redis of clients) redis.disconnect();
    await Promise.all([...sentinelNodes, ...nodes.values()].map((node) => node.kill()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const dataArgs = (port: number) => [
      ...['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--dbfilename', `dump-${port}.rdb`],
      ...['--save', '', '--appendonly', 'no', '--repl-diskless-sync', 'yes', '--repl-diskless-sync-delay', '0'],
      // Each word an argument of its own: redis-server joins them into one `user` line.
      ...(user
        ? ['--user', 'default', 'off', '--user', user.name, 'on', `>${user.password}`, '~*', '&*', '+@all']
        : []),
      ...(user ? ['--masteruser', user.name, '--masterauth', user.password] : []),
    ];
    const primary = await freePort();
    nodes.set(primary, await spawnRedis('redis-server', dataArgs(primary), primary));
    for (let i = 0; i < (options.replicas ?? 1); i++) {
      const port = await freePort();
      const args = [...dataArgs(port), '--replicaof', '127.0.0.1', String(primary)];
      nodes.set(port, await spawnRedis('redis-server', args, port));
    }
    const sentinels: SentinelAddress[] = [];
    const count = options.sentinels ?? 3;
    for (let i = 0; i < count; i++) {
      const port = await freePort();
      const file = path.join(dir, `sentinel-${port}.conf`);
      writeFileSync(
        file,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `logfile ${path.join(dir, `sentinel-${port}.log`)}`,
          `sentinel monitor ${name} 127.0.0.1 ${primary} ${Math.floor(count / 2) + 1}`,
          `sentinel down-after-milliseconds ${name} ${options.downAfterMs ?? 1000}`,
          `sentinel failover-timeout ${name} 10000`,
          `sentinel parallel-syncs ${name} 1`,
          ...(user ? [`sentinel auth-user ${name} ${user.name}`, `sentinel auth-pass ${name} ${user.password}`] : []),
          ...(options.sentinelPassword
            ? [`requirepass ${options.sentinelPassword}`, `sentinel sentinel-pass ${options.sentinelPassword}`]
            : []),
          '',
        ].join('\n'),
      );
      sentinelNodes.push(await spawnRedis('redis-sentinel', [file], port));
      sentinels.push({ host: '127.0.0.1', port });
    }
    const asking = sentinels.map(({ port }) => ({ port, redis: sentinelClient(port) }));
    const known = async () => {
      for (const { redis } of asking) {
        const replicas = (await redis.call('SENTINEL', 'REPLICAS', name)) as unknown[];
        const peers = (await redis.call('SENTINEL', 'SENTINELS', name)) as unknown[];
        if (replicas.length < (options.replicas ?? 1) || peers.length < count - 1) return false;
      }
      return true;
    };
    await until(known, 20_000, 'the sentinels did not find the replicas and each other');

    const aliveSentinels = () => asking.filter(({ port }) => sentinelNodes.find((s) => s.port === port)?.alive());
    const primaryPort = async () => {
      for (const { redis } of aliveSentinels()) {
        const reply = (await redis.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name).catch(() => null)) as
          [string, string] | null;
        if (reply) return Number(reply[1]);
      }
      throw new Error('no sentinel answers');
    };
    const userPart = user ? `${encodeURIComponent(user.name)}:${encodeURIComponent(user.password)}@` : '';
    const connection: RedisConnectionConfig = {
      // With sentinels the URL's host is not used: one that resolves nowhere shows it.
      redisUrl: `redis://${userPart}primary.invalid:6379`,
      redisSentinels: sentinels,
      redisSentinelName: name,
      ...(options.sentinelPassword ? { redisSentinelPassword: options.sentinelPassword } : {}),
    };
    const waitForNewPrimary = async (formerPort: number, timeoutMs: number, replicas = 0): Promise<number> => {
      let found = 0;
      await until(
        async () => {
          const named = new Set<number>();
          for (const { redis } of aliveSentinels()) {
            const reply = (await redis.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name)) as [string, string];
            named.add(Number(reply[1]));
          }
          const [port] = [...named];
          if (named.size !== 1 || port === undefined || port === formerPort) return false;
          const node = client(port);
          try {
            const info = await node.info('replication');
            const online = (info.match(/^slave\d+:.*state=online/gm) ?? []).length;
            if (!/^role:master/m.test(info) || online < replicas) return false;
          } finally {
            node.disconnect();
          }
          found = port;
          return true;
        },
        timeoutMs,
        `no new primary within ${timeoutMs} ms`,
      );
      return found;
    };
    return {
      name,
      sentinels,
      connection,
      env: {
        REDIS_URL: connection.redisUrl,
        REDIS_SENTINELS: sentinels.map(({ host, port }) => `${host}:${port}`).join(','),
        REDIS_SENTINEL_NAME: name,
        ...(options.sentinelPassword ? { REDIS_SENTINEL_PASSWORD: options.sentinelPassword } : {}),
      },
      nodes,
      primaryPort,
      client,
      async killPrimary() {
        const port = await primaryPort();
        await nodes.get(port)?.kill();
        return port;
      },
      async switchover() {
        const [first] = aliveSentinels();
        if (!first) throw new Error('no sentinel is alive');
        const formerPort = await primaryPort();
        const former = client(formerPort);
        try {
          await former.call('CLIENT', 'PAUSE', SWITCHOVER_PAUSE_MS, 'WRITE');
          await first.redis.call('SENTINEL', 'FAILOVER', name);
          const promoted = await waitForNewPrimary(formerPort, 30_000);
          // A replica refuses writes by itself: the pause has done its work. Held on, it would
          // also hold the sentinels' hello messages (PUBLISH), and they would take the node for down.
          await former.replicaof('127.0.0.1', promoted);
          await former.call('CLIENT', 'UNPAUSE');
          return promoted;
        } finally {
          former.disconnect();
        }
      },
      waitForNewPrimary,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Polls `check` every 100 ms until it holds (errors count as not yet); throws `message` after `timeoutMs`. */
async function until(check: () => Promise<boolean>, timeoutMs: number, message: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(message);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
