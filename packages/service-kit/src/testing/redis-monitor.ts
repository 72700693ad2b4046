import type { Redis } from 'ioredis';

/** One command Redis ran, as MONITOR shows it: its arguments, the command first, and its source. */
export interface MonitoredCommand {
  args: string[];
  /** `ip:port` of the client that sent it, or `lua` for a command a script ran. */
  source: string;
}

/**
 * The commands Redis ran while `run` ran, as MONITOR shows them (every client's: filter them by
 * their keys, as other test files share the server). MONITOR lines trail the replies, by more than
 * any fixed wait on a busy machine; Redis prints commands in the order it runs them, so once an
 * ECHO sent after `run` shows, every command that ran during it has shown too.
 */
export async function commandsDuring(redis: Redis, run: () => Promise<unknown>): Promise<MonitoredCommand[]> {
  const monitor = await startMonitor(redis);
  const seen: MonitoredCommand[] = [];
  const sentinel = `monitor-sentinel-${process.hrtime.bigint()}`;
  let sentinelSeen: () => void = () => undefined;
  const ended = new Promise<void>((resolve) => (sentinelSeen = resolve));
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    if (String(args[0]).toLowerCase() === 'echo' && args[1] === sentinel) sentinelSeen();
    else seen.push({ args: args.map(String), source });
  });
  try {
    await run();
    await redis.echo(sentinel);
    await ended;
  } finally {
    monitor.disconnect();
  }
  return seen;
}

/**
 * A MONITOR connection. On a busy server ioredis can mistake a monitored line arriving together
 * with MONITOR's own OK for a reply ("command queue state error"): the start then fails before
 * anything was counted, and is tried again. The same can happen as the connection closes, after
 * the counting: that error is ignored. The connection is made here rather than by
 * `redis.monitor()`, whose rejection leaves its connection open, in monitor mode and without an
 * error listener, so the next monitored line threw out of its socket handler ("Unhandled error",
 * clean-clone CI runs of 2026-11-25 and 2026-11-27): a failed start is closed, and errors always
 * have a listener.
 */
export async function startMonitor(redis: Redis): Promise<Redis> {
  for (let attempt = 1; ; attempt++) {
    const monitor = redis.duplicate({ monitor: true, lazyConnect: false });
    monitor.on('error', () => undefined);
    try {
      await new Promise<void>((resolve, reject) => {
        monitor.once('monitoring', () => resolve());
        monitor.once('error', reject);
      });
      return monitor;
    } catch (err) {
      monitor.disconnect();
      if (attempt >= 5) throw err;
    }
  }
}
