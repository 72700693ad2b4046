import type { Redis } from 'ioredis';

/**
 * Script calls (EVALSHA / EVAL) Redis received while `run` ran whose arguments include `marker`
 * (a key prefix, an organization id), counted with MONITOR. An EVAL that repeats, from the same
 * client, the arguments of the EVALSHA just before it is the NOSCRIPT retry of that call, not a
 * call of its own: other test files flush the scripts (SCRIPT FLUSH is server-wide) while this
 * one counts.
 */
export async function scriptCallsDuring(redis: Redis, marker: string, run: () => Promise<unknown>): Promise<number> {
  const monitor = await redis.monitor();
  // ioredis can trip over a MONITOR line that arrives while the monitor connection closes (a
  // "command queue state" error on the monitor connection alone); by then the counting is done.
  monitor.on('error', () => undefined);
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
  // MONITOR lines trail the replies a little.
  await new Promise((resolve) => setTimeout(resolve, 100));
  monitor.disconnect();
  return calls;
}
