import { LRUCache } from 'lru-cache';

/**
 * Which replica was sent which prompt blocks, as this gateway replica saw it: llm-d's approximate
 * prefix-cache index. Keys are the chain hashes of a prompt's leading character blocks (see
 * prefix-blocks.ts), so a hash stands for a whole prefix; values are the replicas sent it. Bounded
 * to `maxEntries` hashes, least recently used dropped first, as the engines' own caches forget.
 * It is a guess at what the engines hold: what it gets wrong costs a cache miss, never an error.
 */
export class PrefixIndex {
  /**
   * Block hash → replicas (indices) sent that prefix, least recently used dropped first. Not a Map
   * dropping its first key: a Map keeps the slots of deleted keys until it grows, and finding its
   * first live key walks past them, so a full index spent milliseconds a request on that.
   */
  private readonly entries: LRUCache<number, number[]>;

  constructor(readonly maxEntries: number) {
    this.entries = new LRUCache({ max: maxEntries });
  }

  /** Number of hashes held (never above maxEntries). */
  get size(): number {
    return this.entries.size;
  }

  /**
   * For each of `replicas` replicas, how many of `hashes`, from the first, it was sent (the length
   * of its cached prefix, in blocks, as far as the index knows). Written into `into`.
   */
  match(hashes: readonly number[], into: Int32Array): void {
    into.fill(0);
    for (let block = 0; block < hashes.length; block++) {
      const holders = this.entries.peek(hashes[block] as number);
      if (!holders) return;
      let any = false;
      for (const replica of holders) {
        // Only a replica that matched every block before extends its run (a chain).
        if (into[replica] === block) {
          into[replica] = block + 1;
          any = true;
        }
      }
      if (!any) return;
    }
  }

  /**
   * Notes that `replica` was sent the prompt of `hashes` (its blocks become the most recently
   * used); the hashes it was not known to hold before are pushed onto `added` when given.
   */
  record(hashes: readonly number[], replica: number, added?: number[]): void {
    for (const hash of hashes) {
      const holders = this.entries.get(hash); // now the most recently used
      if (!holders) this.entries.set(hash, [replica]);
      else if (!holders.includes(replica)) holders.push(replica);
      else continue;
      added?.push(hash);
    }
  }
}
