/**
 * The streams being relayed now, so that a shutdown whose drain time is up ends them properly
 * (an error event, what was relayed settled) instead of the process cutting them at exit.
 */
export class LiveRelays {
  private readonly stops = new Set<() => void>();
  private stopping = false;

  /** Registers a relay's stop; returns the function that forgets it. Once stopping, stops at once. */
  add(stop: () => void): () => void {
    if (this.stopping) {
      stop();
      return NOTHING;
    }
    this.stops.add(stop);
    return () => this.stops.delete(stop);
  }

  /** Streams being relayed now. */
  get size(): number {
    return this.stops.size;
  }

  /** Ends every stream relayed now, and every one that starts from now on. */
  stopAll(): void {
    this.stopping = true;
    for (const stop of [...this.stops]) stop();
    this.stops.clear();
  }
}

const NOTHING = () => undefined;
