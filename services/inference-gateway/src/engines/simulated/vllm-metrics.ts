import { TTFT_BUCKETS_S, type BatchStats } from './batch-scheduler';

/**
 * The simulated engine's `/metrics` in Prometheus text format, under vLLM's own names and
 * `model_name` label, so whatever reads a vLLM fleet (the gateway's load scraper, dashboards)
 * reads the simulator the same way. Prefix cache counters count tokens, as vLLM's do.
 */
export function renderVllmMetrics(stats: BatchStats, modelName: string): string {
  const label = `model_name="${modelName.replace(/["\\\n]/g, '_')}"`;
  const lines: string[] = [];
  const one = (name: string, type: 'gauge' | 'counter', help: string, value: number) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, `${name}{${label}} ${value}`);
  };
  one('vllm:num_requests_running', 'gauge', 'Number of requests in model execution batches.', stats.running);
  one('vllm:num_requests_waiting', 'gauge', 'Number of requests waiting to be processed.', stats.waiting);
  one('vllm:kv_cache_usage_perc', 'gauge', 'KV-cache usage. 1 means 100 percent usage.', stats.kvCacheUsage);
  one(
    'vllm:prefix_cache_queries_total',
    'counter',
    'Prefix cache queries, in terms of number of queried tokens.',
    stats.prefixQueries,
  );
  one(
    'vllm:prefix_cache_hits_total',
    'counter',
    'Prefix cache hits, in terms of number of cached tokens.',
    stats.prefixHits,
  );
  one('vllm:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.', stats.promptTokens);
  one('vllm:generation_tokens_total', 'counter', 'Number of generation tokens processed.', stats.generationTokens);
  const ttft = 'vllm:time_to_first_token_seconds';
  lines.push(`# HELP ${ttft} Histogram of time to first token in seconds.`, `# TYPE ${ttft} histogram`);
  TTFT_BUCKETS_S.forEach((bound, i) => lines.push(`${ttft}_bucket{${label},le="${bound}"} ${stats.ttftBuckets[i]}`));
  lines.push(
    `${ttft}_bucket{${label},le="+Inf"} ${stats.ttftBuckets[TTFT_BUCKETS_S.length]}`,
    `${ttft}_sum{${label}} ${stats.ttftSum}`,
    `${ttft}_count{${label}} ${stats.ttftCount}`,
  );
  return `${lines.join('\n')}\n`;
}
