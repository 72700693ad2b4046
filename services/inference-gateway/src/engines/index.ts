import type { CatalogModel, EngineSpec } from '../catalog/catalog.schema';
import type { GatewayConfig } from '../config';
import type { Engine } from './engine.types';
import { OpenAICompatibleEngine } from './openai-compatible/openai-compatible.engine';
import type { PoolOptions } from './openai-compatible/replica-set';
import { SimulatedEngine } from './simulated/simulated.engine';

/** What engines are built with besides their catalog entry. */
export type EngineContext = PoolOptions;

/** The engine context the configuration asks for (pool size, timeout, response limits). */
export function engineContextOf(config: GatewayConfig): EngineContext {
  return {
    connections: config.upstreamConnections,
    timeoutMs: config.upstreamTimeoutMs,
    limits: {
      maxResponseBytes: config.maxEngineResponseBytes,
      maxEventBytes: config.maxEngineEventBytes,
      maxStreamBytes: config.maxEngineStreamBytes,
    },
  };
}

/** Builds the engine of one catalog model. A new engine kind = a folder under `engines/` and one case here. */
export function createEngine(model: CatalogModel, context: EngineContext): Engine {
  const spec: EngineSpec = model.engine;
  switch (spec.kind) {
    case 'openai-compatible':
      return new OpenAICompatibleEngine(model.id, spec, context);
    case 'simulated':
      return new SimulatedEngine(spec);
  }
}

/**
 * The engine of every catalog model. `sync` follows catalog reloads: models whose engine entry
 * did not change keep their engine (and its warm connections); replaced ones are closed once
 * their in-flight requests finish.
 */
export class EngineRegistry {
  private readonly engines = new Map<string, { key: string; engine: Engine }>();

  constructor(private readonly context: EngineContext) {}

  /** The engine serving `modelId`, if the catalog has it. */
  get(modelId: string): Engine | undefined {
    return this.engines.get(modelId)?.engine;
  }

  /** Every model id with its engine. */
  entries(): Array<[string, Engine]> {
    return [...this.engines].map(([id, entry]) => [id, entry.engine]);
  }

  /** Brings the engines in line with `models`. */
  sync(models: readonly CatalogModel[]): void {
    const stale = new Map(this.engines);
    for (const model of models) {
      const key = JSON.stringify(model.engine);
      const current = this.engines.get(model.id);
      stale.delete(model.id);
      if (current?.key === key) continue;
      this.engines.set(model.id, { key, engine: createEngine(model, this.context) });
      if (current) void current.engine.close().catch(() => undefined);
    }
    for (const [id, entry] of stale) {
      this.engines.delete(id);
      void entry.engine.close().catch(() => undefined);
    }
  }

  /** Closes every engine. */
  async close(): Promise<void> {
    const engines = [...this.engines.values()];
    this.engines.clear();
    await Promise.all(engines.map((entry) => entry.engine.close()));
  }
}
