import { connect } from 'node:net';
import { drainedOrClosed } from '@tollway/service-kit';

/** What came back for one request written byte for byte on a fresh TCP connection. */
export type Outcome =
  | {
      kind: 'response';
      status: number;
      /** Lower-cased names; a name sent twice keeps its last value (and is in `repeatedHeaders`). */
      headers: Record<string, string>;
      /** Lower-cased names of the headers the answer sent more than once. */
      repeatedHeaders?: string[];
      /** The first BODY_KEEP_BYTES of the (de-chunked) body. */
      body: Buffer;
      /** Body bytes received in all. */
      bodyBytes: number;
      ms: number;
      /** An event stream that stays open, read for its window then closed by the client: the body is its start. */
      cut?: boolean;
    }
  /** The server closed (or reset) the connection without a status line: a clean refusal. */
  | { kind: 'closed'; ms: number; reason: string }
  /** No complete answer before the deadline; `status` when the head came but the body never ended. */
  | { kind: 'hang'; ms: number; status: number | null; bodyBytes: number };

/** One raw request: bytes to write, then whether to half-close the write side. */
export interface RawRequest {
  parts: Buffer[];
  /** `end` half-closes after the last part (the server sees EOF); `keep` leaves the socket open. */
  finish: 'end' | 'keep';
  /** A HEAD request's answer has no body whatever its headers say. */
  head?: boolean;
}

const BODY_KEEP_BYTES = 64 * 1024;
const HEAD_LIMIT_BYTES = 256 * 1024;

/**
 * Writes `request` to host:port and reads the first final (non-1xx) response, up to `timeoutMs`.
 * With `streamWindowMs`, a 200 event stream is read that long after its head, then closed (an
 * answer with `cut`), as a client of a stream that follows a session does.
 */
export function sendRaw(
  host: string,
  port: number,
  request: RawRequest,
  timeoutMs: number,
  streamWindowMs?: number,
): Promise<Outcome> {
  const started = Date.now();
  let window: NodeJS.Timeout | undefined;
  return new Promise((resolve) => {
    const parser = new ResponseParser(request.head === true);
    const socket = connect({ host, port });
    let settled = false;
    const finish = (outcome: Outcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(window);
      socket.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(
      () => finish({ kind: 'hang', ms: Date.now() - started, status: parser.status, bodyBytes: parser.bodyBytes }),
      timeoutMs,
    );
    socket.on('connect', () => {
      writeParts(socket, request).catch(() => undefined);
    });
    socket.on('data', (data: Buffer) => {
      parser.push(data);
      const streaming =
        streamWindowMs !== undefined &&
        parser.status === 200 &&
        (parser.headers['content-type'] ?? '').startsWith('text/event-stream');
      if (streaming && window === undefined) {
        window = setTimeout(() => finish({ ...parser.outcome(Date.now() - started), cut: true }), streamWindowMs);
      }
      if (parser.done) finish(parser.outcome(Date.now() - started));
      else if (parser.failed) finish({ kind: 'closed', ms: Date.now() - started, reason: parser.failed });
    });
    const onEnd = (reason: string) => {
      parser.end();
      if (parser.done) finish(parser.outcome(Date.now() - started));
      else if (parser.status !== null)
        // A head and a body cut short by the server: an answer, with whatever body came.
        finish({ ...parser.outcome(Date.now() - started) });
      else finish({ kind: 'closed', ms: Date.now() - started, reason });
    };
    socket.on('end', () => onEnd('end'));
    socket.on('close', () => onEnd('close'));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      // A write refused after the server answered early (EPIPE, ECONNRESET) still leaves the answer to read.
      if (parser.done) finish(parser.outcome(Date.now() - started));
      else if (err.code !== 'EPIPE') onEnd(err.code ?? err.message);
    });
  });
}

async function writeParts(socket: import('node:net').Socket, request: RawRequest): Promise<void> {
  for (const part of request.parts) {
    if (socket.destroyed) return;
    if (!socket.write(part)) await drainedOrClosed(socket);
  }
  if (request.finish === 'end' && !socket.destroyed) socket.end();
}

/** Incremental HTTP/1.x response parser: the head, then a length, chunked or close-delimited body. */
class ResponseParser {
  status: number | null = null;
  headers: Record<string, string> = {};
  readonly repeated: string[] = [];
  bodyBytes = 0;
  done = false;
  failed: string | null = null;
  private head = Buffer.alloc(0);
  private kept: Buffer[] = [];
  private keptBytes = 0;
  private mode: 'head' | 'length' | 'chunked' | 'close' = 'head';
  private remaining = 0;
  private chunkState: 'size' | 'data' | 'data-crlf' | 'trailer' = 'size';
  private line = '';

  constructor(private readonly noBody: boolean) {}

  push(data: Buffer): void {
    if (this.done || this.failed) return;
    if (this.mode === 'head') {
      this.head = Buffer.concat([this.head, data]);
      const end = this.head.indexOf('\r\n\r\n');
      if (end === -1) {
        if (this.head.length > HEAD_LIMIT_BYTES) this.failed = 'response head too large';
        return;
      }
      const rest = this.head.subarray(end + 4);
      if (!this.parseHead(this.head.subarray(0, end).toString('latin1'))) return;
      this.head = Buffer.alloc(0);
      if (this.mode === 'head') return this.push(rest); // a 1xx: the final answer follows
      this.body(rest);
      return;
    }
    this.body(data);
  }

  end(): void {
    if (this.mode === 'close') this.done = true;
  }

  outcome(ms: number): Extract<Outcome, { kind: 'response' }> {
    return {
      kind: 'response',
      status: this.status ?? 0,
      headers: this.headers,
      repeatedHeaders: this.repeated,
      body: Buffer.concat(this.kept),
      bodyBytes: this.bodyBytes,
      ms,
    };
  }

  private parseHead(text: string): boolean {
    const [statusLine = '', ...lines] = text.split('\r\n');
    const match = /^HTTP\/\d\.\d (\d{3})/.exec(statusLine);
    if (!match) {
      this.failed = `not an HTTP status line: ${statusLine.slice(0, 80)}`;
      return false;
    }
    const status = Number(match[1]);
    if (status >= 100 && status < 200) return true;
    this.status = status;
    for (const line of lines) {
      const colon = line.indexOf(':');
      if (colon <= 0) continue;
      const name = line.slice(0, colon).trim().toLowerCase();
      if (Object.hasOwn(this.headers, name) && !this.repeated.includes(name)) this.repeated.push(name);
      this.headers[name] = line.slice(colon + 1).trim();
    }
    const length = this.headers['content-length'];
    if (this.noBody || status === 204 || status === 304) {
      this.done = true;
      this.mode = 'length';
    } else if (/chunked/i.test(this.headers['transfer-encoding'] ?? '')) this.mode = 'chunked';
    else if (length !== undefined) {
      this.mode = 'length';
      this.remaining = Number(length);
      if (this.remaining === 0) this.done = true;
    } else this.mode = 'close';
    return true;
  }

  private keep(data: Buffer): void {
    this.bodyBytes += data.length;
    if (this.keptBytes < BODY_KEEP_BYTES) {
      const slice = data.subarray(0, BODY_KEEP_BYTES - this.keptBytes);
      this.kept.push(slice);
      this.keptBytes += slice.length;
    }
  }

  private body(data: Buffer): void {
    if (this.done || data.length === 0) return;
    if (this.mode === 'close') return this.keep(data);
    if (this.mode === 'length') {
      const take = data.subarray(0, this.remaining);
      this.keep(take);
      this.remaining -= take.length;
      if (this.remaining === 0) this.done = true;
      return;
    }
    this.chunked(data);
  }

  private chunked(data: Buffer): void {
    let i = 0;
    while (i < data.length && !this.done) {
      if (this.chunkState === 'data') {
        const take = data.subarray(i, i + this.remaining);
        this.keep(take);
        this.remaining -= take.length;
        i += take.length;
        if (this.remaining === 0) this.chunkState = 'data-crlf';
        continue;
      }
      const nl = data.indexOf(0x0a, i);
      if (nl === -1) {
        this.line += data.subarray(i).toString('latin1');
        return;
      }
      const line = (this.line + data.subarray(i, nl).toString('latin1')).replace(/\r$/, '');
      this.line = '';
      i = nl + 1;
      if (this.chunkState === 'data-crlf') this.chunkState = 'size';
      else if (this.chunkState === 'size') {
        this.remaining = parseInt(line, 16);
        if (Number.isNaN(this.remaining)) {
          this.failed = 'bad chunk size';
          return;
        }
        this.chunkState = this.remaining === 0 ? 'trailer' : 'data';
      } else if (line === '') this.done = true;
    }
  }
}
