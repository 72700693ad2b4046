import { connect } from 'node:net';

/** What came back on a raw connection: the bytes as text, and how the connection ended. */
export interface RawExchange {
  /** Everything the server sent. */
  text: string;
  /** The same, as the bytes that came. */
  bytes: Buffer;
  /** Status of the first response, or null when none came. */
  status: number | null;
  /** The body of the first response (after the blank line), as sent. */
  body: string;
  /** How the exchange ended: the server closed, or the wait ran out with the socket still open. */
  ended: 'closed' | 'timeout';
}

/**
 * Test helper: writes `parts` to a fresh TCP connection exactly as given (framing that no HTTP
 * client would produce: broken lengths, bodies that stop, odd methods), `gapMs` apart, then reads
 * until the server closes or `waitMs` passes.
 */
export function rawExchange(
  port: number,
  parts: Array<string | Buffer>,
  options: { waitMs?: number; gapMs?: number; host?: string } = {},
): Promise<RawExchange> {
  const { waitMs = 3000, gapMs = 0, host = '127.0.0.1' } = options;
  return new Promise((resolve, reject) => {
    const socket = connect(port, host);
    const chunks: Buffer[] = [];
    let settled = false;
    const done = (ended: RawExchange['ended']) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const bytes = Buffer.concat(chunks);
      const text = bytes.toString('utf8');
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(text);
      const split = text.indexOf('\r\n\r\n');
      resolve({
        text,
        bytes,
        status: match ? Number(match[1]) : null,
        body: split === -1 ? '' : text.slice(split + 4),
        ended,
      });
    };
    const timer = setTimeout(() => done('timeout'), waitMs);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('close', () => done('closed'));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ECONNRESET' || err.code === 'EPIPE') done('closed');
      else if (!settled) {
        settled = true;
        clearTimeout(timer);
        reject(err);
      }
    });
    socket.on('connect', async () => {
      for (const part of parts) {
        if (socket.destroyed) return;
        socket.write(part);
        if (gapMs > 0) await new Promise((r) => setTimeout(r, gapMs));
      }
    });
  });
}
