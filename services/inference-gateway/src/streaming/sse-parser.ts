import { EngineStreamError } from '../engines/engine.types';

const STREAM = Object.freeze({ stream: true });
/** U+FEFF in UTF-8. */
const BYTE_ORDER_MARK = [0xef, 0xbb, 0xbf];
const EMPTY = Buffer.alloc(0);

/**
 * Incremental Server-Sent Events parser for engine streams: feed it bytes as they arrive, get
 * back the `data` payloads of every event completed so far. Follows the SSE line rules (LF or
 * CRLF, multi-line data joined by "\n", comments and other fields ignored). An event (or a line)
 * longer than `maxEventChars` throws EngineStreamError instead of growing without end.
 * Runs once per relayed chunk: an event's data is one slice of the text read, and nothing else is
 * allocated for it (engines send one `data:` line per event; several lines take an array).
 */
export class SseParser {
  /** Keeps a U+FEFF wherever it is: the one at the stream's start is dropped by `skipByteOrderMark`. */
  private readonly decoder = new TextDecoder('utf-8', { ignoreBOM: true });
  /**
   * True when the decoder holds no part of a character, so a read that ends on an ASCII byte (an
   * SSE event ends on "\n") decodes on its own with Buffer's native UTF-8 decode, about three
   * times cheaper than TextDecoder's streaming decode at an event's size. True from the start: the
   * byte order mark is dropped by hand, so the first read (on a loaded gateway often most of a
   * stream: 4.6 KB took 2.7 µs that way against 0.4 µs) need not go through the decoder.
   */
  private decoderEmpty = true;
  /** The stream's first bytes while they are too few to tell whether they open with a byte order mark. */
  private head: Uint8Array | null = null;
  private started = false;
  private pending = '';
  /** The event's data so far: null (none), one line, or several lines. */
  private data: string | string[] | null = null;
  private dataChars = 0;

  constructor(private readonly maxEventChars = Number.MAX_SAFE_INTEGER) {}

  /** Adds bytes; returns the payloads of the events they completed. */
  push(bytes: Uint8Array): string[] {
    const text = this.pending + this.decode(bytes);
    const events: string[] = [];
    let start = 0;
    for (let nl = text.indexOf('\n', start); nl !== -1; nl = text.indexOf('\n', start)) {
      const end = nl > start && text.charCodeAt(nl - 1) === 13 ? nl - 1 : nl;
      this.line(text, start, end, events);
      start = nl + 1;
    }
    this.pending = start === 0 ? text : text.slice(start);
    if (this.pending.length + this.dataChars > this.maxEventChars) throw this.tooLarge();
    return events;
  }

  private decode(bytes: Uint8Array): string {
    if (!this.started) bytes = this.skipByteOrderMark(bytes);
    // An empty read says nothing of the decoder's state: a character split before it is still split.
    if (bytes.length === 0) return '';
    const endsWhole = (bytes[bytes.length - 1] as number) < 0x80;
    // Both decoders replace malformed bytes by U+FFFD alike; only a character split between
    // reads needs the decoder's memory.
    if (this.decoderEmpty && endsWhole && Buffer.isBuffer(bytes)) return bytes.toString();
    this.decoderEmpty = endsWhole;
    return this.decoder.decode(bytes, STREAM);
  }

  /**
   * The stream's bytes without the byte order mark it may open with (the SSE rule), once three
   * bytes have come or fewer that cannot be one; until then nothing (they wait in `head`).
   */
  private skipByteOrderMark(bytes: Uint8Array): Uint8Array {
    const all = this.head === null ? bytes : Buffer.concat([this.head, bytes]);
    const n = Math.min(all.length, 3);
    let bom = true;
    for (let i = 0; i < n; i++) if (all[i] !== BYTE_ORDER_MARK[i]) bom = false;
    if (bom && all.length < 3) {
      this.head = Buffer.from(all); // a copy: the read's memory is its owner's
      return EMPTY;
    }
    this.head = null;
    this.started = true;
    return bom ? all.subarray(3) : all;
  }

  /** Payload of an event left open when the stream ended (no blank line after it), if any. */
  end(): string[] {
    const events: string[] = [];
    if (this.pending.length > 0) this.line(this.pending, 0, this.pending.length, events);
    this.pending = '';
    this.dispatch(events);
    return events;
  }

  private line(text: string, start: number, end: number, events: string[]): void {
    if (start === end) {
      this.dispatch(events);
      return;
    }
    // "data:" — the only field the gateway needs; "event:", "id:", "retry:" and ":comments" are skipped.
    if (
      end - start >= 5 &&
      text.charCodeAt(start) === 100 &&
      text.charCodeAt(start + 1) === 97 &&
      text.charCodeAt(start + 2) === 116 &&
      text.charCodeAt(start + 3) === 97 &&
      text.charCodeAt(start + 4) === 58
    ) {
      const from = text.charCodeAt(start + 5) === 32 ? start + 6 : start + 5;
      this.dataChars += end - from;
      if (this.dataChars > this.maxEventChars) throw this.tooLarge();
      const line = text.slice(from, end);
      if (this.data === null) this.data = line;
      else if (typeof this.data === 'string') this.data = [this.data, line];
      else this.data.push(line);
    }
  }

  /** Ends the event: its data joins `events`, if it had any. */
  private dispatch(events: string[]): void {
    if (this.data === null) return;
    events.push(typeof this.data === 'string' ? this.data : this.data.join('\n'));
    this.data = null;
    this.dataChars = 0;
  }

  private tooLarge(): EngineStreamError {
    return new EngineStreamError(`The engine sent an event larger than ${this.maxEventChars} bytes.`, null);
  }
}
