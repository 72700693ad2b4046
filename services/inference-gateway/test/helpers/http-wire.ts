/** One HTTP/1.x response read off the wire by `readResponses`. */
export interface WireResponse {
  status: number;
  /** Header names in lower case. */
  headers: Record<string, string>;
  /** The body's chunks as framed on the wire (chunked responses), or null for a body sent as is. */
  chunks: string[] | null;
  /** The whole body, decoded as UTF-8. */
  body: string;
}

const CRLF = Buffer.from('\r\n');

/**
 * Test helper: the responses in `bytes`, everything one connection received, in order. A chunked
 * body is checked as it is parsed: each size line is hexadecimal and gives the chunk's exact length
 * in bytes, each chunk ends with CRLF, and the body ends with the zero-size chunk and a blank line.
 * A body with no length (an HTTP/1.0 answer) runs to the end of `bytes`. Throws on bad framing.
 * (The adversarial suite's parser reads one answer leniently, from servers that may be hostile,
 * and keeps no chunk boundaries; this one checks the gateway's own framing, answer by answer.)
 */
export function readResponses(bytes: Buffer): WireResponse[] {
  const responses: WireResponse[] = [];
  let at = 0;
  while (at < bytes.length) {
    const headEnd = bytes.indexOf('\r\n\r\n', at);
    if (headEnd === -1) throw new Error(`an incomplete head at byte ${at}`);
    const [statusLine = '', ...lines] = bytes.subarray(at, headEnd).toString('latin1').split('\r\n');
    const status = /^HTTP\/1\.[01] (\d{3}) /.exec(statusLine);
    if (!status) throw new Error(`not a status line: ${JSON.stringify(statusLine)}`);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
    }
    at = headEnd + 4;
    let chunks: string[] | null = null;
    let body: Buffer;
    if (headers['transfer-encoding'] === 'chunked') {
      const parts: Buffer[] = [];
      for (;;) {
        const lineEnd = bytes.indexOf(CRLF, at);
        const sizeLine = bytes.subarray(at, lineEnd === -1 ? bytes.length : lineEnd).toString('latin1');
        if (lineEnd === -1 || !/^[0-9a-f]+$/i.test(sizeLine)) {
          throw new Error(`not a chunk size line: ${JSON.stringify(sizeLine)}`);
        }
        const size = Number.parseInt(sizeLine, 16);
        const start = lineEnd + 2;
        if (start + size + 2 > bytes.length || !bytes.subarray(start + size, start + size + 2).equals(CRLF)) {
          throw new Error(`a chunk of ${size} bytes at byte ${start} does not end with CRLF`);
        }
        at = start + size + 2;
        if (size === 0) break;
        parts.push(bytes.subarray(start, start + size));
      }
      chunks = parts.map((part) => part.toString('utf8'));
      body = Buffer.concat(parts);
    } else if (headers['content-length'] !== undefined) {
      const length = Number(headers['content-length']);
      body = bytes.subarray(at, at + length);
      at += length;
    } else {
      body = bytes.subarray(at);
      at = bytes.length;
    }
    responses.push({ status: Number(status[1]), headers, chunks, body: body.toString('utf8') });
  }
  return responses;
}
