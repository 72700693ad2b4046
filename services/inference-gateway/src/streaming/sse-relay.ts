import type { ServerResponse } from 'node:http';
import { SSE_DONE_LINE } from '@tollway/contracts';
import type { SettledUsage } from '../admission/admission.types';
import {
  EngineAbortedError,
  EngineStreamError,
  RAW_JSON,
  type ChunkStream,
  type ClientAbort,
  type StreamItem,
} from '../engines/engine.types';
import type { ChunkNormaliser } from './chunk-normaliser';
import type { LiveRelays } from './live-relays';

/** Headers of every SSE response. */
export const SSE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  'x-accel-buffering': 'no',
});

/** How a relayed stream ended, with the usage to settle. */
export interface RelayResult {
  outcome: 'done' | 'aborted' | 'failed';
  usage: SettledUsage;
  /** Why it failed, for the log. */
  error?: unknown;
}

const DONE_FRAME = `${SSE_DONE_LINE}\n\n`;
const FRAME_SEPARATOR = '\n\ndata: ';

/**
 * Relays an engine stream to the client through the normaliser. One socket write per engine
 * read; when the client reads slower than the engine writes, the relay waits for `drain`, which
 * stops reading the engine, so nothing piles up in the gateway. A broken engine stream ends with
 * an `error` event and no `[DONE]`; a client that goes away aborts the engine (through `signal`).
 * The status line and headers must already be written.
 */
export async function relayStream(
  res: ServerResponse,
  stream: ChunkStream,
  normaliser: ChunkNormaliser,
  signal: ClientAbort,
  relays?: LiveRelays,
): Promise<RelayResult> {
  const out: StreamItem[] = [];
  const rest = stream.rest[Symbol.asyncIterator]();
  // A shutdown whose drain time is up stops the engine side; the relay then ends the stream below.
  let stopped = false;
  const forget = relays?.add(() => {
    stopped = true;
    void rest.return?.()?.catch(() => undefined);
  });
  try {
    // Every batch the engine sent is counted, even one that arrives after the client left (billing).
    for (let batch = stream.first; ;) {
      out.length = 0;
      for (const chunk of batch) normaliser.accept(chunk, out);
      // Awaited only when the socket is full: `await undefined` would cost a turn of the microtask queue per batch.
      const drained = write(res, frames(out), signal);
      if (drained) await drained;
      if (signal.aborted || stopped) break;
      const next = await rest.next();
      if (stopped) break; // whatever the stopped engine answered, the stream did not reach its end
      if (next.done) break;
      batch = next.value;
    }
    if (signal.aborted) return { outcome: 'aborted', usage: normaliser.settledUsage() };
    if (stopped) return endStopped(res, normaliser);
    out.length = 0;
    normaliser.finish(out);
    res.end(frames(out, DONE_FRAME));
    return { outcome: 'done', usage: normaliser.settledUsage() };
  } catch (err) {
    if (signal.aborted || err instanceof EngineAbortedError)
      return { outcome: 'aborted', usage: normaliser.settledUsage() };
    if (stopped) return endStopped(res, normaliser);
    if (!res.destroyed) res.end(`data: ${JSON.stringify(streamErrorEvent(err))}\n\n`);
    return { outcome: 'failed', usage: normaliser.settledUsage(), error: err };
  } finally {
    forget?.();
    // Stops the engine side (closes the upstream body, frees a simulated slot) however the relay ended.
    void rest.return?.()?.catch(() => undefined);
  }
}

/** The event that ends a stream the gateway stopped because it is shutting down. */
export const SHUTDOWN_EVENT = Object.freeze({
  error: Object.freeze({
    message: 'The gateway is shutting down and ended this stream before its end. Retry the request.',
    type: 'server_error',
    param: null,
    code: 'server_shutting_down',
  }),
});

/** Ends a stream stopped by a shutdown with its event (no [DONE]); what was relayed is settled. */
function endStopped(res: ServerResponse, normaliser: ChunkNormaliser): RelayResult {
  if (!res.destroyed) res.end(`data: ${JSON.stringify(SHUTDOWN_EVENT)}\n\n`);
  return {
    outcome: 'failed',
    usage: normaliser.settledUsage(),
    error: new Error('The stream was ended by the gateway shutting down.'),
  };
}

/** The event that ends a broken stream: the envelope, with the engine's message when it gave one. */
export function streamErrorEvent(err: unknown): {
  error: { message: string; type: string; param: null; code: string };
} {
  const engineMessage = err instanceof EngineStreamError ? err.engineError?.message : undefined;
  const message =
    typeof engineMessage === 'string'
      ? engineMessage
      : err instanceof EngineStreamError
        ? err.message
        : 'The stream from the engine broke before it was complete.';
  return { error: { message, type: 'server_error', param: null, code: 'engine_stream_error' } };
}

/**
 * The SSE text of a batch, then `tail`. Several items are built by one join: the socket needs the
 * text flat, and join writes it flat at once, where concatenating frame by frame (or wrapping the
 * joined text) leaves string pieces for the write to copy again; it replaces the batch's items by
 * their frame text. One item (every read of an engine that writes each event on its own) is one
 * template, which the write flattens once, as it did the one-element join's pieces.
 */
function frames(items: StreamItem[], tail = ''): string {
  const last = items.length - 1;
  if (last < 0) return tail;
  if (last === 0) return `data: ${text(items[0] as StreamItem)}\n\n${tail}`;
  for (let i = 0; i <= last; i++) {
    const item = items[i] as StreamItem;
    if (typeof item !== 'string') items[i] = text(item);
  }
  items[0] = `data: ${items[0] as string}`;
  items[last] = `${items[last] as string}\n\n${tail}`;
  return items.join(FRAME_SEPARATOR);
}

/** An item's JSON text: a passed-through chunk's own, an engine chunk's unchanged text, or a serialisation. */
function text(item: StreamItem): string {
  return typeof item === 'string' ? item : (item[RAW_JSON] ?? JSON.stringify(item));
}

/**
 * Writes; if the socket buffer is full, returns a promise of its draining or the client going away.
 * What one engine read produces leaves in one socket write with no corking here: `res.write` corks
 * the socket until the process's next tick, which comes after the whole chain of promise jobs the
 * read started (the headers, every batch of the read, `res.end`). So an engine stream that arrives in
 * one read costs one system call to the client, and the write is not held back to the end of the
 * event loop's turn, behind the other sockets' reads.
 */
function write(res: ServerResponse, text: string, signal: ClientAbort): Promise<void> | undefined {
  if (text.length === 0) return undefined;
  if (res.write(text) || signal.aborted) return undefined;
  return new Promise<void>((resolve) => {
    const done = () => {
      res.off('drain', done);
      signal.off('abort', done);
      resolve();
    };
    res.on('drain', done);
    signal.once('abort', done);
  });
}
