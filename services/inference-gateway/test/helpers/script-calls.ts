import type { Redis } from 'ioredis';

/**
 * Script calls (EVALSHA / EVAL) Redis received while `run` ran whose arguments include `marker`
 * (a key prefix, an organization id), counted with MONITOR. An EVAL that repeats, from the same
 * client, the arguments of the EVALSHA just before it is the NOSCRIPT retry of that call, not a
 * call of its own: other test files flush the scripts (SCRIPT FLUSH is server-wide) while this
 * one counts.
 */
export async function scriptCallsDuring(redis: Redis, marker: string, run: () => Promise<unknown>): Promise<number> {
  const monitor = await startMonitor(redis);
  const lastShaCall = new Map<string, string>();
  let calls = 0;
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    const name = String(args[0]).toLowerCase();
    if (source === 'lua' || (name !== 'evalsha' && name !== 'eval')) return;
    if (!args.some((arg) => String(arg).includes(marker))) return;
    const rest = JSON.stringify(args.slice(2));
    if (name === 'eval' && lastShaCall.get(source) === rest) {
      lastShaCall.delete(source);
      return;
    }
    if (name === 'evalsha') lastShaCall.set(source, rest);
    calls += 1;
  });
  await run();
  // MONITOR lines trail the replies, by more than any fixed wait on a busy machine. Redis prints
  // commands in the order it runs them, so once an ECHO sent now shows, every call that ran
  // during `run` has shown too.
  const sentinel = `script-calls-sentinel-${process.hrtime.bigint()}`;
  const seen = new Promise<void>((resolve) => {
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (String(args[0]).toLowerCase() === 'echo' && args[1] === sentinel) resolve();
    });
  });
  await redis.echo(sentinel);
  await seen;
  monitor.disconnect();
  return calls;
}

/**
 * A MONITOR connection. On a busy server ioredis can mistake a monitored line arriving together
 * with MONITOR's own OK for a reply ("command queue state error"): the start then fails before
 * anything was counted, and is tried again. The same can happen as the connection closes, after
 * the counting: that error is ignored. The connection is made here rather than by
 * `redis.monitor()`, whose rejection leaves its connection open, in monitor mode and without an
 * error listener, so the next monitored line threw out of its socket handler ("Unhandled error",
 * a clean-clone CI run of 2026-11-25): a failed start is closed, and errors always have a listener.
 */
async function startMonitor(redis: Redis): Promise<Redis> {
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
