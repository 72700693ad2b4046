import { RoutingSpec } from '../../catalog/catalog.schema';
import { parseVllmLoad } from './load-scraper';
import { ReplicaSet } from './replica-set';

describe('parseVllmLoad', () => {
  it("sums vLLM's running and waiting gauges over label sets and takes the KV cache usage", () => {
    const text = [
      '# HELP vllm:num_requests_running Number of requests in model execution batches.',
      '# TYPE vllm:num_requests_running gauge',
      'vllm:num_requests_running{engine="0",model_name="m"} 3.0',
      'vllm:num_requests_running{engine="1",model_name="m"} 2.0',
      'vllm:num_requests_waiting{engine="0",model_name="m"} 4.0',
      'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25',
      'vllm:num_requests_running_total_junk{} x',
      'http_requests_total 12',
    ].join('\n');
    expect(parseVllmLoad(text)).toEqual({ queued: 9, kvCacheUsage: 0.25 });
  });

  it('says null for an engine without those gauges', () => {
    expect(parseVllmLoad('sglang:num_running_reqs 3\n')).toBeNull();
    expect(parseVllmLoad('')).toBeNull();
  });
});

describe('ReplicaSet load', () => {
  const set = new ReplicaSet(
    [{ base_url: 'http://127.0.0.1:9/v1' }],
    'm',
    { connections: 1, timeoutMs: 1000 },
    RoutingSpec.parse({ policy: 'prefix_cache', scrape_metrics: false, max_staleness_ms: 500 }),
  );
  afterAll(() => set.close());

  it("is the engine's own count while fresh, plus this gateway's sends since; in-flight once stale", () => {
    const replica = set.replicas[0]!;
    replica.outstanding = 1;
    replica.scraped = { queued: 7, kvCacheUsage: 0.5, at: performance.now(), outstandingAt: 0 };
    expect(set.loadOf(0)).toBe(8);
    expect(set.loadSourceOf(0)).toBe('engine_metrics');
    replica.scraped = { queued: 7, kvCacheUsage: 0.5, at: performance.now() - 600, outstandingAt: 0 };
    expect(set.loadOf(0)).toBe(1);
    expect(set.loadSourceOf(0)).toBe('in_flight');
    // Never below what this gateway alone has in flight there.
    replica.outstanding = 5;
    replica.scraped = { queued: 0, kvCacheUsage: 0, at: performance.now(), outstandingAt: 5 };
    expect(set.loadOf(0)).toBe(5);
    replica.outstanding = 0;
  });
});
