import { EngineStreamError } from '../engines/engine.types';

/**
 * Incremental Server-Sent Events parser for engine streams: feed it bytes as they arrive, get
 * back the `data` payloads of every event completed so far. Follows the SSE line rules (LF or
 * CRLF, multi-line data joined by "\n", comments and other fields ignored). An event (or a line)
 * longer than `maxEventChars` throws EngineStreamError instead of growing without end.
 */
export class SseParser {
  private readonly decoder = new TextDecoder();
  private pending = '';
  private data: string[] = [];
  private dataChars = 0;

  constructor(private readonly maxEventChars = Number.MAX_SAFE_INTEGER) {}

  /** Adds bytes; returns the payloads of the events they completed. */
  push(bytes: Uint8Array): string[] {
    const text = this.pending + this.decoder.decode(bytes, { stream: true });
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

  /** Payload of an event left open when the stream ended (no blank line after it), if any. */
  end(): string[] {
    const events: string[] = [];
    if (this.pending.length > 0) this.line(this.pending, 0, this.pending.length, events);
    this.pending = '';
    if (this.data.length > 0) events.push(this.data.join('\n'));
    this.data = [];
    this.dataChars = 0;
    return events;
  }

  private line(text: string, start: number, end: number, events: string[]): void {
    if (start === end) {
      if (this.data.length > 0) {
        events.push(this.data.length === 1 ? (this.data[0] as string) : this.data.join('\n'));
        this.data = [];
        this.dataChars = 0;
      }
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
      this.data.push(text.slice(from, end));
    }
  }

  private tooLarge(): EngineStreamError {
    return new EngineStreamError(`The engine sent an event larger than ${this.maxEventChars} bytes.`, null);
  }
}
