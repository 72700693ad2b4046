import * as fc from 'fast-check';
import { caseArbitrary } from './case-arbitraries';
import type { FuzzCase, ServiceName } from './fuzz-case';

/** Cases are drawn in chunks of this many, each chunk from its own seed, so case i is replayable alone. */
const CHUNK = 100;

/**
 * A service's endless stream of cases for one seed (the long profile's): case `i` is the same on
 * every run with that seed, and drawing it costs one chunk, not the `i - 1` cases before it.
 */
export class CaseStream {
  private chunk = -1;
  private cases: FuzzCase[] = [];

  constructor(
    readonly service: ServiceName,
    readonly seed: number,
  ) {}

  at(index: number): FuzzCase {
    const chunk = Math.floor(index / CHUNK);
    if (chunk !== this.chunk) {
      const chunkSeed = (this.seed + (this.service === 'gateway' ? 0 : 1_000_003) + chunk * 7919) | 0;
      this.cases = fc.sample(caseArbitrary(this.service), { seed: chunkSeed, numRuns: CHUNK });
      this.chunk = chunk;
    }
    return this.cases[index % CHUNK] as FuzzCase;
  }
}
