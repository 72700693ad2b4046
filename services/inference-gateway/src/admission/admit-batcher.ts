import type { Redis } from 'ioredis';
import { luaScript, runScripts, type ScriptCall, type ScriptOutcome } from '@tollway/accounts';
import { REDIS_COMMAND_TIMEOUT_MS } from '@tollway/service-kit';
import { ADMIT_LUA } from './scripts/admit.lua';

const admitScript = luaScript(ADMIT_LUA, 'admit');

/** One admission for the admit script: its four keys and eleven arguments (see admit.lua.ts). */
export interface AdmitCall {
  keys: readonly [string, string, string, string];
  args: readonly [number, number, number, string, number, '0' | '1', string, number, number, string, number];
}

/** The admit script's reply for one request: numbers, and strings where a number has a fraction. */
export type AdmitReply = Array<number | string>;

/** The admit script's arguments that hold for every request of a call: how slices are cut. */
export interface SlicePolicy {
  fraction: number;
  minimum: number;
  ttlMs: number;
}

/** A script call that rides ahead of the admissions in the same write, and what to do with its outcome. */
export interface LeadingCall extends ScriptCall {
  /** Called with the call's error, or with null and its reply. */
  finish(err: unknown, reply?: unknown): void;
}

/** What came of an admission whose request stopped waiting: the script's reply, or the error. */
export type LateAnswer = { reply: AdmitReply; error?: undefined } | { reply?: undefined; error: unknown };

/** Rejects an admission that waited `timeoutMs` for Redis; its call may still run there (see AdmitBatcher). */
export class AdmitTimeoutError extends Error {
  constructor(timeoutMs: number) {
    super(`Redis did not answer the admission within ${timeoutMs} ms.`);
    this.name = 'AdmitTimeoutError';
  }
}

interface Pending {
  call: AdmitCall;
  resolve: (reply: AdmitReply) => void;
  reject: (err: unknown) => void;
  /** Told what came of the call once it comes, if the request stopped waiting before. */
  late: ((answer: LateAnswer) => void) | undefined;
  /** Rejected with AdmitTimeoutError: what comes now goes to `late`. */
  abandoned: boolean;
}

/**
 * Sends the admissions asked for in one event-loop turn in one script call: the script admits them
 * one after the other, each exactly as if alone, so batching changes no decision. A request waits
 * for the end of its turn (where ioredis would send its command anyway) and then one round trip;
 * under load, the requests that arrived together share the call, and the gateway and Redis pay the
 * per-command cost once. The settlements queued meanwhile go first in the same write, so they cost
 * no round trip of their own. Batches are not held back for one another: several may be on their
 * way at once, and Redis runs them in the order they were written.
 *
 * A request waits `timeoutMs` for its answer, then is refused with AdmitTimeoutError. The script
 * may have run all the same (a slow Redis, a slow link): its answer, when it comes, goes to the
 * `late` callback given with the request, so the caller can give back what it took. Only a reply
 * still unread once the event loop has read its sockets counts as late: a timer can fire before a
 * reply that sits read-ready behind a stalled event loop (a long GC, a starved CPU), and that reply
 * is taken as it is. So the connection's own reply timeout (ioredis's `commandTimeout`, which
 * drops the answer) must be far longer than `timeoutMs`.
 */
export class AdmitBatcher {
  private queue: Pending[] = [];
  private scheduled = false;

  /**
   * `leading`: the calls written ahead of each batch of admissions (quota returns, queued
   * settlements), asked at every flush; `alone` is true when no admission goes with them (a kick).
   */
  constructor(
    private readonly redis: Redis,
    private readonly now: () => number,
    private readonly leading: (alone: boolean) => LeadingCall[] = () => [],
    private readonly policy: SlicePolicy = { fraction: 0, minimum: 1, ttlMs: 1 },
    private readonly maxBatch = 200,
    private readonly timeoutMs = REDIS_COMMAND_TIMEOUT_MS,
  ) {}

  /**
   * The script's reply for `call` (an array, see admit.lua.ts); rejects when Redis fails, or with
   * AdmitTimeoutError after `timeoutMs`, after which what comes of the call goes to `late`.
   */
  admit(call: AdmitCall, late?: (answer: LateAnswer) => void): Promise<AdmitReply> {
    return new Promise((resolve, reject) => {
      this.queue.push({ call, resolve, reject, late, abandoned: false });
      this.kick();
    });
  }

  /** Flushes at the end of this turn even when no admission comes: the leading calls go alone. */
  kick(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.scheduled = false;
    const queued = this.queue;
    this.queue = [];
    const leading = this.leading(queued.length === 0);
    const batches: Pending[][] = [];
    for (let start = 0; start < queued.length; start += this.maxBatch) {
      batches.push(queued.slice(start, start + this.maxBatch));
    }
    if (leading.length === 0 && batches.length === 0) return;
    // Runs outside any request: whatever fails refuses the waiting admissions instead of ending the process.
    this.send(leading, batches).catch((err: unknown) => {
      for (const batch of batches) for (const pending of batch) answer(pending, err, null);
    });
  }

  /** One pipeline, one write: the leading calls, then each batch of admissions. */
  private async send(leading: LeadingCall[], batches: Pending[][]): Promise<void> {
    const calls: ScriptCall[] = [...leading];
    const { fraction, minimum, ttlMs } = this.policy;
    for (const batch of batches) {
      const keys: string[] = [];
      const args: Array<string | number> = [this.now(), fraction, minimum, ttlMs];
      for (const { call } of batch) {
        keys.push(...call.keys);
        args.push(...call.args);
      }
      calls.push({ script: admitScript, keys, args });
    }
    let answered = false;
    const timer =
      batches.length === 0
        ? null
        : setTimeout(() => {
            // After this turn's poll phase: a reply already read-ready is read first (see the class).
            setImmediate(() => {
              if (answered) return;
              const err = new AdmitTimeoutError(this.timeoutMs);
              for (const batch of batches)
                for (const pending of batch) {
                  pending.abandoned = true;
                  pending.reject(err);
                }
            });
          }, this.timeoutMs);
    let outcomes: ScriptOutcome[];
    try {
      outcomes = await runScripts(this.redis, calls);
    } finally {
      answered = true;
      if (timer) clearTimeout(timer);
    }

    let at = 0;
    for (const call of leading) {
      const outcome = outcomes[at++];
      if (outcome) call.finish(outcome[0], outcome[1]);
      else call.finish(new Error('no reply'));
    }
    for (const batch of batches) {
      const [err, replies] = outcomes[at++] ?? [new Error('no reply'), null];
      batch.forEach((pending, i) => {
        const reply = Array.isArray(replies) ? (replies as unknown[])[i] : undefined;
        if (err) answer(pending, err, null);
        else if (Array.isArray(reply)) answer(pending, null, reply as AdmitReply);
        else answer(pending, new Error(`admit script gave no reply for request ${i + 1} of ${batch.length}`), null);
      });
    }
  }
}

/** Settles a request's admission, or tells its `late` callback when the request stopped waiting. */
function answer(pending: Pending, err: unknown, reply: AdmitReply | null): void {
  if (!pending.abandoned) {
    if (reply) pending.resolve(reply);
    else pending.reject(err);
    return;
  }
  pending.abandoned = false; // told once
  pending.late?.(reply ? { reply } : { error: err });
}
