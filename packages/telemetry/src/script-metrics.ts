import type { Registry } from 'prom-client';
import { HotCounter, HotHistogram, type CounterChild, type HistogramChild } from './hot-metrics';

/** Latency buckets of a Redis script call, in seconds. */
const SCRIPT_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

/**
 * Registers `tollway_redis_script_calls_total` and `tollway_redis_script_duration_seconds` (label
 * `script`: the script's fixed name, so bounded) and returns the observer that feeds them, shaped
 * for `observeScriptCalls` of `@tollway/accounts`. The pair of series of each name is resolved on
 * its first call and kept in a map keyed by the name itself, so a call costs one map lookup, an
 * increment and a bucket search: no label object, no key string.
 */
export function scriptCallMetrics(registry: Registry): (name: string, seconds: number) => void {
  const calls = new HotCounter(
    {
      name: 'tollway_redis_script_calls_total',
      help: 'Lua script calls sent to Redis, by script',
      labelNames: ['script'],
    },
    registry,
  );
  const duration = new HotHistogram(
    {
      name: 'tollway_redis_script_duration_seconds',
      help: 'Round trip of a Lua script call (of its pipeline when batched), by script, in seconds',
      labelNames: ['script'],
      buckets: SCRIPT_BUCKETS,
    },
    registry,
  );
  const byName = new Map<string, [CounterChild, HistogramChild]>();
  return (name, seconds) => {
    let series = byName.get(name);
    if (!series) byName.set(name, (series = [calls.child(name), duration.child(name)]));
    series[0].inc();
    series[1].observe(seconds);
  };
}
