import { Pool } from 'undici';
import type { CreateChatCompletionRequest } from '@tollway/contracts';
import type { EngineReplica, RoutingSpec } from '../../catalog/catalog.schema';
import type { EngineResponseLimits } from '../engine.types';
import { LoadScraper, type ScrapedLoad } from './load-scraper';
import type { RoutingStats } from '../engine.types';
import type { PrefixIndexShare, SharedIndexLink } from './prefix-index-share';
import { ReplicaRouter } from './routing';

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
  /** Failed sends (connect errors, timeouts, 5xx answers) since start, for the metrics. */
  errors: number;
  /** Sends tried again on another replica before any byte came back, since start. */
  retries: number;
  /** Result of the last readiness probe (true until one fails). */
  healthy: boolean;
  /** Where it runs, for logs (origin only; never the key). */
  readonly origin: string;
  /** The engine's last vLLM load gauges (scraped in the background), null when none. */
  scraped: ScrapedLoad | null;
}

/** Options of the keep-alive pools, and how much of an answer is read (default DEFAULT_ENGINE_RESPONSE_LIMITS). */
export interface PoolOptions {
  connections: number;
  timeoutMs: number;
  limits?: EngineResponseLimits;
  /** The gateway replicas' shared prefix index (prefix_cache models with `share_index`), if Redis carries one. */
  indexShare?: PrefixIndexShare;
}

/**
 * The replicas of one model, chosen by the model's routing policy (routing.ts). A replica's load
 * is what its engine last reported (vLLM's running + waiting requests, scraped in the background,
 * corrected by this gateway's sends since) while that is fresh, else this gateway's in-flight count.
 */
export class ReplicaSet {
  readonly replicas: Replica[];
  private readonly router: ReplicaRouter;
  private readonly scraper: LoadScraper | null;
  private readonly share: SharedIndexLink | null = null;

  constructor(
    specs: readonly EngineReplica[],
    modelId: string,
    options: PoolOptions,
    readonly routing: RoutingSpec,
  ) {
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
        errors: 0,
        retries: 0,
        healthy: true,
        origin: url.origin,
        scraped: null,
      };
    });
    const router = new ReplicaRouter(routing, { count: this.replicas.length, load: (i) => this.loadOf(i) });
    this.router = router;
    if (routing.policy === 'prefix_cache' && routing.share_index && options.indexShare) {
      const urls = specs.map((spec) => spec.base_url);
      this.share = options.indexShare.link(modelId, urls, (replica, hashes) => router.applyShared(replica, hashes));
      router.shareThrough(this.share);
    }
    // least_outstanding stays as it always was: the in-flight count, nothing scraped.
    const scrape = routing.scrape_metrics && routing.policy !== 'least_outstanding';
    this.scraper = scrape ? new LoadScraper(this.replicas, routing.scrape_interval_ms) : null;
    this.scraper?.start();
  }

  /** The replica for `request` by the routing policy, other than `avoid` when there is a choice. */
  pick(request: CreateChatCompletionRequest, avoid?: Replica): Replica {
    const index = this.router.choose(request, avoid ? this.replicas.indexOf(avoid) : -1);
    return this.replicas[index] as Replica;
  }

  /**
   * Replica `index`'s load: the engine's running + waiting requests as last scraped, plus this
   * gateway's sends since, while the scrape is at most max_staleness_ms old; else in flight from here.
   */
  loadOf(index: number): number {
    const replica = this.replicas[index] as Replica;
    const scraped = replica.scraped;
    if (scraped === null || performance.now() - scraped.at > this.routing.max_staleness_ms) return replica.outstanding;
    return Math.max(replica.outstanding, scraped.queued + replica.outstanding - scraped.outstandingAt);
  }

  /** Where each replica's load comes from now. */
  loadSourceOf(index: number): 'engine_metrics' | 'in_flight' {
    const scraped = (this.replicas[index] as Replica).scraped;
    const fresh = scraped !== null && performance.now() - scraped.at <= this.routing.max_staleness_ms;
    return fresh ? 'engine_metrics' : 'in_flight';
  }

  routingStats(): RoutingStats {
    return this.router.stats();
  }

  /** Stops the scraper and closes every pool once its in-flight requests are done. */
  async close(): Promise<void> {
    this.scraper?.stop();
    this.share?.close();
    await Promise.all(this.replicas.map((replica) => replica.pool.close()));
  }
}
