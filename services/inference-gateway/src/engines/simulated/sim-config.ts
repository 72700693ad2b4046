import { z } from 'zod';
import { envBoolean, loadConfig, MAX_TIMER_MS, portNumber, type ConfigSource } from '@tollway/service-kit';

/** Configuration of the standalone simulated engine (`pnpm sim`). */
export const SimConfigSchema = z.object({
  /** TCP port; default 8000 (vLLM's). */
  port: portNumber.default(8000),
  /** Interface to bind; default 127.0.0.1. */
  host: z.string().default('127.0.0.1'),
  /** Model name listed by `GET /v1/models` (any name is served); default `simulated`. */
  modelName: z.string().min(1).default('simulated'),
  /** Delay before the first token, ms (fractions allowed), at most MAX_TIMER_MS; default 5. */
  timeToFirstTokenMs: z.coerce.number().min(0).max(MAX_TIMER_MS).default(5),
  /** Delay per output token, ms (fractions allowed), at most MAX_TIMER_MS; default 1. */
  timePerOutputTokenMs: z.coerce.number().min(0).max(MAX_TIMER_MS).default(1),
  /** Generations at once, others queue; default 256. */
  maxConcurrency: z.coerce.number().int().min(1).default(256),
  /** Output tokens when a request sets no max_tokens; default 64. */
  defaultMaxTokens: z.coerce.number().int().min(1).default(64),
  /** Context window in tokens; default 32 768. */
  maxModelLen: z.coerce.number().int().min(16).default(32_768),
  /** Emit reasoning_content; default false. */
  reasoning: envBoolean.default(false),
  /** Write until max_tokens instead of ending sentences early (vLLM's ignore_eos); default false. */
  ignoreEos: envBoolean.default(false),
  /** Every SSE event as a write of its own, as real engines send a token at a time; default false (one write per batch). */
  flushEachEvent: envBoolean.default(false),
  /** Parameter errors as vLLM's flat JSON (`json`) or `text/plain` (`text`); default json. */
  errorStyle: z.enum(['json', 'text']).default('json'),
  /** KV cache blocks (16 tokens each): set, the engine models vLLM's prefix caching and batching instead of fixed delays; default unset. */
  kvCacheBlocks: z.coerce.number().int().min(1).max(10_000_000).optional(),
  /** Prefix-caching mode: prompt tokens prefilled per second; default 8000. */
  prefillTokensPerS: z.coerce.number().positive().max(1e9).default(8000),
  /** Prefix-caching mode: fixed part of a scheduler step, ms; default 10. */
  decodeStepMs: z.coerce.number().min(0).max(10_000).default(10),
  /** Prefix-caching mode: ms added to a step per decoding sequence; default 0.25. */
  decodeMsPerSequence: z.coerce.number().min(0).max(10_000).default(0.25),
  /** Prefix-caching mode: tokens one step may process; default 2048. */
  maxBatchedTokens: z.coerce.number().int().min(16).max(1_000_000).default(2048),
});
export type SimConfig = Readonly<z.infer<typeof SimConfigSchema>>;

const SOURCES: Record<keyof z.infer<typeof SimConfigSchema>, ConfigSource> = {
  port: { env: 'SIM_PORT', flag: 'port' },
  host: { env: 'SIM_HOST', flag: 'host' },
  modelName: { env: 'SIM_MODEL_NAME', flag: 'model-name' },
  timeToFirstTokenMs: { env: 'SIM_TTFT_MS', flag: 'ttft-ms' },
  timePerOutputTokenMs: { env: 'SIM_TPOT_MS', flag: 'tpot-ms' },
  maxConcurrency: { env: 'SIM_MAX_CONCURRENCY', flag: 'max-concurrency' },
  defaultMaxTokens: { env: 'SIM_DEFAULT_MAX_TOKENS', flag: 'default-max-tokens' },
  maxModelLen: { env: 'SIM_MAX_MODEL_LEN', flag: 'max-model-len' },
  reasoning: { env: 'SIM_REASONING', flag: 'reasoning', boolean: true },
  ignoreEos: { env: 'SIM_IGNORE_EOS', flag: 'ignore-eos', boolean: true },
  flushEachEvent: { env: 'SIM_FLUSH_EACH_EVENT', flag: 'flush-each-event', boolean: true },
  errorStyle: { env: 'SIM_ERROR_STYLE', flag: 'error-style' },
  kvCacheBlocks: { env: 'SIM_KV_CACHE_BLOCKS', flag: 'kv-cache-blocks' },
  prefillTokensPerS: { env: 'SIM_PREFILL_TOKENS_PER_S', flag: 'prefill-tokens-per-s' },
  decodeStepMs: { env: 'SIM_DECODE_STEP_MS', flag: 'decode-step-ms' },
  decodeMsPerSequence: { env: 'SIM_DECODE_MS_PER_SEQUENCE', flag: 'decode-ms-per-sequence' },
  maxBatchedTokens: { env: 'SIM_MAX_BATCHED_TOKENS', flag: 'max-batched-tokens' },
};

/** Parses the sim server's configuration from the environment and flags. */
export function loadSimConfig(input?: { env?: NodeJS.ProcessEnv; argv?: readonly string[] }): SimConfig {
  return loadConfig(SimConfigSchema, SOURCES, input);
}
