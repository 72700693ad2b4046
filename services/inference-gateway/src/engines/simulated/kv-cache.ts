import { LRUCache } from 'lru-cache';

/**
 * The simulated engine's KV cache, after vLLM's automatic prefix caching: a pool of `capacity`
 * blocks of 16 tokens. A full prompt block is known by its chain hash (see prefix-blocks.ts) and
 * shared by every running sequence whose prompt starts the same way (reference counts). A block no
 * sequence holds stays cached, in a free queue evicted least recently used first; blocks are freed
 * in reverse order, so a prompt's tail goes before its head (as vLLM frees them). Private blocks
 * (a prompt's partial last block, the output) are counted, never cached.
 */
export class KvCache {
  /** Cached full blocks by hash, with how many running sequences hold each. */
  private readonly refs = new Map<number, number>();
  /**
   * Cached blocks no sequence holds (hash → hash), least recently freed evicted first. An LRU list,
   * not a Map emptied from its front: a Map keeps deleted keys' slots until it grows, and each
   * eviction would walk past them.
   */
  private readonly free: LRUCache<number, number>;
  /** Private blocks held by running sequences. */
  private privateInUse = 0;

  constructor(readonly capacity: number) {
    this.free = new LRUCache({ max: capacity + 1 });
  }

  /** How many of `hashes`, from the first, are cached (a chain: the first miss ends the match). */
  cachedPrefix(hashes: readonly number[]): number {
    let hit = 0;
    while (hit < hashes.length && this.refs.has(hashes[hit] as number)) hit++;
    return hit;
  }

  /**
   * Holds the blocks of a sequence: its prompt blocks `hashes` (shared, cached) and
   * `privateBlocks` more. Evicts free blocks as needed. False, holding nothing, when the blocks
   * not held by other running sequences would not fit: the sequence waits, as in vLLM's scheduler.
   */
  allocate(hashes: readonly number[], privateBlocks: number): boolean {
    let fresh = privateBlocks;
    let revived = 0;
    for (const hash of hashes) {
      if (!this.refs.has(hash)) fresh++;
      else if (this.free.has(hash)) revived++;
    }
    const held = this.refs.size - this.free.size + this.privateInUse;
    if (held + revived + fresh > this.capacity) return false;
    for (const hash of hashes) {
      const count = this.refs.get(hash);
      if (count === undefined) {
        this.evictFor(1);
        this.refs.set(hash, 1);
      } else {
        if (count === 0) this.free.delete(hash);
        this.refs.set(hash, count + 1);
      }
    }
    this.evictFor(privateBlocks);
    this.privateInUse += privateBlocks;
    return true;
  }

  /** Lets go of what `allocate` held: prompt blocks stay cached, newest freed evicted last. */
  release(hashes: readonly number[], privateBlocks: number): void {
    this.privateInUse -= privateBlocks;
    for (let i = hashes.length - 1; i >= 0; i--) {
      const hash = hashes[i] as number;
      const count = this.refs.get(hash);
      if (count === undefined) continue;
      if (count > 1) this.refs.set(hash, count - 1);
      else {
        this.refs.set(hash, 0);
        this.free.set(hash, hash);
      }
    }
  }

  /** Blocks held by running sequences over the capacity, 0–1 (vLLM's `kv_cache_usage_perc`: cached free blocks count as free). */
  usage(): number {
    return (this.refs.size - this.free.size + this.privateInUse) / this.capacity;
  }

  /** Blocks cached, held or not (for tests). */
  cachedBlocks(): number {
    return this.refs.size;
  }

  /** Evicts least recently freed blocks until `count` more fit. */
  private evictFor(count: number): void {
    let over = this.refs.size + this.privateInUse + count - this.capacity;
    while (over > 0) {
      const hash = this.free.pop();
      if (hash === undefined) return;
      this.refs.delete(hash);
      over--;
    }
  }
}
