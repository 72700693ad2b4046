import { z } from 'zod';
import { ModelId, WIRE_BOUNDS } from '@tollway/contracts';
import { MAX_TIMER_MS } from '@tollway/service-kit';

/** One replica of an OpenAI-compatible engine (vLLM, SGLang, llama.cpp server, Ollama, OpenAI). */
export const EngineReplica = z.strictObject({
  /** Base URL up to and including `/v1`, e.g. `http://10.0.0.5:8000/v1`. */
  base_url: z.url({ protocol: /^https?$/ }),
  /** Bearer key sent upstream, if the engine wants one. */
  api_key: z.string().min(1).optional(),
  /** Model name the engine knows; default the catalog id. */
  model: z.string().min(1).optional(),
});
export type EngineReplica = z.infer<typeof EngineReplica>;

/**
 * How a request picks one of a model's replicas (see engines/openai-compatible/routing.ts and the
 * gateway README's routing section).
 */
export const RoutingSpec = z
  .strictObject({
    /**
     * `least_outstanding` (default): the least loaded replica. `prefix_cache`: the replica this
     * gateway sent the longest prefix of the prompt, within the load bound. `sticky`: consistent
     * hashing of the request's `user` (e.g. a session id), within the load bound.
     */
    policy: z.enum(['least_outstanding', 'prefix_cache', 'sticky']).default('least_outstanding'),
    /** A replica is full at this many times the mean load (prefix_cache, sticky), 1–10; default 1.25. */
    load_factor: z.number().min(1).max(10).default(1.25),
    /**
     * Requests a replica may have in flight before the load bound applies at all (prefix_cache,
     * sticky), 1–10 000; default 8. Engines batch (vLLM runs up to `max_num_seqs`, 256 by default,
     * at once), so at low load a cache hit is worth more than an even spread.
     */
    min_load_bound: z.number().int().min(1).max(10_000).default(8),
    /** prefix_cache: characters per hashed prompt block, 16–16 384; default 256 (about 64 tokens). */
    block_chars: z.number().int().min(16).max(16_384).default(256),
    /** prefix_cache: most leading blocks hashed per request (bounds the work per request), 1–4096; default 128. */
    max_blocks: z.number().int().min(1).max(4096).default(128),
    /**
     * prefix_cache: share the index between gateway replicas over Redis pub/sub (each publishes what
     * it records, batched, and applies what the others do; nothing waits on it); default true.
     */
    share_index: z.boolean().default(true),
    /** prefix_cache: most block hashes the index keeps (least recently used dropped), 1–2 000 000 (about 25 bytes of memory each, taken at start); default 200 000. */
    index_entries: z.number().int().min(1).max(2_000_000).default(200_000),
    /** Read load from each replica's vLLM `/metrics` in the background (prefix_cache, sticky); default true. */
    scrape_metrics: z.boolean().default(true),
    /** Time between two scrapes of a replica, ms, 50–60 000; default 250. */
    scrape_interval_ms: z.number().int().min(50).max(60_000).default(250),
    /** A scrape older than this is ignored for the gateway's in-flight count, ms, 100–600 000; default 2000. */
    max_staleness_ms: z.number().int().min(100).max(600_000).default(2000),
  })
  .refine((spec) => spec.max_staleness_ms >= spec.scrape_interval_ms, {
    message: 'max_staleness_ms must be at least scrape_interval_ms (else every scrape is stale before the next)',
    path: ['max_staleness_ms'],
  });
export type RoutingSpec = z.infer<typeof RoutingSpec>;

export const OpenAICompatibleEngineSpec = z.strictObject({
  kind: z.literal('openai-compatible'),
  replicas: z.array(EngineReplica).min(1),
  /** How requests pick a replica; default least_outstanding. */
  routing: RoutingSpec.default(RoutingSpec.parse({})),
  /** Ask for usage on every streamed chunk (vLLM's `stream_options.continuous_usage_stats`); turn off for engines that refuse it. */
  continuous_usage_stats: z.boolean().default(true),
});
export type OpenAICompatibleEngineSpec = z.infer<typeof OpenAICompatibleEngineSpec>;

/**
 * The simulated engine's vLLM-like mode (see engines/simulated/batch-scheduler.ts): a KV cache with
 * prefix caching, continuous batching and a step clock. When set, the fixed delays
 * (`time_to_first_token_ms`, `time_per_output_token_ms`) are not used and `max_concurrency` is the
 * cap on running sequences (vLLM's `max_num_seqs`).
 */
export const PrefixCachingOptions = z.strictObject({
  /** KV cache size in blocks of 16 tokens, 1–10 000 000. */
  kv_cache_blocks: z.number().int().min(1).max(10_000_000),
  /** Prompt tokens prefilled per second (a step's prefill lasts its uncached tokens over this); default 8000. */
  prefill_tokens_per_s: z.number().positive().max(1e9).default(8000),
  /** Fixed part of a scheduler step, ms; default 10. */
  decode_step_ms: z.number().min(0).max(10_000).default(10),
  /** Added to a step per decoding sequence in the batch, ms; default 0.25. */
  decode_ms_per_sequence: z.number().min(0).max(10_000).default(0.25),
  /** Tokens one step may process (decodes count one each; the rest goes to prefills); default 2048. */
  max_batched_tokens: z.number().int().min(16).max(1_000_000).default(2048),
});
export type PrefixCachingOptions = z.infer<typeof PrefixCachingOptions>;

/** Behaviour of the in-process simulated engine; the same options drive the standalone sim server. */
export const SimulationOptions = z.strictObject({
  /** Delay before the first token, ms, at most MAX_TIMER_MS (a longer timer would fire after 1 ms). */
  time_to_first_token_ms: z.number().min(0).max(MAX_TIMER_MS).default(5),
  /** Delay between output tokens, ms, at most MAX_TIMER_MS. */
  time_per_output_token_ms: z.number().min(0).max(MAX_TIMER_MS).default(1),
  /** Requests generated at once; more wait in line like in an engine's scheduler. */
  max_concurrency: z.number().int().min(1).default(256),
  /** Output tokens when the request sets no max_tokens. */
  default_max_tokens: z.number().int().min(1).default(64),
  /** Context window: prompt + max_tokens beyond it is a 400 from the engine. */
  max_model_len: z.number().int().min(16).default(32_768),
  /** Emit `reasoning_content` before the answer, counted as reasoning tokens. */
  reasoning: z.boolean().default(false),
  /** Write until max_tokens instead of ending at a sentence's end (vLLM's `ignore_eos`), for load tests. */
  ignore_eos: z.boolean().default(false),
  /** Shape of parameter errors: vLLM's flat JSON, or a `text/plain` body. */
  error_style: z.enum(['json', 'text']).default('json'),
  /** vLLM-like prefix caching and batching instead of fixed delays; absent = fixed delays. */
  prefix_caching: PrefixCachingOptions.optional(),
});
export type SimulationOptions = z.infer<typeof SimulationOptions>;

export const SimulatedEngineSpec = z.strictObject({
  kind: z.literal('simulated'),
  ...SimulationOptions.shape,
});
export type SimulatedEngineSpec = z.infer<typeof SimulatedEngineSpec>;

export const EngineSpec = z.discriminatedUnion('kind', [OpenAICompatibleEngineSpec, SimulatedEngineSpec]);
export type EngineSpec = z.infer<typeof EngineSpec>;

export const CatalogModel = z.strictObject({
  id: ModelId,
  owned_by: z.string().min(1),
  /** Unix timestamp, seconds. */
  created: z.number().int().min(0),
  engine: EngineSpec,
  /** The narrowed family: `n` must be 1 and both penalties must be 0. */
  narrowed: z.boolean().default(false),
  /** Production-flagged: `top_p` must be within 0.95–1.0. */
  production: z.boolean().default(false),
  /**
   * Context window in tokens: max_tokens (or max_completion_tokens) above it, or prompt + max_tokens
   * above it, is a 400 before any engine work. Default: a simulated engine's `max_model_len`, else 131 072.
   */
  context_length: z.number().int().min(16).optional(),
  /** Largest `n` the model serves (choices per request); default 128, the wire bound. */
  max_n: z.number().int().min(1).max(WIRE_BOUNDS.n.max).default(WIRE_BOUNDS.n.max),
  /** Concurrent requests the model takes across the cluster; null or absent = unlimited. */
  capacity: z.number().int().min(1).nullable().default(null),
  /** Prices in credit units per million tokens. */
  price_per_million: z.strictObject({
    input: z.number().min(0),
    output: z.number().min(0),
  }),
});
export type CatalogModel = z.infer<typeof CatalogModel>;

/** Context window assumed for an engine that does not say (a catalog entry may set `context_length`). */
export const DEFAULT_CONTEXT_LENGTH = 131_072;

/** The model's context window in tokens (see `context_length`). */
export function contextLengthOf(model: CatalogModel): number {
  return (
    model.context_length ?? (model.engine.kind === 'simulated' ? model.engine.max_model_len : DEFAULT_CONTEXT_LENGTH)
  );
}

export const CatalogFile = z.strictObject({ models: z.array(CatalogModel).min(1) }).superRefine((catalog, ctx) => {
  const seen = new Set<string>();
  catalog.models.forEach((model, index) => {
    if (seen.has(model.id))
      ctx.addIssue({ code: 'custom', path: ['models', index, 'id'], message: `duplicate model id "${model.id}"` });
    seen.add(model.id);
  });
});
export type CatalogFile = z.infer<typeof CatalogFile>;
