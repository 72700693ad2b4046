import { setImmediate } from 'node:timers/promises';
import { MAX_TIMER_MS } from '@tollway/service-kit';
import {
  WIRE_BOUNDS,
  type ChatCompletionChunk,
  type ChatCompletionResponse,
  type CreateChatCompletionRequest,
} from '@tollway/contracts';
import type { SimulationOptions } from '../../catalog/catalog.schema';
import { EngineAbortedError, type AbortLike } from '../engine.types';
import { countPromptTokensFairly } from '../../tokenizer/count-tokens';
import { promptBlockHashes, promptTextLength } from '../prefix-blocks';
import { BatchScheduler, BatchSequence, KV_BLOCK_TOKENS, type BatchStats } from './batch-scheduler';
import { planCompletion, type CompletionPlan } from './plan';
import { completionId, partialUsage, renderCompletion, renderStep, tokenSteps } from './render';

/** Steps per batch of a stream generated without delays. */
const INSTANT_BATCH_STEPS = 256;

/**
 * Characters the prefix-caching mode counts as one token (English text runs about four to a
 * token): inside the engine (KV blocks, prefill, cache counters) a prompt is its text's length over
 * this, so a 16-token block is 64 characters and equal prefixes always cut into equal blocks. The
 * usage it reports still counts with the tokenizer, as the gateway does.
 */
const CHARS_PER_TOKEN = 4;

/** Largest `top_logprobs` vLLM accepts. */
const MAX_TOP_LOGPROBS = 20;

/** A parameter the simulated engine refuses, as vLLM would (400). */
export class SimParameterError extends Error {
  constructor(
    message: string,
    readonly param: string | null,
  ) {
    super(message);
    this.name = 'SimParameterError';
  }
}

/** The prefix of a `text/plain` engine error. */
export const TEXT_ERROR_PREFIX = 'Inference error: ';

/** The engine's error body for a refused parameter, in the configured style. */
export function renderSimError(
  err: SimParameterError,
  style: SimulationOptions['error_style'],
): { contentType: string; body: string } {
  if (style === 'text') return { contentType: 'text/plain; charset=utf-8', body: `${TEXT_ERROR_PREFIX}${err.message}` };
  return {
    contentType: 'application/json',
    body: JSON.stringify({
      object: 'error',
      message: err.message,
      type: 'BadRequestError',
      param: err.param,
      code: 400,
    }),
  };
}

/**
 * The simulated engine's scheduler and clock: at most `max_concurrency` generations at once
 * (others queue, as in an engine's scheduler), first token after `time_to_first_token_ms`, one
 * token per `time_per_output_token_ms`. With `prefix_caching` set, vLLM's engine instead (see
 * batch-scheduler.ts): a KV cache with prefix caching, continuous batching, prefill time per
 * uncached prompt token and decode time growing with the batch. Aborts stop a generation at once
 * and report what it had produced. Used in-process by the simulated engine and by the standalone
 * sim server.
 */
export class Simulator {
  private running = 0;
  private readonly waiting: Array<() => void> = [];
  /** The vLLM-like engine clock, in prefix-caching mode. */
  private readonly batch: BatchScheduler | null;

  constructor(readonly options: SimulationOptions) {
    this.batch = options.prefix_caching ? new BatchScheduler(options.prefix_caching, options.max_concurrency) : null;
  }

  /** The engine's vLLM counters and gauges (prefix-caching mode), null in fixed-delay mode. */
  batchStats(): BatchStats | null {
    return this.batch?.snapshot() ?? null;
  }

  /** Prefix-caching mode: empties the KV cache and zeroes the counters when idle (true), as a restart would. */
  resetCache(): boolean {
    return this.batch?.reset() ?? false;
  }

  /** Stops the prefix-caching mode's clock. */
  stop(): void {
    this.batch?.stop();
  }

  /** Checks what the engine itself refuses and plans the completion. Throws SimParameterError. */
  async plan(request: CreateChatCompletionRequest, knownPromptTokens?: number): Promise<CompletionPlan> {
    // Every choice is generated and held until the request ends: bound their number like an
    // engine's sequence limit, whoever called (the gateway checks the same bound first).
    if (request.n != null && request.n > WIRE_BOUNDS.n.max) {
      throw new SimParameterError(`n must be at most ${WIRE_BOUNDS.n.max}, got ${request.n}.`, 'n');
    }
    if (request.top_logprobs != null && request.top_logprobs > MAX_TOP_LOGPROBS) {
      throw new SimParameterError(
        `top_logprobs must be at most ${MAX_TOP_LOGPROBS}, got ${request.top_logprobs}.`,
        'top_logprobs',
      );
    }
    if (request.top_logprobs != null && request.top_logprobs > 0 && !request.logprobs) {
      throw new SimParameterError('when using `top_logprobs`, `logprobs` must be set to true.', 'top_logprobs');
    }
    const promptTokens = knownPromptTokens ?? (await countPromptTokensFairly(request.messages, request.tools));
    const plan = planCompletion(
      request,
      {
        defaultMaxTokens: this.options.default_max_tokens,
        reasoning: this.options.reasoning,
        ignoreEos: this.options.ignore_eos,
      },
      promptTokens,
    );
    const requested = request.max_completion_tokens ?? request.max_tokens ?? 0;
    if (plan.promptTokens + requested > this.options.max_model_len) {
      throw new SimParameterError(
        `This model's maximum context length is ${this.options.max_model_len} tokens. However, you requested ` +
          `${plan.promptTokens + requested} tokens (${plan.promptTokens} in the messages, ${requested} in the completion). ` +
          'Please reduce the length of the messages or completion.',
        null,
      );
    }
    return plan;
  }

  /** Generates a whole completion. */
  async complete(
    request: CreateChatCompletionRequest,
    signal: AbortLike,
    promptTokens?: number,
  ): Promise<ChatCompletionResponse> {
    const plan = await this.plan(request, promptTokens);
    if (this.batch) {
      const sequence = this.sequenceOf(plan, request, this.batch);
      await this.batched(sequence, signal, async () => {
        while (!sequence.finished) await this.nextTokens(sequence, sequence.produced, plan, signal);
      });
      return renderCompletion(plan, completionId(), Math.floor(Date.now() / 1000));
    }
    await this.acquire(signal, plan);
    const started = performance.now();
    try {
      const duration =
        this.options.time_to_first_token_ms + this.options.time_per_output_token_ms * (tokenSteps(plan) - 1);
      if (duration > 0) await this.wait(duration, signal, plan, started);
      return renderCompletion(plan, completionId(), Math.floor(Date.now() / 1000));
    } finally {
      this.releaseSlot();
    }
  }

  /** Generates a stream as batches of chunks (with no delays configured, batches of 256 steps as fast as they are read). */
  async *stream(
    request: CreateChatCompletionRequest,
    signal: AbortLike,
    options: { includeUsage: boolean; continuousUsage: boolean },
    promptTokens?: number,
  ): AsyncGenerator<ChatCompletionChunk[]> {
    const plan = await this.plan(request, promptTokens);
    if (this.batch) {
      yield* this.streamBatched(plan, request, signal, options, this.batch);
      return;
    }
    await this.acquire(signal, plan);
    const started = performance.now();
    try {
      const id = completionId();
      const created = Math.floor(Date.now() / 1000);
      const last = tokenSteps(plan) + 1;
      const { time_to_first_token_ms: ttft, time_per_output_token_ms: tpot } = this.options;
      if (ttft === 0 && tpot === 0) {
        // As fast as the reader takes it, in batches, yielding to other work between them.
        for (let from = 0; from <= last; from += INSTANT_BATCH_STEPS) {
          if (from > 0) await setImmediate();
          if (signal.aborted) throw this.aborted(plan, started);
          const batch: ChatCompletionChunk[] = [];
          for (let step = from; step <= Math.min(last, from + INSTANT_BATCH_STEPS - 1); step++) {
            batch.push(...renderStep(plan, step, id, created, options));
          }
          yield batch;
        }
        return;
      }
      if (ttft > 0) await this.wait(ttft, signal, plan, started);
      yield [...renderStep(plan, 0, id, created, options), ...renderStep(plan, 1, id, created, options)];
      for (let step = 2; step <= last; step++) {
        if (tpot > 0 && step < last) await this.wait(tpot, signal, plan, started);
        if (signal.aborted) throw this.aborted(plan, started);
        const batch = renderStep(plan, step, id, created, options);
        if (batch.length > 0) yield batch;
      }
    } finally {
      this.releaseSlot();
    }
  }

  /** Requests generating now and waiting in line (for the sim server's stats). */
  load(): { running: number; waiting: number } {
    return this.batch?.load() ?? { running: this.running, waiting: this.waiting.length };
  }

  /** A stream in prefix-caching mode: a batch of chunks for the tokens of each engine step. */
  private async *streamBatched(
    plan: CompletionPlan,
    request: CreateChatCompletionRequest,
    signal: AbortLike,
    options: { includeUsage: boolean; continuousUsage: boolean },
    batch: BatchScheduler,
  ): AsyncGenerator<ChatCompletionChunk[]> {
    const sequence = this.sequenceOf(plan, request, batch);
    const id = completionId();
    const created = Math.floor(Date.now() / 1000);
    const steps = tokenSteps(plan);
    let sent = 0;
    batch.submit(sequence);
    const onAbort = () => batch.cancel(sequence);
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      while (sent < steps) {
        await this.nextTokens(sequence, sent, plan, signal);
        const chunks = sent === 0 ? renderStep(plan, 0, id, created, options) : [];
        for (let step = sent + 1; step <= Math.min(sequence.produced, steps); step++) {
          chunks.push(...renderStep(plan, step, id, created, options));
        }
        sent = Math.min(sequence.produced, steps);
        if (sent === steps) chunks.push(...renderStep(plan, steps + 1, id, created, options));
        if (chunks.length > 0) yield chunks;
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
      batch.cancel(sequence);
    }
  }

  /** Runs `body` with `sequence` in the engine, taking it out on an abort or an early end. */
  private async batched(sequence: BatchSequence, signal: AbortLike, body: () => Promise<void>): Promise<void> {
    const batch = this.batch as BatchScheduler;
    batch.submit(sequence);
    const onAbort = () => batch.cancel(sequence);
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      await body();
    } finally {
      signal.removeEventListener('abort', onAbort);
      batch.cancel(sequence);
    }
  }

  /** Waits until the engine produced tokens past `seen`; throws the abort error with what was produced when aborted. */
  private async nextTokens(
    sequence: BatchSequence,
    seen: number,
    plan: CompletionPlan,
    signal: AbortLike,
  ): Promise<void> {
    if (!signal.aborted) await sequence.tokensAfter(seen);
    if (signal.aborted) throw new EngineAbortedError(partialUsage(plan, Math.min(sequence.produced, tokenSteps(plan))));
  }

  /** The engine's view of a planned request: its prompt's block hashes and its output length. */
  private sequenceOf(plan: CompletionPlan, request: CreateChatCompletionRequest, batch: BatchScheduler): BatchSequence {
    const blockChars = KV_BLOCK_TOKENS * CHARS_PER_TOKEN;
    const chars = promptTextLength(request.messages);
    const hashes = promptBlockHashes(request.messages, blockChars, Math.floor(chars / blockChars));
    const sequence = new BatchSequence(Math.max(1, Math.ceil(chars / CHARS_PER_TOKEN)), hashes, tokenSteps(plan));
    if (batch.tooLarge(sequence)) {
      throw new SimParameterError(
        `The request needs ${hashes.length + sequence.privateBlocks} KV cache blocks; the cache has ${batch.capacity}.`,
        null,
      );
    }
    return sequence;
  }

  /**
   * Waits `ms` (at most MAX_TIMER_MS: a JSON answer waits its whole generation at once, and many
   * tokens of a long delay each add up past what a timer holds, which Node fires after 1 ms), or
   * rejects with the abort error as soon as `signal` aborts.
   */
  private wait(ms: number, signal: AbortLike, plan: CompletionPlan, started: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal.aborted) {
        reject(this.aborted(plan, started));
        return;
      }
      const onAbort = () => {
        clearTimeout(timer);
        reject(this.aborted(plan, started));
      };
      const timer = setTimeout(
        () => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        },
        Math.min(ms, MAX_TIMER_MS),
      );
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** The abort error with the tokens generated by now, from the simulated clock. */
  private aborted(plan: CompletionPlan, started: number): EngineAbortedError {
    const elapsed = performance.now() - started;
    const { time_to_first_token_ms: ttft, time_per_output_token_ms: tpot } = this.options;
    const steps = elapsed < ttft ? 0 : tpot > 0 ? 1 + Math.floor((elapsed - ttft) / tpot) : tokenSteps(plan);
    return new EngineAbortedError(partialUsage(plan, Math.min(steps, tokenSteps(plan))));
  }

  private async acquire(signal: AbortLike, plan: CompletionPlan): Promise<void> {
    if (signal.aborted) throw new EngineAbortedError(partialUsage(plan, 0));
    if (this.running < this.options.max_concurrency) {
      this.running++;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const grant = () => {
        signal.removeEventListener('abort', onAbort);
        this.running++;
        resolve();
      };
      const onAbort = () => {
        const at = this.waiting.indexOf(grant);
        if (at !== -1) this.waiting.splice(at, 1);
        reject(new EngineAbortedError(partialUsage(plan, 0)));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(grant);
    });
  }

  private releaseSlot(): void {
    this.running--;
    const next = this.waiting.shift();
    if (next) next();
  }
}
