import { Counter, Gauge, type Registry } from 'prom-client';
import type { EngineRegistry } from '../engines';
import type { RoutingStats } from '../engines/engine.types';

/**
 * Replica routing per model, read from the engines at scrape time: decisions by policy and
 * outcome, and the prefix index's hit rate (blocks matched on the chosen replica over blocks
 * looked up) and size. Labels are model, policy and outcome only (no replica, no key).
 */
export function registerRoutingMetrics(registers: Registry[], engines: EngineRegistry): void {
  const each = (read: (model: string, stats: RoutingStats) => void) => {
    for (const [model, engine] of engines.entries()) {
      const stats = engine.routingStats?.();
      if (stats) read(model, stats);
    }
  };
  new Counter({
    name: 'tollway_routing_decisions_total',
    help: 'Replica choices by routing policy and outcome (least_loaded, prefix_hit, prefix_miss, load_spill, sticky, no_key)',
    labelNames: ['model', 'policy', 'outcome'],
    registers,
    collect() {
      this.reset();
      each((model, stats) => {
        for (const [outcome, count] of Object.entries(stats.decisions)) {
          if (count > 0) this.inc({ model, policy: stats.policy, outcome }, count);
        }
      });
    },
  });
  new Counter({
    name: 'tollway_routing_prefix_blocks_queried_total',
    help: 'prefix_cache routing: prompt blocks looked up in the prefix index',
    labelNames: ['model'],
    registers,
    collect() {
      this.reset();
      each((model, stats) => stats.policy === 'prefix_cache' && this.inc({ model }, stats.blocksQueried));
    },
  });
  new Counter({
    name: 'tollway_routing_prefix_blocks_matched_total',
    help: 'prefix_cache routing: prompt blocks the chosen replica was sent before (over queried: the index hit rate)',
    labelNames: ['model'],
    registers,
    collect() {
      this.reset();
      each((model, stats) => stats.policy === 'prefix_cache' && this.inc({ model }, stats.blocksMatched));
    },
  });
  new Counter({
    name: 'tollway_routing_prefix_index_shared_blocks_total',
    help: 'prefix_cache routing with share_index: block hashes published to (sent) and applied from (received) the other gateway replicas',
    labelNames: ['model', 'direction'],
    registers,
    collect() {
      this.reset();
      each((model, stats) => {
        if (stats.policy !== 'prefix_cache') return;
        this.inc({ model, direction: 'sent' }, stats.blocksShared);
        this.inc({ model, direction: 'received' }, stats.blocksReceived);
      });
    },
  });
  new Gauge({
    name: 'tollway_routing_prefix_index_entries',
    help: "prefix_cache routing: block hashes held in this gateway replica's prefix index",
    labelNames: ['model'],
    registers,
    collect() {
      this.reset();
      each((model, stats) => stats.policy === 'prefix_cache' && this.set({ model }, stats.indexEntries));
    },
  });
}
