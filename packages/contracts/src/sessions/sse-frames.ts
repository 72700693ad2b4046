/**
 * A Server-Sent Events reader that follows the WHATWG event-stream rules the way a browser's
 * EventSource does. Written here rather than taken from `eventsource-parser`, which drops a frame
 * that carries an `id:` and no data; the standard makes such a frame move the last event id, and
 * the session service opens every stream with one (the position a reconnect resumes from).
 */

/** One dispatched frame: an event with data, or (`data` null) a frame that only set the id. */
export interface SseFrame {
  /** The last event id after this frame (it persists across frames, as in EventSource). */
  lastEventId: string;
  /** The `event:` field, `message` when absent; null for an id-only frame. */
  type: string | null;
  /** The data lines joined with `\n`; null for an id-only frame. */
  data: string | null;
}

/** What `retry:` asked for, ms, as the frames go by; undefined until a server sends one. */
export interface SseReaderState {
  lastEventId: string;
  retryMs: number | undefined;
}

/**
 * Reads the frames of an event stream body. `state.lastEventId` starts at the id the request
 * resumed from and is kept up to date; the frames are yielded as they complete.
 */
export async function* readSseFrames(
  body: ReadableStream<Uint8Array>,
  state: SseReaderState,
): AsyncGenerator<SseFrame> {
  const reader = body.getReader();
  const decoder = new TextDecoder('utf-8');
  let buffer = '';
  let first = true;
  let idBuffer = state.lastEventId;
  let type = '';
  let data: string[] = [];
  let sawId = false;
  // A CR at the end of a chunk may be the first half of a CRLF: it is held until the next chunk.
  let pendingCr = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      let text = done ? decoder.decode() : decoder.decode(value, { stream: true });
      if (first && text.length > 0) {
        if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
        first = false;
      }
      if (pendingCr && text.startsWith('\n')) text = text.slice(1);
      pendingCr = false;
      buffer += text;
      let start = 0;
      for (;;) {
        const lf = buffer.indexOf('\n', start);
        const cr = buffer.indexOf('\r', start);
        const end = lf === -1 ? cr : cr === -1 ? lf : Math.min(lf, cr);
        if (end === -1) break;
        if (buffer[end] === '\r' && end === buffer.length - 1 && !done) {
          pendingCr = true;
        }
        const line = buffer.slice(start, end);
        start = end + (buffer[end] === '\r' && buffer[end + 1] === '\n' ? 2 : 1);
        if (line === '') {
          state.lastEventId = idBuffer;
          if (data.length > 0) yield { lastEventId: idBuffer, type: type || 'message', data: data.join('\n') };
          else if (sawId) yield { lastEventId: idBuffer, type: null, data: null };
          type = '';
          data = [];
          sawId = false;
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon === -1 ? line : line.slice(0, colon);
        let fieldValue = colon === -1 ? '' : line.slice(colon + 1);
        if (fieldValue.startsWith(' ')) fieldValue = fieldValue.slice(1);
        if (field === 'data') data.push(fieldValue);
        else if (field === 'event') type = fieldValue;
        else if (field === 'id' && !fieldValue.includes('\0')) {
          idBuffer = fieldValue;
          sawId = true;
        } else if (field === 'retry' && /^\d+$/.test(fieldValue)) state.retryMs = Number(fieldValue);
      }
      buffer = buffer.slice(start);
      if (done) return;
    }
  } finally {
    // Also when the consumer stops early: the connection is given up, not left to drain.
    await reader.cancel().catch(() => undefined);
  }
}
