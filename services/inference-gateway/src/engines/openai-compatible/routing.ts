import type { CreateChatCompletionRequest } from '@tollway/contracts';
import type { RoutingSpec } from '../../catalog/catalog.schema';
import { hashText, promptBlockHashes } from '../prefix-blocks';
import type { RoutingOutcome, RoutingStats } from '../engine.types';
import { PrefixIndex } from './prefix-index';
import type { SharedIndexLink } from './prefix-index-share';

/** Longest part of a request's `user` that sticky routing hashes: a client may send anything there. */
export const MAX_STICKY_KEY_CHARS = 256;

/** Points per replica on the sticky policy's hash ring. */
const RING_POINTS = 64;

/** What routing reads of each replica: its load now, and whether it is excluded (a retry's first choice). */
export interface RoutingView {
  readonly count: number;
  load(replica: number): number;
}

/** Most block hashes one record received from another gateway replica may carry (the most a request hashes). */
const MAX_SHARED_RECORD_BLOCKS = 4096;

/**
 * Chooses a replica for each request by the model's routing policy (catalog `engine.routing`):
 * - `least_outstanding`: the least loaded; ties rotate.
 * - `prefix_cache`: the replica sent the longest prefix of this prompt (PrefixIndex), among those
 *   under the load bound; ties go to the least loaded.
 * - `sticky`: consistent hashing of the request's `user` (bounded), walking the ring past replicas
 *   over the load bound (consistent hashing with bounded loads).
 * The load bound is `load_factor` × the mean load counting this request (at least `min_load_bound`:
 * below it a spill would throw away a cache hit to save nothing),
 * so one hot prefix or key cannot pile onto one replica. Nothing here waits on the network.
 */
export class ReplicaRouter {
  private rotation = 0;
  private readonly index: PrefixIndex | null;
  private readonly matches: Int32Array;
  private readonly ring: { points: Float64Array; owners: Int32Array } | null;
  private readonly counts: Record<RoutingOutcome, number> = {
    least_loaded: 0,
    prefix_hit: 0,
    prefix_miss: 0,
    load_spill: 0,
    sticky: 0,
    no_key: 0,
  };
  private blocksQueried = 0;
  private blocksMatched = 0;
  private blocksShared = 0;
  private blocksReceived = 0;
  /** Where this router publishes what it records (prefix_cache with share_index), else null. */
  private share: SharedIndexLink | null = null;
  private readonly added: number[] = [];

  constructor(
    private readonly spec: RoutingSpec,
    private readonly view: RoutingView,
  ) {
    this.index = spec.policy === 'prefix_cache' ? new PrefixIndex(spec.index_entries) : null;
    this.matches = new Int32Array(view.count);
    this.ring = spec.policy === 'sticky' ? hashRing(view.count) : null;
  }

  /**
   * Publishes what this router records through `link` (the gateway replicas' shared index, see
   * PrefixIndexShare); from then on a conversation new to the index goes to the least loaded of
   * the replicas holding its longest prefix, as the others will learn where it went.
   */
  shareThrough(link: SharedIndexLink): void {
    if (this.index) this.share = link;
  }

  /** Records another gateway replica published: `replica` was sent `hashes`. Out-of-range ones are ignored. */
  applyShared(replica: number, hashes: readonly number[]): void {
    if (!this.index || !Number.isInteger(replica) || replica < 0 || replica >= this.view.count) return;
    if (hashes.length === 0 || hashes.length > MAX_SHARED_RECORD_BLOCKS) return;
    this.index.record(hashes, replica);
    this.blocksReceived += hashes.length;
  }

  /** The replica for `request`; `avoid` (a replica that just failed it) only when it is the only one. */
  choose(request: CreateChatCompletionRequest, avoid = -1): number {
    switch (this.spec.policy) {
      case 'prefix_cache':
        return this.byPrefix(request, avoid);
      case 'sticky':
        return this.bySticky(request, avoid);
      default:
        this.counts.least_loaded++;
        return this.leastLoaded(avoid);
    }
  }

  stats(): RoutingStats {
    return {
      policy: this.spec.policy,
      decisions: { ...this.counts },
      blocksQueried: this.blocksQueried,
      blocksMatched: this.blocksMatched,
      indexEntries: this.index?.size ?? 0,
      blocksShared: this.blocksShared,
      blocksReceived: this.blocksReceived,
    };
  }

  /** The least loaded replica other than `avoid` when there is a choice; ties rotate. */
  private leastLoaded(avoid: number): number {
    const count = this.view.count;
    this.rotation = (this.rotation + 1) % count;
    let best = -1;
    let bestLoad = Number.POSITIVE_INFINITY;
    for (let i = 0; i < count; i++) {
      const replica = (this.rotation + i) % count;
      if (replica === avoid && count > 1) continue;
      const load = this.view.load(replica);
      if (load < bestLoad) {
        best = replica;
        bestLoad = load;
      }
    }
    return best;
  }

  /** Requests a replica may have in flight before it counts as full, with this request placed. */
  private loadBound(): number {
    let total = 1;
    for (let i = 0; i < this.view.count; i++) total += this.view.load(i);
    return Math.max(this.spec.min_load_bound, Math.ceil((this.spec.load_factor * total) / this.view.count));
  }

  private byPrefix(request: CreateChatCompletionRequest, avoid: number): number {
    const index = this.index as PrefixIndex;
    const hashes = promptBlockHashes(request.messages, this.spec.block_chars, this.spec.max_blocks);
    index.match(hashes, this.matches);
    const bound = this.loadBound();
    const count = this.view.count;
    let bestMatch = -1;
    let longest = 0;
    for (let replica = 0; replica < count; replica++) {
      if (replica === avoid && count > 1) continue;
      const match = this.matches[replica] as number;
      longest = Math.max(longest, match);
      if (match > bestMatch && this.view.load(replica) < bound) bestMatch = match;
    }
    // Among the replicas with the best (non-empty) match: with a shared index, the least loaded
    // (the other gateway replicas learn where a new conversation went before its next turn), taking
    // a match one block short as the best: the block that straddles the end of a shared prompt and
    // the start of a common template (the same for everyone) would otherwise draw every new
    // conversation to wherever the first one went. Ties, and without a shared index, go by
    // rendezvous hashing on the blocks just past the match, so that every gateway replica places
    // a conversation it has not seen (past a shared system prompt) where the others did (its first
    // own blocks stay the same turn after turn). The load bound keeps the spread. The key is the
    // chain hash of the second block past the match, for that same straddling block.
    const key = (hashes[Math.min(Math.max(0, bestMatch) + 1, hashes.length - 1)] ?? 0) >>> 0;
    const byLoad = this.share !== null;
    // (Never down to no match at all: a replica that holds nothing of the prompt is not a hit.)
    const least = byLoad ? Math.max(1, bestMatch - 1) : bestMatch;
    let best = -1;
    let bestLoad = Number.POSITIVE_INFINITY;
    let bestWeight = -1;
    for (let replica = 0; replica < count; replica++) {
      if (replica === avoid && count > 1) continue;
      const load = this.view.load(replica);
      const match = this.matches[replica] as number;
      if (match < least || match > bestMatch || load >= bound) continue;
      if (byLoad && load > bestLoad) continue;
      const weight = rendezvousWeight(key, replica);
      if ((byLoad && load < bestLoad) || weight > bestWeight) {
        best = replica;
        bestLoad = load;
        bestWeight = weight;
      }
    }
    // Nothing known of this prompt within the bound (no shared prefix at all): the least loaded, as
    // least_outstanding would choose (a hash would place it at random, which queues worse).
    if (best === -1 || bestMatch <= 0) best = this.leastLoaded(avoid);
    const chosenMatch = this.matches[best] as number;
    const hit = bestMatch > 0 && chosenMatch >= least && chosenMatch >= longest - (byLoad ? 1 : 0);
    this.counts[hit ? 'prefix_hit' : longest > 0 ? 'load_spill' : 'prefix_miss']++;
    bestMatch = chosenMatch;
    this.blocksQueried += hashes.length;
    this.blocksMatched += bestMatch;
    index.record(hashes, best, this.share ? this.added : undefined);
    if (this.share && this.added.length > 0) {
      this.share.publish(best, this.added);
      this.blocksShared += this.added.length;
      this.added.length = 0;
    }
    return best;
  }

  private bySticky(request: CreateChatCompletionRequest, avoid: number): number {
    const user = request.user;
    if (typeof user !== 'string' || user.length === 0) {
      this.counts.no_key++;
      return this.leastLoaded(avoid);
    }
    const { points, owners } = this.ring as { points: Float64Array; owners: Int32Array };
    const keyHash = hashText(user.slice(0, MAX_STICKY_KEY_CHARS));
    const bound = this.loadBound();
    let at = lowerBound(points, keyHash);
    let first = -1;
    for (let step = 0; step < points.length; step++, at++) {
      const replica = owners[at % points.length] as number;
      if (replica === avoid && this.view.count > 1) continue;
      if (first === -1) first = replica;
      if (this.view.load(replica) < bound) {
        this.counts[replica === first ? 'sticky' : 'load_spill']++;
        return replica;
      }
    }
    this.counts.load_spill++;
    return this.leastLoaded(avoid);
  }
}

/** Replica `replica`'s weight for `key` in rendezvous hashing: a 32-bit mix of both. */
function rendezvousWeight(key: number, replica: number): number {
  let h = key ^ Math.imul(replica + 1, 0x9e3779b1);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** RING_POINTS points per replica, sorted, with the replica owning each. */
function hashRing(count: number): { points: Float64Array; owners: Int32Array } {
  const entries: Array<[number, number]> = [];
  for (let replica = 0; replica < count; replica++) {
    for (let point = 0; point < RING_POINTS; point++) entries.push([hashText(`${replica}:${point}`), replica]);
  }
  entries.sort((a, b) => a[0] - b[0]);
  return {
    points: Float64Array.from(entries, (entry) => entry[0]),
    owners: Int32Array.from(entries, (entry) => entry[1]),
  };
}

/** The first position in sorted `points` at or after `value` (points.length when none). */
function lowerBound(points: Float64Array, value: number): number {
  let low = 0;
  let high = points.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if ((points[mid] as number) < value) low = mid + 1;
    else high = mid;
  }
  return low;
}
