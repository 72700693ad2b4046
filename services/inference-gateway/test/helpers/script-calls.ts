import type { Redis } from 'ioredis';
import { commandsDuring } from '@tollway/service-kit/testing';

/**
 * Script calls (EVALSHA / EVAL) Redis received while `run` ran whose arguments include `marker`
 * (a key prefix, an organization id), counted with MONITOR. An EVAL that repeats, from the same
 * client, the arguments of the EVALSHA just before it is the NOSCRIPT retry of that call, not a
 * call of its own: other test files flush the scripts (SCRIPT FLUSH is server-wide) while this
 * one counts.
 */
export async function scriptCallsDuring(redis: Redis, marker: string, run: () => Promise<unknown>): Promise<number> {
  const lastShaCall = new Map<string, string>();
  let calls = 0;
  for (const { args, source } of await commandsDuring(redis, run)) {
    const name = String(args[0]).toLowerCase();
    if (source === 'lua' || (name !== 'evalsha' && name !== 'eval')) continue;
    if (!args.some((arg) => arg.includes(marker))) continue;
    const rest = JSON.stringify(args.slice(2));
    if (name === 'eval' && lastShaCall.get(source) === rest) {
      lastShaCall.delete(source);
      continue;
    }
    if (name === 'evalsha') lastShaCall.set(source, rest);
    calls += 1;
  }
  return calls;
}
