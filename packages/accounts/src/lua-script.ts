import { createHash } from 'node:crypto';
import type { ChainableCommander, Redis } from 'ioredis';

/** A Lua script run by EVALSHA, falling back to EVAL once when Redis has not seen it (NOSCRIPT). */
export interface LuaScript {
  /** Short name for the metrics (`admit`, `settle`…). */
  readonly name: string;
  /** SHA-1 of the source, for EVALSHA in a pipeline the caller builds. */
  readonly sha: string;
  readonly source: string;
  run(redis: Redis, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown>;
}

/** Told of every script call once it is answered: the script's name and the round trip in seconds. */
export type ScriptCallObserver = (name: string, seconds: number) => void;

let observer: ScriptCallObserver | null = null;

/**
 * Sets the process's observer of script calls (the metrics of the service that runs them), or
 * null to stop observing. One per process: a process runs one service.
 */
export function observeScriptCalls(next: ScriptCallObserver | null): void {
  observer = next;
}

/** Wraps Lua source so each call is one round trip (EVALSHA; EVAL after a restart flushed the cache). */
export function luaScript(source: string, name = 'script'): LuaScript {
  const sha = createHash('sha1').update(source).digest('hex');
  return {
    name,
    sha,
    source,
    async run(redis, keys, args) {
      const startedAt = observer ? performance.now() : 0;
      try {
        return await redis.evalsha(sha, keys.length, ...keys, ...args);
      } catch (err) {
        if (isNoScript(err)) {
          return redis.eval(source, keys.length, ...keys, ...args);
        }
        throw err;
      } finally {
        observer?.(name, (performance.now() - startedAt) / 1000);
      }
    },
  };
}

/** True for Redis's answer to an EVALSHA of a script it does not hold (restart, SCRIPT FLUSH). */
export function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}

/** One script call: the script, its KEYS and its ARGV. */
export interface ScriptCall {
  script: LuaScript;
  keys: readonly string[];
  args: ReadonlyArray<string | number>;
  /**
   * Sent as EVAL with the script's source instead of EVALSHA: it can never meet NOSCRIPT, whose
   * retry would run it after the calls written behind it. For calls that must reach Redis ahead
   * of the rest of their pipeline (a settlement or returned quota ahead of admissions).
   */
  ordered?: boolean;
}

/** A call's outcome: its error, or null and its reply. */
export type ScriptOutcome = [Error | null, unknown];

/**
 * Runs `calls` as one pipeline, written to the socket at once (not at the end of the turn, as an
 * auto-pipelined command would be), so what is written in one turn reaches Redis in the order it
 * was asked for. A call Redis no longer holds the script of (restart, SCRIPT FLUSH) runs again
 * from its source, after the pipeline: calls whose order matters are sent `ordered`. Never
 * rejects: each call gets its own outcome.
 */
export async function runScripts(redis: Redis, calls: readonly ScriptCall[]): Promise<ScriptOutcome[]> {
  const pipeline = redis.pipeline();
  for (const { script, keys, args, ordered } of calls) {
    if (ordered) pipeline.eval(script.source, keys.length, ...keys, ...args);
    else pipeline.evalsha(script.sha, keys.length, ...keys, ...args);
  }
  let outcomes: ScriptOutcome[];
  const startedAt = observer ? performance.now() : 0;
  try {
    outcomes = ((await pipeline.exec()) ?? []) as ScriptOutcome[];
  } catch (err) {
    outcomes = calls.map(() => [asError(err), null]);
  }
  if (observer) {
    // One round trip carried them all: each call is counted with the pipeline's latency.
    const seconds = (performance.now() - startedAt) / 1000;
    for (const call of calls) observer(call.script.name, seconds);
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

/**
 * Adds a call of `script` to `pipeline` (EVALSHA), resolving with its own reply as soon as that
 * arrives, ahead of the pipeline's later commands (a blocking wait written behind it, say). On
 * NOSCRIPT it runs again from its source on `fallback`, a connection with nothing blocking on it.
 */
export function runInPipeline(
  script: LuaScript,
  pipeline: ChainableCommander,
  keys: readonly string[],
  args: ReadonlyArray<string | number>,
  fallback: Redis,
): Promise<unknown> {
  const startedAt = observer ? performance.now() : 0;
  return new Promise<unknown>((resolve, reject) => {
    pipeline.evalsha(script.sha, keys.length, ...keys, ...args, (err?: Error | null, reply?: unknown) => {
      if (!err) return resolve(reply);
      if (!isNoScript(err)) return reject(err);
      fallback.eval(script.source, keys.length, ...keys, ...args).then(resolve, reject);
    });
  }).finally(() => observer?.(script.name, (performance.now() - startedAt) / 1000));
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}
