import { KvCache } from './kv-cache';

describe('KvCache (vLLM prefix caching)', () => {
  it('finds a prompt it holds block by block, and only the leading run of blocks (a chain)', () => {
    const cache = new KvCache(10);
    expect(cache.allocate([1, 2, 3], 0)).toBe(true);
    cache.release([1, 2, 3], 0);
    expect(cache.cachedPrefix([1, 2, 3, 4])).toBe(3);
    expect(cache.cachedPrefix([1, 9, 3])).toBe(1);
    expect(cache.cachedPrefix([9, 2, 3])).toBe(0);
  });

  it('evicts the least recently freed blocks first, a freed prompt tail before its head', () => {
    const cache = new KvCache(4);
    cache.allocate([1, 2], 0);
    cache.release([1, 2], 0);
    cache.allocate([3, 4], 0);
    cache.release([3, 4], 0);
    // Using prompt 1 again makes prompt 3 the least recently freed.
    cache.allocate([1, 2], 0);
    cache.release([1, 2], 0);
    cache.allocate([5], 0);
    cache.release([5], 0);
    // One block was needed: prompt 3's tail (4) went, its head (3) stayed.
    expect(cache.cachedPrefix([3, 4])).toBe(1);
    expect(cache.cachedPrefix([1, 2])).toBe(2);
    // Two more: prompt 3's head, then prompt 1's tail; the most recently freed (5) stays.
    cache.allocate([6, 7], 0);
    expect(cache.cachedPrefix([3])).toBe(0);
    expect(cache.cachedPrefix([1, 2])).toBe(1);
    expect(cache.cachedPrefix([5])).toBe(1);
    expect(cache.cachedBlocks()).toBe(4);
  });

  it('never evicts blocks a running sequence holds: a sequence that does not fit waits (false)', () => {
    const cache = new KvCache(4);
    expect(cache.allocate([1, 2], 1)).toBe(true);
    expect(cache.usage()).toBe(0.75);
    expect(cache.allocate([3, 4], 0)).toBe(false);
    // Sharing held blocks costs nothing: the same prompt fits again.
    expect(cache.allocate([1, 2], 1)).toBe(true);
    expect(cache.usage()).toBe(1);
    cache.release([1, 2], 1);
    cache.release([1, 2], 1);
    // Freed blocks stay cached but count as free, as in vLLM's kv_cache_usage_perc.
    expect(cache.usage()).toBe(0);
    expect(cache.allocate([3, 4], 2)).toBe(true);
    expect(cache.cachedPrefix([1, 2])).toBe(0);
  });
});
