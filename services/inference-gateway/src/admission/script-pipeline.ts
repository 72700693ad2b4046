import type { Redis } from 'ioredis';
import { isNoScript, type LuaScript } from '@tollway/accounts';

/** One script call: the script, its KEYS and its ARGV. */
export interface ScriptCall {
  script: LuaScript;
  keys: readonly string[];
  args: ReadonlyArray<string | number>;
}

/** A call's outcome: its error, or null and its reply. */
export type ScriptOutcome = [Error | null, unknown];

/**
 * Runs `calls` as one pipeline, written to the socket at once (not at the end of the turn, as an
 * auto-pipelined command would be), so what is written in one turn reaches Redis in the order it
 * was asked for. A call Redis no longer holds the script of (restart, SCRIPT FLUSH) runs again
 * from its source. Never rejects: each call gets its own outcome.
 */
export async function runScripts(redis: Redis, calls: readonly ScriptCall[]): Promise<ScriptOutcome[]> {
  const pipeline = redis.pipeline();
  for (const { script, keys, args } of calls) pipeline.evalsha(script.sha, keys.length, ...keys, ...args);
  let outcomes: ScriptOutcome[];
  try {
    outcomes = ((await pipeline.exec()) ?? []) as ScriptOutcome[];
  } catch (err) {
    outcomes = calls.map(() => [asError(err), null]);
  }
  await Promise.all(
    calls.map(async ({ script, keys, args }, i) => {
      const outcome = outcomes[i];
      if (outcome && !isNoScript(outcome[0])) return;
      try {
        outcomes[i] = [null, await redis.eval(script.source, keys.length, ...keys, ...args)];
      } catch (err) {
        outcomes[i] = [asError(err), null];
      }
    }),
  );
  return outcomes;
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}
