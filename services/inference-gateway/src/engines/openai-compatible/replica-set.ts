import { Pool } from 'undici';
import type { EngineReplica } from '../../catalog/catalog.schema';
import type { EngineResponseLimits } from '../engine.types';

/** One engine replica: its connection pool and how many requests it has outstanding. */
export interface Replica {
  readonly pool: Pool;
  /** Path of the chat completions endpoint, e.g. `/v1/chat/completions`. */
  readonly chatPath: string;
  /** Path of the model list, used as the readiness probe. */
  readonly modelsPath: string;
  readonly headers: Record<string, string>;
  readonly upstreamModel: string;
  /** `"model":"<upstream name>"` as compact JSON writes it. */
  readonly modelField: string;
  /** Requests sent and not yet finished. */
  outstanding: number;
  /** Where it runs, for logs (origin only; never the key). */
  readonly origin: string;
}

/** Options of the keep-alive pools, and how much of an answer is read (default DEFAULT_ENGINE_RESPONSE_LIMITS). */
export interface PoolOptions {
  connections: number;
  timeoutMs: number;
  limits?: EngineResponseLimits;
}

/**
 * The replicas of one model, chosen by least outstanding requests. Ties rotate, so idle
 * replicas share the load instead of the first one taking it all.
 */
export class ReplicaSet {
  readonly replicas: Replica[];
  private rotation = 0;

  constructor(specs: readonly EngineReplica[], modelId: string, options: PoolOptions) {
    this.replicas = specs.map((spec) => {
      const url = new URL(spec.base_url);
      const base = url.pathname.replace(/\/+$/, '');
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      };
      if (spec.api_key) headers.authorization = `Bearer ${spec.api_key}`;
      return {
        pool: new Pool(url.origin, {
          connections: options.connections,
          pipelining: 1,
          keepAliveTimeout: 30_000,
          keepAliveMaxTimeout: 600_000,
          headersTimeout: options.timeoutMs,
          bodyTimeout: options.timeoutMs,
          connect: { timeout: Math.min(options.timeoutMs, 10_000) },
        }),
        chatPath: `${base}/chat/completions`,
        modelsPath: `${base}/models`,
        headers,
        upstreamModel: spec.model ?? modelId,
        modelField: `"model":${JSON.stringify(spec.model ?? modelId)}`,
        outstanding: 0,
        origin: url.origin,
      };
    });
  }

  /** The replica with the fewest outstanding requests, other than `avoid` when there is a choice. */
  pick(avoid?: Replica): Replica {
    const count = this.replicas.length;
    this.rotation = (this.rotation + 1) % count;
    let best: Replica | undefined;
    for (let i = 0; i < count; i++) {
      const replica = this.replicas[(this.rotation + i) % count] as Replica;
      if (replica === avoid && count > 1) continue;
      if (!best || replica.outstanding < best.outstanding) best = replica;
    }
    return best as Replica;
  }

  /** Closes every pool once its in-flight requests are done. */
  async close(): Promise<void> {
    await Promise.all(this.replicas.map((replica) => replica.pool.close()));
  }
}
