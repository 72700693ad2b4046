import type { Dispatcher } from 'undici';
import { parseRetryAfter } from '../engine-error';
import { ITERATION_DONE, type ClientAbort } from '../engine.types';

/** The answer's head, and its body as the bytes undici read. */
export interface EngineResponse {
  statusCode: number;
  /** The `content-type` header, '' when absent. */
  contentType(): string;
  /** The wait a 429's `retry-after-ms` or `retry-after` asks for, ms; null on other statuses or none. */
  retryAfterMs(): number | null;
  body: EngineBody;
}

/**
 * A response body read with backpressure: up to QUEUE_HIGH_WATER_BYTES (or QUEUE_HIGH_WATER_CHUNKS
 * HTTP chunks) wait here unconsumed; beyond that the connection stops reading until the consumer
 * takes them. A step of the iteration hands over everything that waited as one Buffer, so an
 * engine that writes every event as an HTTP chunk of its own (as vLLM, SGLang and llama.cpp do)
 * costs two steps per socket read (its first chunk, then the rest), not one per event. Iterate it
 * once; leaving the loop before its end drops the connection (a half-read HTTP/1.1 answer cannot
 * be reused).
 */
export interface EngineBody extends AsyncIterable<Buffer> {
  /** Drops the connection unless the body was read to its end. */
  destroy(): void;
  /**
   * Reads the rest and throws it away, so the connection stays reusable; past DUMP_LIMIT_BYTES
   * (a body too long to be worth reading) it drops the connection instead, as undici's own dump does.
   */
  dump(): Promise<void>;
}

/**
 * One request to one replica through undici's dispatch API. The response body reaches the engine
 * as Buffers handed to callbacks, without undici's `request()` layer: its Readable body stream,
 * async iterator and listeners cost more CPU per relayed stream than the relay's own work on the
 * chunks (about 6 % of the gateway's CPU under streaming load, more with the garbage they leave).
 * `send` resolves once the status line and headers arrived and rejects with undici's error
 * (connect errors, timeouts) before that; a client abort (`signal`) ends the exchange at any point.
 */
export function exchange(
  pool: Dispatcher,
  options: Dispatcher.DispatchOptions,
  signal: ClientAbort,
): Promise<EngineResponse> {
  return new Promise<EngineResponse>((resolve, reject) => {
    const handler = new ExchangeHandler(signal, resolve, reject);
    pool.dispatch(options, handler);
  });
}

/** How much of an unwanted body `dump` reads before it drops the connection instead. */
export const DUMP_LIMIT_BYTES = 128 * 1024;

/** How many unconsumed body bytes may wait before the connection stops reading. */
export const QUEUE_HIGH_WATER_BYTES = 64 * 1024;

/** How many unconsumed HTTP chunks may wait (whatever their size) before the connection stops reading. */
export const QUEUE_HIGH_WATER_CHUNKS = 256;

class ExchangeHandler implements Dispatcher.DispatchHandler, EngineResponse, EngineBody {
  statusCode = 0;
  readonly body: EngineBody = this;
  private type = '';
  private retryAfter: number | null = null;
  private abortConnection: ((err?: Error) => void) | null = null;
  private resumeConnection: (() => void) | null = null;
  private headersSettled = false;
  /** Body bytes not yet taken by the consumer, in the order they came. */
  private readonly queue: Buffer[] = [];
  private queuedBytes = 0;
  private paused = false;
  private ended = false;
  private failure: Error | null = null;
  /** The consumer waiting for the next read (only ever while nothing is queued). */
  private waiting: { resolve: (result: IteratorResult<Buffer>) => void; reject: (err: Error) => void } | null = null;
  private readonly onClientAbort = () => this.abort(new Error('The client went away.'));

  constructor(
    private readonly signal: ClientAbort,
    private readonly resolveHead: (response: EngineResponse) => void,
    private readonly rejectHead: (err: Error) => void,
  ) {
    signal.once('abort', this.onClientAbort);
  }

  // undici's handler callbacks (the callback API its own `request()` is built on).

  onConnect(abort: (err?: Error) => void): void {
    this.abortConnection = abort;
    if (this.signal.aborted) abort(new Error('The client went away.'));
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (statusCode < 200) return true; // 1xx: the real answer follows
    this.statusCode = statusCode;
    // Read now, not kept: the header Buffers would stay alive (and be copied by every scavenge) for
    // as long as the stream lasts, only to be read when an engine refuses.
    this.type = headerOf(rawHeaders, 'content-type') ?? '';
    if (statusCode === 429)
      this.retryAfter = parseRetryAfter(headerOf(rawHeaders, 'retry-after-ms'), headerOf(rawHeaders, 'retry-after'));
    this.resumeConnection = resume;
    this.headersSettled = true;
    this.resolveHead(this);
    return true;
  }

  onData(chunk: Buffer): boolean {
    // A resumed parser flushes itself with an empty read first.
    if (chunk.length === 0) return true;
    const waiting = this.waiting;
    if (waiting) {
      this.waiting = null;
      waiting.resolve({ done: false, value: chunk });
      return true;
    }
    // undici's parser calls onData once per HTTP chunk: the chunks after the first of a read wait
    // here, for the consumer's next step to take together, without stopping the parser for each.
    this.queue.push(chunk);
    this.queuedBytes += chunk.length;
    if (this.queuedBytes < QUEUE_HIGH_WATER_BYTES && this.queue.length < QUEUE_HIGH_WATER_CHUNKS) return true;
    this.paused = true;
    return false;
  }

  /** Everything queued, as one Buffer; resumes a paused connection. */
  private take(): Buffer {
    const queue = this.queue;
    const value = queue.length === 1 ? (queue[0] as Buffer) : Buffer.concat(queue, this.queuedBytes);
    queue.length = 0; // the array is reused: concat copied what it held
    this.queuedBytes = 0;
    if (this.paused) {
      this.paused = false;
      // May run the parser at once over what the socket already read: onData queues it anew.
      this.resumeConnection?.();
    }
    return value;
  }

  onComplete(): void {
    this.ended = true;
    this.signal.off('abort', this.onClientAbort);
    const waiting = this.waiting;
    if (waiting) {
      this.waiting = null;
      waiting.resolve(ITERATION_DONE);
    }
  }

  onError(err: Error): void {
    this.signal.off('abort', this.onClientAbort);
    if (!this.headersSettled) {
      this.headersSettled = true;
      this.rejectHead(err);
      return;
    }
    this.failure = err;
    const waiting = this.waiting;
    if (waiting) {
      this.waiting = null;
      waiting.reject(err);
    }
  }

  // EngineResponse

  contentType(): string {
    return this.type;
  }

  retryAfterMs(): number | null {
    return this.retryAfter;
  }

  // EngineBody

  [Symbol.asyncIterator](): AsyncIterator<Buffer> {
    return { next: () => this.next(), return: () => this.return() };
  }

  private next(): Promise<IteratorResult<Buffer>> {
    if (this.queuedBytes > 0) return Promise.resolve({ done: false, value: this.take() });
    if (this.failure) return Promise.reject(this.failure);
    if (this.ended) return Promise.resolve(ITERATION_DONE);
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
    });
  }

  private return(): Promise<IteratorResult<Buffer>> {
    this.destroy();
    return Promise.resolve(ITERATION_DONE);
  }

  destroy(): void {
    if (this.ended || this.failure) return;
    this.abort(new Error('The response was left unread.'));
  }

  async dump(): Promise<void> {
    let size = 0;
    for await (const part of this) {
      size += part.length;
      if (size > DUMP_LIMIT_BYTES) break; // leaving the loop drops the connection
    }
  }

  private abort(err: Error): void {
    if (this.abortConnection) this.abortConnection(err);
    else this.onError(err);
  }
}

/** The value of header `name` (lower case) in raw undici headers (name, value, name, value, …), null when absent. */
function headerOf(raw: readonly Buffer[], name: string): string | null {
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const candidate = raw[i] as Buffer;
    if (candidate.length === name.length && candidate.toString('latin1').toLowerCase() === name)
      return (raw[i + 1] as Buffer).toString('latin1');
  }
  return null;
}
