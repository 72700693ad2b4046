import type { CreateChatCompletionRequest } from '@tollway/contracts';
import type { RoutingSpec } from '../../catalog/catalog.schema';
import { hashText, promptBlockHashes } from '../prefix-blocks';
import type { RoutingOutcome, RoutingStats } from '../engine.types';
import { PrefixIndex } from './prefix-index';

/** Longest part of a request's `user` that sticky routing hashes: a client may send anything there. */
export const MAX_STICKY_KEY_CHARS = 256;

/** Points per replica on the sticky policy's hash ring. */
const RING_POINTS = 64;

/**
 * Below this many requests in flight a replica is never "over its bound": a spill at trivial load
 * would throw away a cache hit to save nothing.
 */
const MIN_LOAD_BOUND = 2;

/** What routing reads of each replica: its load now, and whether it is excluded (a retry's first choice). */
export interface RoutingView {
  readonly count: number;
  load(replica: number): number;
}

/**
 * Chooses a replica for each request by the model's routing policy (catalog `engine.routing`):
 * - `least_outstanding`: the least loaded; ties rotate.
 * - `prefix_cache`: the replica sent the longest prefix of this prompt (PrefixIndex), among those
 *   under the load bound; ties go to the least loaded.
 * - `sticky`: consistent hashing of the request's `user` (bounded), walking the ring past replicas
 *   over the load bound (consistent hashing with bounded loads).
 * The load bound is `load_factor` × the mean load counting this request (at least MIN_LOAD_BOUND),
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

  constructor(
    private readonly spec: RoutingSpec,
    private readonly view: RoutingView,
  ) {
    this.index = spec.policy === 'prefix_cache' ? new PrefixIndex(spec.index_entries) : null;
    this.matches = new Int32Array(view.count);
    this.ring = spec.policy === 'sticky' ? hashRing(view.count) : null;
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
    return Math.max(MIN_LOAD_BOUND, Math.ceil((this.spec.load_factor * total) / this.view.count));
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
    // Among the replicas with the best (non-empty) match, the choice is rendezvous hashing on the
    // blocks just past the match, not the least loaded: every gateway replica then places a
    // conversation it has not seen (past a shared system prompt) where the others did (its first
    // own blocks stay the same turn after turn), with no shared index. The load bound keeps the spread.
    // The key is the chain hash of the second block past the match: the first one often straddles
    // the end of a shared prompt and the start of a common template, the same for everyone.
    const key = (hashes[Math.min(Math.max(0, bestMatch) + 1, hashes.length - 1)] ?? 0) >>> 0;
    let best = -1;
    let bestWeight = -1;
    for (let replica = 0; replica < count; replica++) {
      if (replica === avoid && count > 1) continue;
      if (this.matches[replica] !== bestMatch || this.view.load(replica) >= bound) continue;
      const weight = rendezvousWeight(key, replica);
      if (weight > bestWeight) {
        best = replica;
        bestWeight = weight;
      }
    }
    // Nothing known of this prompt within the bound (no shared prefix at all): the least loaded, as
    // least_outstanding would choose (a hash would place it at random, which queues worse).
    if (best === -1 || bestMatch <= 0) {
      best = this.leastLoaded(avoid);
      bestMatch = this.matches[best] as number;
    }
    this.counts[bestMatch === longest ? (longest > 0 ? 'prefix_hit' : 'prefix_miss') : 'load_spill']++;
    this.blocksQueried += hashes.length;
    this.blocksMatched += bestMatch;
    index.record(hashes, best);
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
