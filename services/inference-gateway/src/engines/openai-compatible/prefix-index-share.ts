import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from '@tollway/service-kit';
import { hashText } from '../prefix-blocks';

/** Time a record waits to be published with the ones after it, ms: one PUBLISH per window, not per request. */
export const SHARE_FLUSH_MS = 20;
/** Most blocks one message carries; a fuller window is published at once. */
export const SHARE_MAX_BLOCKS_PER_MESSAGE = 8192;
/** Largest message read from the channel (a bigger one is not a gateway's and is dropped). */
const MAX_MESSAGE_CHARS = 1 << 20;

/** What a router publishes through and is applied by (one per model, see ReplicaSet). */
export interface SharedIndexLink {
  /** Queues `hashes`, newly recorded for `replica`, for the other gateway replicas. */
  publish(replica: number, hashes: readonly number[]): void;
  /** Stops receiving for this model. */
  close(): void;
}

/** Applies records another gateway replica published: `replica` was sent the prompt blocks `hashes`. */
export type ApplySharedRecord = (replica: number, hashes: readonly number[]) => void;

/**
 * Shares the prefix_cache routing indexes of the gateway replicas (catalog `routing.share_index`)
 * over one Redis pub/sub channel, eventually consistent and never on the request path: each
 * replica publishes, batched every SHARE_FLUSH_MS, the block hashes it newly recorded for an engine
 * replica (a conversation's new turn, not its whole prompt again), and applies what the others
 * publish to its own index. A conversation whose turns reach different gateway replicas then
 * still finds its earlier turns' engine replica, and a new one can go to the least loaded replica
 * (the others learn where within milliseconds, well before its next turn).
 *
 * A model's records are keyed by a hash of its id and its replicas' base URLs in order, so only
 * gateway replicas whose catalogs agree on what replica N is apply them. It is a hint, like the
 * index: while Redis is away nothing is queued (records are dropped, not kept in memory), and a
 * gateway replica that starts later learns what is sent from then on.
 */
export class PrefixIndexShare {
  private readonly id = randomUUID();
  private readonly models = new Map<string, ApplySharedRecord>();
  /** Model key → records waiting to be published: [replica, ...hashes] each. */
  private pending = new Map<string, number[][]>();
  private pendingBlocks = 0;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly counts = { sent: 0, received: 0, dropped: 0, rejected: 0 };

  constructor(
    private readonly publisher: Redis,
    private readonly subscriber: Redis,
    private readonly channel: string,
    private readonly logger?: Logger,
  ) {}

  /** Subscribes to the channel (and again after each reconnection, as ioredis does). */
  async start(): Promise<void> {
    this.subscriber.on('message', (channel: string, message: string) => {
      if (channel === this.channel) this.receive(message);
    });
    await this.subscriber.subscribe(this.channel);
  }

  /** Links model `modelId` over replicas at `replicaUrls` (in catalog order); `apply` takes the others' records. */
  link(modelId: string, replicaUrls: readonly string[], apply: ApplySharedRecord): SharedIndexLink {
    const key = shareKey(modelId, replicaUrls);
    this.models.set(key, apply);
    return {
      publish: (replica, hashes) => this.queue(key, replica, hashes),
      close: () => {
        if (this.models.get(key) === apply) this.models.delete(key);
      },
    };
  }

  /** Blocks sent, received (applied), dropped (Redis away) and rejected (malformed messages) since start. */
  stats(): Readonly<typeof this.counts> {
    return { ...this.counts };
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.flush();
    this.models.clear();
    await this.subscriber.quit().catch(() => this.subscriber.disconnect());
  }

  private queue(key: string, replica: number, hashes: readonly number[]): void {
    if (hashes.length === 0 || this.closed) return;
    let records = this.pending.get(key);
    if (!records) this.pending.set(key, (records = []));
    records.push([replica, ...hashes]);
    this.pendingBlocks += hashes.length;
    if (this.pendingBlocks >= SHARE_MAX_BLOCKS_PER_MESSAGE) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), SHARE_FLUSH_MS);
  }

  private flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.pending.size === 0) return;
    const models = Object.fromEntries(this.pending);
    const blocks = this.pendingBlocks;
    this.pending = new Map();
    this.pendingBlocks = 0;
    // Only on a connection that is up: the offline queue would hold every record while Redis is away.
    if (this.publisher.status !== 'ready') {
      this.counts.dropped += blocks;
      return;
    }
    this.counts.sent += blocks;
    this.publisher.publish(this.channel, JSON.stringify({ from: this.id, models })).catch((err: Error) => {
      this.counts.dropped += blocks;
      this.logger?.debug('prefix index share: publish failed', { error: err.message });
    });
  }

  /** Applies another gateway replica's message; anything not in the expected shape is dropped whole. */
  private receive(message: string): void {
    if (message.length > MAX_MESSAGE_CHARS) {
      this.counts.rejected++;
      return;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(message);
    } catch {
      this.counts.rejected++;
      return;
    }
    if (!isRecord(parsed) || typeof parsed.from !== 'string' || !isRecord(parsed.models)) {
      this.counts.rejected++;
      return;
    }
    if (parsed.from === this.id) return;
    for (const [key, records] of Object.entries(parsed.models)) {
      const apply = this.models.get(key);
      if (!apply) continue;
      if (!Array.isArray(records)) {
        this.counts.rejected++;
        continue;
      }
      for (const record of records as unknown[]) {
        if (!Array.isArray(record) || record.length < 2 || !record.every(isBlockNumber)) {
          this.counts.rejected++;
          continue;
        }
        const [replica, ...hashes] = record as number[];
        apply(replica as number, hashes);
        this.counts.received += hashes.length;
      }
    }
  }
}

/** The key of a model's records: its id and its replicas' base URLs, in order, hashed. */
export function shareKey(modelId: string, replicaUrls: readonly string[]): string {
  return hashText(JSON.stringify([modelId, ...replicaUrls])).toString(36);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A replica index or a block hash: a non-negative safe integer (hashes are 53-bit). */
function isBlockNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}
