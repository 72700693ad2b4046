import type { ServerResponse } from 'node:http';

/** How long a browser's EventSource waits before it reconnects, ms (the `retry:` field). */
export const SSE_RETRY_MS = 1000;

/** The heartbeat: a comment line, which every client ignores and keeps idle proxies from cutting the stream. */
export const SSE_HEARTBEAT = ': keep-alive\n\n';

/**
 * One event: `id:` its log position, `event:` its type, `data:` its JSON (one line: JSON escapes
 * every line break inside strings). No `id:` for an event that has none (`stream.truncated`).
 */
export function sseEvent(type: string, json: string, id?: string): string {
  return `${id === undefined ? '' : `id: ${id}\n`}event: ${type}\ndata: ${json}\n\n`;
}

/**
 * Writes the head of an event stream and its first frame: `retry:`, and for a new reader an
 * id-only frame with its starting position, which moves an EventSource's last event id without an
 * event, so a reconnection before the first event resumes exactly there.
 */
export function openEventStream(
  res: ServerResponse,
  startId: string | null,
  headers: Record<string, string> = {},
): void {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    // nginx buffers proxied answers unless told not to.
    'x-accel-buffering': 'no',
    ...headers,
  });
  res.write(`retry: ${SSE_RETRY_MS}\n${startId === null ? '' : `id: ${startId}\n`}\n`);
}
