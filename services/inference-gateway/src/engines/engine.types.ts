import { EventEmitter } from 'node:events';
import type { ChatCompletionChunk, ChatCompletionResponse, CreateChatCompletionRequest } from '@tollway/contracts';
import type { SettledUsage } from '../admission/admission.types';
import type { RoutingSpec } from '../catalog/catalog.schema';

/**
 * Raised once, with an `abort` event, when the client goes away. An EventEmitter rather than an
 * AbortController: in Node 20 an AbortController and its signal cost about 1.8 µs to create (an
 * EventTarget), an EventEmitter with a listener 0.1 µs, and this is made for every request. It
 * also listens the way an AbortSignal does (AbortLike), for the simulated engine's scheduler.
 */
export class ClientAbort extends EventEmitter {
  aborted = false;

  /** Signals the abort (once). */
  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.emit('abort');
  }

  /** AbortSignal's way to listen, so code written for an AbortSignal (AbortLike) takes this too. */
  addEventListener(_type: 'abort', listener: () => void): void {
    this.once('abort', listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    this.off('abort', listener);
  }
}

/** The part of an AbortSignal that the simulated engine uses: an AbortSignal or a ClientAbort. */
export interface AbortLike {
  readonly aborted: boolean;
  /** Listens for the abort (at most once: an abort happens once). */
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/** How much of an engine's answer the gateway holds or relays for one request (see config.ts). */
export interface EngineResponseLimits {
  /** Largest non-streamed response or error body, bytes. */
  maxResponseBytes: number;
  /** Largest single SSE event, bytes. */
  maxEventBytes: number;
  /** Largest whole stream, bytes. */
  maxStreamBytes: number;
}

/** The limits' defaults (the config schema's defaults too). */
export const DEFAULT_ENGINE_RESPONSE_LIMITS: Readonly<EngineResponseLimits> = Object.freeze({
  maxResponseBytes: 16 * 1024 * 1024,
  maxEventBytes: 1024 * 1024,
  maxStreamBytes: 256 * 1024 * 1024,
});

/** One chat completion as the gateway hands it to an engine: validated, spec fields only. */
export interface EngineCall {
  /** The request; `model` is the catalog id (engines map it to their own name). */
  request: CreateChatCompletionRequest;
  /** Aborted when the client goes away: the engine must stop generating at once. */
  signal: ClientAbort;
  /** The gateway's count of the prompt, for engines that would otherwise count it again (the simulated one). */
  promptTokens?: number;
  /** W3C `traceparent` of the gateway's engine-call span, sent to engines that speak HTTP; absent when tracing is off. */
  traceparent?: string;
}

/** The result of an async iterator's last step, shared by the engines' iterators (one frozen object, no allocation). */
export const ITERATION_DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/**
 * Engines may attach a chunk's exact JSON text under this key (a symbol, so JSON.stringify skips
 * it). The relay then sends that text as it is when it leaves the chunk unchanged, which saves a
 * re-serialisation per chunk; whoever changes a chunk deletes the key.
 */
export const RAW_JSON: unique symbol = Symbol('raw-json');

/** A streamed chunk, possibly carrying its exact JSON text. */
export type EngineChunk = ChatCompletionChunk & { [RAW_JSON]?: string };

/**
 * One item of a stream batch: a chunk, or the exact compact JSON text of a chunk the relay will
 * pass on unchanged (see `streaming/passthrough.ts`): most chunks of a long stream, which then
 * cost neither a parse nor a re-serialisation.
 */
export type StreamItem = EngineChunk | string;

/** A non-streamed answer. */
export interface CompletionResult {
  completion: ChatCompletionResponse;
  /** The engine's exact bytes, when they can be sent as they are (saves a re-serialisation). */
  raw?: Buffer;
}

/**
 * A streamed answer, returned only once the engine produced its first chunk, so a refusal
 * still reaches the client with its real status. Chunks come in batches (one per read from the
 * engine) so the relay writes one socket write per batch, not per chunk.
 */
export interface ChunkStream {
  /** The first batch, non-empty. */
  first: StreamItem[];
  /** The rest; ends when the engine signalled the end (`[DONE]`), throws when the stream broke. */
  rest: AsyncIterable<StreamItem[]>;
}

/** The engine-side half of a model: one kind per folder under `engines/`, created in `engines/index.ts`. */
export interface Engine {
  /** Generates a whole completion. Rejects with EngineHttpError when the engine refused. */
  complete(call: EngineCall): Promise<CompletionResult>;
  /** Starts a streamed completion; resolves after the first chunk. Rejects like `complete`. */
  stream(call: EngineCall): Promise<ChunkStream>;
  /** True when at least one replica answers (readiness). */
  probe(): Promise<boolean>;
  /** Each replica's probe, in catalog order (the console's models page); absent = one replica, `probe()`. */
  probeReplicas?(): Promise<boolean[]>;
  /** Frees connections once in-flight requests are done. */
  close(): Promise<void>;
  /** Engines with remote replicas report each one, for the metrics (read at scrape time). */
  replicaStats?(): readonly ReplicaStats[];
  /** Engines that choose among replicas report their routing, for the metrics and the admin API. */
  routingStats?(): RoutingStats;
}

/** What a routing decision did, the `outcome` label of `tollway_routing_decisions_total`. */
export const ROUTING_OUTCOMES = [
  /** least_outstanding: the least loaded replica. */
  'least_loaded',
  /** prefix_cache: to the replica holding the longest prefix of the prompt. */
  'prefix_hit',
  /** prefix_cache: no replica was sent any of the prompt's blocks; the least loaded. */
  'prefix_miss',
  /** prefix_cache or sticky: the replica of choice was at its load bound; the next best. */
  'load_spill',
  /** sticky: the key's replica on the hash ring. */
  'sticky',
  /** sticky: the request had no `user`; the least loaded. */
  'no_key',
] as const;
export type RoutingOutcome = (typeof ROUTING_OUTCOMES)[number];

/** Counters of one model's routing, read by the metrics and the admin API. */
export interface RoutingStats {
  readonly policy: RoutingSpec['policy'];
  /** Decisions by outcome. */
  readonly decisions: Readonly<Record<RoutingOutcome, number>>;
  /** prefix_cache: prompt blocks looked up in the index. */
  readonly blocksQueried: number;
  /** prefix_cache: of those, blocks the chosen replica was known to hold (the index's hit rate). */
  readonly blocksMatched: number;
  /** prefix_cache: hashes held in the index. */
  readonly indexEntries: number;
  /** prefix_cache with share_index: block hashes this replica published to the other gateway replicas. */
  readonly blocksShared: number;
  /** prefix_cache with share_index: block hashes received from the other gateway replicas. */
  readonly blocksReceived: number;
}

/** One engine replica as the metrics see it. */
export interface ReplicaStats {
  /** Scheme, host and port (never a key or path). */
  readonly origin: string;
  readonly outstanding: number;
  readonly errors: number;
  readonly retries: number;
  readonly healthy: boolean;
  /** The load routing sees: the engine's running + waiting requests when scraped and fresh, else in flight. */
  readonly load: number;
  /** Where `load` comes from. */
  readonly loadSource: 'engine_metrics' | 'in_flight';
  /** The engine's `vllm:kv_cache_usage_perc` (0–1) when scraped and fresh, else null. */
  readonly kvCacheUsage: number | null;
}

/**
 * Thrown by an engine call that was aborted because the client went away; `usage` is what the
 * engine produced before the abort when the engine can tell (null when it cannot).
 */
export class EngineAbortedError extends Error {
  constructor(readonly usage: SettledUsage | null) {
    super('The engine call was aborted because the client went away.');
    this.name = 'EngineAbortedError';
  }
}

/** The stream broke: an `{"error":…}` event from the engine, or the connection ended before `[DONE]`. */
export class EngineStreamError extends Error {
  constructor(
    message: string,
    readonly engineError: Record<string, unknown> | null,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'EngineStreamError';
  }
}
