import { EngineStreamError } from '../engines/engine.types';

const STREAM = Object.freeze({ stream: true });

/**
 * Incremental Server-Sent Events parser for engine streams: feed it bytes as they arrive, get
 * back the `data` payloads of every event completed so far. Follows the SSE line rules (LF or
 * CRLF, multi-line data joined by "\n", comments and other fields ignored). An event (or a line)
 * longer than `maxEventChars` throws EngineStreamError instead of growing without end.
 * Runs once per relayed chunk: an event's data is one slice of the text read, and nothing else is
 * allocated for it (engines send one `data:` line per event; several lines take an array).
 */
export class SseParser {
  private readonly decoder = new TextDecoder();
  /**
   * True when the decoder holds no part of a character, so a read that ends on an ASCII byte (an
   * SSE event ends on "\n") decodes on its own with Buffer's native UTF-8 decode, about three
   * times cheaper than TextDecoder's streaming decode at an event's size. False at the start, so
   * the first read goes through the decoder, which drops a leading byte order mark.
   */
  private decoderEmpty = false;
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
    // An empty read says nothing of the decoder's state: a character split before it is still split.
    if (bytes.length === 0) return '';
    const endsWhole = (bytes[bytes.length - 1] as number) < 0x80;
    // Both decoders replace malformed bytes by U+FFFD alike; only a character split between
    // reads needs the decoder's memory.
    if (this.decoderEmpty && endsWhole && Buffer.isBuffer(bytes)) return bytes.toString();
    this.decoderEmpty = endsWhole;
    return this.decoder.decode(bytes, STREAM);
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
