import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { freePort } from './free-port';

/** A private redis-server for outage tests: it can hang, die and come back on the same port. */
export interface PrivateRedis {
  url: string;
  /** SIGSTOP: connections stay open, nothing answers. */
  pause(): void;
  /** SIGCONT after pause. */
  resume(): void;
  /** SIGKILL; resolves once it is gone. */
  kill(): Promise<void>;
  /** Starts it again on the same port and data folder (append-only file, so keys survive). */
  restart(): Promise<void>;
  /** Kills it and removes its data. */
  stop(): Promise<void>;
}

/** How to reach a node for the readiness probe: TLS options when it speaks only TLS. */
export interface ProbeOptions {
  tls?: tls.ConnectionOptions;
}

/**
 * True once a Redis (or sentinel) on `port` answers a PING: PONG, or NOAUTH from one that wants a
 * password (it is up). Not while it is still loading its data.
 */
export async function redisAnswers(port: number, options: ProbeOptions = {}): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = options.tls
      ? tls.connect({ ...options.tls, port, host: '127.0.0.1' })
      : net.connect(port, '127.0.0.1');
    socket.setTimeout(500);
    socket.once(options.tls ? 'secureConnect' : 'connect', () => socket.write('PING\r\n'));
    socket.once('data', (data) => {
      socket.destroy();
      resolve(/^(\+PONG|-NOAUTH)/.test(data.toString()));
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

/** A redis-server (or redis-sentinel) process this test started. */
export interface RedisProcess {
  port: number;
  /** SIGSTOP: connections stay open, nothing answers. */
  pause(): void;
  /** SIGCONT after pause. */
  resume(): void;
  /** SIGKILL; resolves once it is gone. */
  kill(): Promise<void>;
  /** True until it was killed or exited. */
  alive(): boolean;
}

/**
 * Spawns `command` (redis-server, or redis-sentinel with its config file) with `args` and
 * resolves once the node on `port` answers (10 s at most).
 */
export async function spawnRedis(
  command: string,
  args: readonly string[],
  port: number,
  probe: ProbeOptions = {},
): Promise<RedisProcess> {
  const child: ChildProcess = spawn(command, args, { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const alive = () => child.exitCode === null && child.signalCode === null;
  const deadline = Date.now() + 10_000;
  while (!(await redisAnswers(port, probe))) {
    if (!alive() || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${command} did not start on port ${port}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    port,
    pause: () => child.kill('SIGSTOP'),
    resume: () => child.kill('SIGCONT'),
    alive,
    async kill() {
      if (!alive()) return;
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Starts `redis-server` on a free port with an append-only file in a temporary folder. */
export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'tollway-redis-'));
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', ''];
  const launch = () => spawnRedis('redis-server', [...args, '--appendonly', 'yes', '--appendfsync', 'always'], port);
  let node = await launch();
  return {
    url: `redis://127.0.0.1:${port}`,
    pause: () => node.pause(),
    resume: () => node.resume(),
    kill: () => node.kill(),
    async restart() {
      node = await launch();
    },
    async stop() {
      await node.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
