import type { Redis } from 'ioredis';
import { luaScript, runScripts, type ScriptCall } from '@tollway/accounts';
import { ADMIT_LUA } from './scripts/admit.lua';

const admitScript = luaScript(ADMIT_LUA);

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
  finish(err: unknown): void;
}

interface Pending {
  call: AdmitCall;
  resolve: (reply: AdmitReply) => void;
  reject: (err: unknown) => void;
}

/**
 * Sends the admissions asked for in one event-loop turn in one script call: the script admits them
 * one after the other, each exactly as if alone, so batching changes no decision. A request waits
 * for the end of its turn (where ioredis would send its command anyway) and then one round trip;
 * under load, the requests that arrived together share the call, and the gateway and Redis pay the
 * per-command cost once. The settlements queued meanwhile go first in the same write, so they cost
 * no round trip of their own. Batches are not held back for one another: several may be on their
 * way at once, and Redis runs them in the order they were written.
 */
export class AdmitBatcher {
  private queue: Pending[] = [];
  private scheduled = false;

  /**
   * `leading`: sources of calls written ahead of each batch of admissions (quota returns, queued
   * settlements), asked in order at every flush; null when they have nothing.
   */
  constructor(
    private readonly redis: Redis,
    private readonly now: () => number,
    private readonly leading: ReadonlyArray<() => LeadingCall | null> = [],
    private readonly policy: SlicePolicy = { fraction: 0, minimum: 1, ttlMs: 1 },
    private readonly maxBatch = 200,
  ) {}

  /** The script's reply for `call` (an array, see admit.lua.ts); rejects when Redis fails. */
  admit(call: AdmitCall): Promise<AdmitReply> {
    return new Promise((resolve, reject) => {
      this.queue.push({ call, resolve, reject });
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
    const leading: LeadingCall[] = [];
    for (const source of this.leading) {
      const call = source();
      if (call) leading.push(call);
    }
    const batches: Pending[][] = [];
    for (let start = 0; start < queued.length; start += this.maxBatch) {
      batches.push(queued.slice(start, start + this.maxBatch));
    }
    if (leading.length === 0 && batches.length === 0) return;
    // Runs outside any request: whatever fails refuses the waiting admissions instead of ending the process.
    this.send(leading, batches).catch((err: unknown) => {
      for (const batch of batches) for (const pending of batch) pending.reject(err);
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
    const outcomes = await runScripts(this.redis, calls);

    let at = 0;
    for (const call of leading) {
      const outcome = outcomes[at++];
      call.finish(outcome ? outcome[0] : new Error('no reply'));
    }
    for (const batch of batches) {
      const [err, replies] = outcomes[at++] ?? [new Error('no reply'), null];
      batch.forEach((pending, i) => {
        const reply = Array.isArray(replies) ? (replies as unknown[])[i] : undefined;
        if (err) pending.reject(err);
        else if (Array.isArray(reply)) pending.resolve(reply as AdmitReply);
        else pending.reject(new Error(`admit script gave no reply for request ${i + 1} of ${batch.length}`));
      });
    }
  }
}
