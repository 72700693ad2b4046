import type { Pool } from 'undici';

/** How long an engine without vLLM metrics is left alone before it is asked again, ms. */
const RECHECK_WITHOUT_METRICS_MS = 30_000;

/** Largest `/metrics` body read, bytes (vLLM's is a few tens of KiB). */
const MAX_METRICS_BYTES = 1024 * 1024;

/** What a replica's engine last said about its load (vLLM's gauges). */
export interface ScrapedLoad {
  /** `vllm:num_requests_running` + `vllm:num_requests_waiting`, summed over label sets. */
  queued: number;
  /** `vllm:kv_cache_usage_perc`, 0–1; null when absent. */
  kvCacheUsage: number | null;
  /** When it was read (performance.now(), ms). */
  at: number;
  /** The gateway's own in-flight count to the replica when it was read. */
  outstandingAt: number;
}

/** The part of a replica the scraper needs. */
export interface ScrapeTarget {
  readonly pool: Pool;
  readonly headers: Record<string, string>;
  outstanding: number;
  /** Last scrape, null before one succeeded. */
  scraped: ScrapedLoad | null;
}

/**
 * Reads vLLM's load gauges from `text` (Prometheus text format). Null when the engine exposes
 * neither `vllm:num_requests_running` nor `vllm:num_requests_waiting`.
 */
export function parseVllmLoad(text: string): { queued: number; kvCacheUsage: number | null } | null {
  let queued = 0;
  let found = false;
  let kvCacheUsage: number | null = null;
  for (const line of text.split('\n')) {
    if (!line.startsWith('vllm:')) continue;
    const name = line.slice(0, line.search(/[{ ]/));
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (!Number.isFinite(value)) continue;
    if (name === 'vllm:num_requests_running' || name === 'vllm:num_requests_waiting') {
      queued += value;
      found = true;
    } else if (name === 'vllm:kv_cache_usage_perc') {
      kvCacheUsage = Math.max(kvCacheUsage ?? 0, value);
    }
  }
  return found ? { queued, kvCacheUsage } : null;
}

/**
 * Scrapes each replica's `/metrics` in the background every `intervalMs`, never on the request
 * path: routing reads the last result when it is at most `maxStalenessMs` old, and the gateway's
 * in-flight count otherwise. An engine without vLLM's gauges (404, or none in the text) is asked
 * again only every 30 s. Timers are unref'd; `stop()` ends them.
 */
export class LoadScraper {
  private readonly timers: NodeJS.Timeout[] = [];
  private stopped = false;

  constructor(
    private readonly targets: readonly ScrapeTarget[],
    private readonly intervalMs: number,
  ) {}

  start(): void {
    for (const target of this.targets) this.loop(target, 0);
  }

  stop(): void {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.length = 0;
  }

  private loop(target: ScrapeTarget, delayMs: number): void {
    if (this.stopped) return;
    const timer = setTimeout(() => {
      this.timers.splice(this.timers.indexOf(timer), 1);
      void scrapeOnce(target, this.intervalMs).then((ok) =>
        this.loop(target, ok ? this.intervalMs : RECHECK_WITHOUT_METRICS_MS),
      );
    }, delayMs);
    timer.unref();
    this.timers.push(timer);
  }
}

/** One scrape of `target`; true when it gave vLLM's gauges (a failed request is retried at the usual pace). */
export async function scrapeOnce(target: ScrapeTarget, timeoutMs: number): Promise<boolean> {
  const outstandingAt = target.outstanding;
  try {
    const response = await target.pool.request({
      method: 'GET',
      path: '/metrics',
      headers: target.headers.authorization ? { authorization: target.headers.authorization } : {},
      headersTimeout: Math.max(timeoutMs, 1000),
      bodyTimeout: Math.max(timeoutMs, 1000),
    });
    if (response.statusCode !== 200) {
      await response.body.dump();
      target.scraped = null;
      return response.statusCode >= 500;
    }
    const parts: Buffer[] = [];
    let size = 0;
    for await (const part of response.body) {
      size += (part as Buffer).length;
      if (size > MAX_METRICS_BYTES) {
        response.body.destroy();
        target.scraped = null;
        return false;
      }
      parts.push(part as Buffer);
    }
    const load = parseVllmLoad(Buffer.concat(parts).toString('utf8'));
    target.scraped = load && { ...load, at: performance.now(), outstandingAt };
    return load !== null;
  } catch {
    target.scraped = null;
    return true;
  }
}
