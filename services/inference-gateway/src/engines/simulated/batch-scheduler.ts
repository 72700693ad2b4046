import type { PrefixCachingOptions } from '../../catalog/catalog.schema';
import { KvCache } from './kv-cache';

/** Tokens per KV block, as vLLM's default. */
export const KV_BLOCK_TOKENS = 16;

/** vLLM's buckets of `vllm:time_to_first_token_seconds`. */
export const TTFT_BUCKETS_S = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560,
];

/** One request in the engine: its prompt, what is left of its prefill and output, and its reader. */
export class BatchSequence {
  /** Output tokens produced so far. */
  produced = 0;
  /** Prompt tokens found in the cache at admission. */
  cachedTokens = 0;
  prefillLeft = 0;
  finished = false;
  readonly arrived = performance.now();
  /** When the first token came (ms, performance.now()); null before. */
  firstTokenAt: number | null = null;
  private wake: (() => void) | null = null;

  constructor(
    readonly promptTokens: number,
    /** Chain hashes of the prompt's full blocks. */
    readonly hashes: readonly number[],
    /** Tokens to generate. */
    readonly outputTokens: number,
  ) {}

  /** Blocks beyond the shared prompt blocks: the prompt's last partial block and the output's. */
  get privateBlocks(): number {
    return Math.ceil((this.promptTokens + this.outputTokens) / KV_BLOCK_TOKENS) - this.hashes.length;
  }

  /** Resolves once more tokens were produced than `seen` (or the sequence finished). */
  tokensAfter(seen: number): Promise<void> {
    if (this.produced > seen || this.finished) return Promise.resolve();
    return new Promise((resolve) => {
      this.wake = resolve;
    });
  }

  /** Wakes the reader. */
  notify(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }
}

/** Counters and gauges of the engine, under vLLM's meanings. */
export interface BatchStats {
  running: number;
  waiting: number;
  kvCacheUsage: number;
  /** Prompt tokens looked up in the prefix cache (vLLM counts tokens). */
  prefixQueries: number;
  /** Of those, tokens found. */
  prefixHits: number;
  promptTokens: number;
  generationTokens: number;
  /** Cumulative counts of time to first token per TTFT_BUCKETS_S bucket, plus +Inf last. */
  ttftBuckets: number[];
  ttftSum: number;
  ttftCount: number;
}

/**
 * A continuous-batching engine clock after vLLM's scheduler. At most `maxRunning` sequences run;
 * others wait in arrival order, also while the KV cache cannot hold their blocks. Each step every
 * running sequence past its prefill produces one token, and waiting prompts are prefilled within a
 * token budget (chunked prefill), skipping the blocks the prefix cache holds. A step lasts
 * `decode_step_ms + decode_ms_per_sequence × decoding sequences + prefill tokens / prefill rate`:
 * decoding slows as the batch grows, and prefills in the batch slow every decode.
 */
export class BatchScheduler {
  private cache: KvCache;
  private readonly running: BatchSequence[] = [];
  private readonly waiting: BatchSequence[] = [];
  private timer: NodeJS.Timeout | null = null;
  private readonly stats = {
    prefixQueries: 0,
    prefixHits: 0,
    promptTokens: 0,
    generationTokens: 0,
    ttftBuckets: new Array<number>(TTFT_BUCKETS_S.length + 1).fill(0),
    ttftSum: 0,
    ttftCount: 0,
  };

  constructor(
    private readonly options: PrefixCachingOptions,
    private readonly maxRunning: number,
  ) {
    this.cache = new KvCache(options.kv_cache_blocks);
  }

  /** KV cache size, blocks. */
  get capacity(): number {
    return this.options.kv_cache_blocks;
  }

  /** True when the cache could never hold this sequence (vLLM refuses such prompts). */
  tooLarge(sequence: BatchSequence): boolean {
    return sequence.hashes.length + sequence.privateBlocks > this.options.kv_cache_blocks;
  }

  /** Queues a sequence; its reader waits on `tokensAfter`. */
  submit(sequence: BatchSequence): void {
    this.waiting.push(sequence);
    this.schedule();
  }

  /** Takes a sequence out (its client went away), freeing its blocks. */
  cancel(sequence: BatchSequence): void {
    if (sequence.finished) return;
    const at = this.waiting.indexOf(sequence);
    if (at !== -1) {
      this.waiting.splice(at, 1);
      sequence.finished = true;
      return;
    }
    this.finish(sequence);
  }

  /** Sequences running and waiting. */
  load(): { running: number; waiting: number } {
    return { running: this.running.length, waiting: this.waiting.length };
  }

  snapshot(): BatchStats {
    return {
      ...this.stats,
      ttftBuckets: [...this.stats.ttftBuckets],
      running: this.running.length,
      waiting: this.waiting.length,
      kvCacheUsage: this.cache.usage(),
    };
  }

  /** Empties the cache and zeroes the counters, as a restarted engine; false (nothing done) while requests run or wait. */
  reset(): boolean {
    if (this.running.length > 0 || this.waiting.length > 0) return false;
    this.cache = new KvCache(this.options.kv_cache_blocks);
    this.stats.prefixQueries = 0;
    this.stats.prefixHits = 0;
    this.stats.promptTokens = 0;
    this.stats.generationTokens = 0;
    this.stats.ttftBuckets.fill(0);
    this.stats.ttftSum = 0;
    this.stats.ttftCount = 0;
    return true;
  }

  /** Stops the clock (the server is closing). */
  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private schedule(): void {
    if (this.timer) return;
    this.admit();
    if (this.running.length === 0) return;
    const budget = this.options.max_batched_tokens;
    const decoding: BatchSequence[] = [];
    const prefilling: Array<[BatchSequence, number]> = [];
    for (const sequence of this.running) if (sequence.prefillLeft === 0) decoding.push(sequence);
    let left = budget - decoding.length;
    let prefillTokens = 0;
    for (const sequence of this.running) {
      if (sequence.prefillLeft === 0 || left <= 0) continue;
      const take = Math.min(sequence.prefillLeft, left);
      prefilling.push([sequence, take]);
      left -= take;
      prefillTokens += take;
    }
    const { decode_step_ms: stepMs, decode_ms_per_sequence: perSequenceMs, prefill_tokens_per_s: rate } = this.options;
    const ms = stepMs + perSequenceMs * decoding.length + (prefillTokens * 1000) / rate;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.step(decoding, prefilling);
      this.schedule();
    }, ms);
  }

  /** The end of a step: tokens for every decoding sequence, first tokens for finished prefills. */
  private step(decoding: readonly BatchSequence[], prefilling: ReadonlyArray<[BatchSequence, number]>): void {
    const now = performance.now();
    for (const sequence of decoding) if (!sequence.finished) this.produce(sequence);
    for (const [sequence, take] of prefilling) {
      if (sequence.finished) continue;
      sequence.prefillLeft -= take;
      if (sequence.prefillLeft > 0) continue;
      sequence.firstTokenAt = now;
      this.observeTtft((now - sequence.arrived) / 1000);
      this.produce(sequence);
    }
  }

  private produce(sequence: BatchSequence): void {
    sequence.produced++;
    this.stats.generationTokens++;
    if (sequence.produced >= sequence.outputTokens) this.finish(sequence);
    else sequence.notify();
  }

  private finish(sequence: BatchSequence): void {
    sequence.finished = true;
    const at = this.running.indexOf(sequence);
    if (at !== -1) {
      this.running.splice(at, 1);
      this.cache.release(sequence.hashes, sequence.privateBlocks);
    }
    sequence.notify();
  }

  /** Moves waiting sequences in, in order, while the running cap and the KV cache allow. */
  private admit(): void {
    while (this.waiting.length > 0 && this.running.length < this.maxRunning) {
      const sequence = this.waiting[0] as BatchSequence;
      const hit = this.cache.cachedPrefix(sequence.hashes);
      if (!this.cache.allocate(sequence.hashes, sequence.privateBlocks)) return;
      this.waiting.shift();
      // The last prompt token is always computed, to sample the first output token (as vLLM does).
      sequence.cachedTokens = Math.max(0, Math.min(hit * KV_BLOCK_TOKENS, sequence.promptTokens - 1));
      sequence.prefillLeft = sequence.promptTokens - sequence.cachedTokens;
      this.stats.prefixQueries += sequence.promptTokens;
      this.stats.prefixHits += sequence.cachedTokens;
      this.stats.promptTokens += sequence.promptTokens;
      this.running.push(sequence);
    }
  }

  private observeTtft(seconds: number): void {
    this.stats.ttftSum += seconds;
    this.stats.ttftCount++;
    for (let i = 0; i < TTFT_BUCKETS_S.length; i++) {
      if (seconds <= (TTFT_BUCKETS_S[i] as number)) this.stats.ttftBuckets[i]!++;
    }
    this.stats.ttftBuckets[TTFT_BUCKETS_S.length]!++;
  }
}
