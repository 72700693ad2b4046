import { SimServer } from './sim-server';
import { loadSimConfig } from './sim-config';

/** The standalone simulated engine: `pnpm --filter @tollway/inference-gateway sim --port 8000`. */
async function main(): Promise<void> {
  const config = loadSimConfig();
  const sim = new SimServer(
    {
      time_to_first_token_ms: config.timeToFirstTokenMs,
      time_per_output_token_ms: config.timePerOutputTokenMs,
      max_concurrency: config.maxConcurrency,
      default_max_tokens: config.defaultMaxTokens,
      max_model_len: config.maxModelLen,
      reasoning: config.reasoning,
      ignore_eos: config.ignoreEos,
      error_style: config.errorStyle,
      prefix_caching:
        config.kvCacheBlocks === undefined
          ? undefined
          : {
              kv_cache_blocks: config.kvCacheBlocks,
              prefill_tokens_per_s: config.prefillTokensPerS,
              decode_step_ms: config.decodeStepMs,
              decode_ms_per_sequence: config.decodeMsPerSequence,
              max_batched_tokens: config.maxBatchedTokens,
            },
    },
    config.modelName,
    { flushEachEvent: config.flushEachEvent },
  );
  const port = await sim.listen(config.port, config.host);
  process.stdout.write(
    `${JSON.stringify({ level: 'info', message: 'simulated engine listening', host: config.host, port })}\n`,
  );
  const stop = () => void sim.close().then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err: unknown) => {
  process.stderr.write(`simulated engine failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
