import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import type { Transform } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import type { RequestHandler } from 'express';

/** Why a request body could not be read as JSON; each service maps the kind to its own error code. */
export type BodyErrorKind =
  'too_large' | 'invalid_json' | 'not_utf8' | 'too_deep' | 'unsupported_encoding' | 'bad_encoding' | 'aborted';

/** A request body that could not be read; `limit` is the byte or depth limit that refused it. */
export class BodyError extends Error {
  constructor(
    readonly kind: BodyErrorKind,
    message: string,
    readonly limit?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'BodyError';
  }
}

/** Limits of readJsonBody. */
export interface JsonBodyLimits {
  /** Largest body in bytes, after Content-Encoding is undone (so a decompression bomb stops here). */
  maxBytes: number;
  /** Deepest nesting of arrays and objects; checked on the bytes before JSON.parse builds anything. */
  maxDepth: number;
}

// A Map, not an object literal: the header's value is the client's, and `constructor` or
// `__proto__` would be found on an object's prototype.
const DECODERS = new Map<string, () => Transform>([
  ['gzip', createGunzip],
  ['x-gzip', createGunzip],
  ['deflate', createInflate],
  ['br', createBrotliDecompress],
]);

/**
 * Reads a request body and parses it as JSON, bounded before any work grows with it: the declared
 * Content-Length and the decoded size against `maxBytes`, Content-Encoding `identity`, `gzip`,
 * `deflate` or `br` (anything else refused), strict UTF-8, nesting depth against `maxDepth`.
 * An empty body is `undefined`. Rejects with BodyError.
 */
export async function readJsonBody(req: IncomingMessage, limits: JsonBodyLimits): Promise<unknown> {
  const bytes = await readBodyBytes(req, limits.maxBytes);
  return parseJsonBytes(bytes, limits.maxDepth);
}

/** Parses body bytes as JSON after the UTF-8 and depth checks; empty = `undefined`. */
export function parseJsonBytes(bytes: Buffer, maxDepth: number): unknown {
  if (bytes.length === 0) return undefined;
  if (!isUtf8(bytes)) throw new BodyError('not_utf8', 'The request body is not valid UTF-8.');
  if (!bracketsAtMost(bytes, maxDepth) && jsonDepthExceeds(bytes, maxDepth)) {
    throw new BodyError(
      'too_deep',
      `The request body nests arrays and objects deeper than ${maxDepth} levels.`,
      maxDepth,
    );
  }
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    throw new BodyError('invalid_json', 'The request body is not valid JSON.', undefined, { cause: err });
  }
}

/**
 * Whether JSON text nests `[`/`{` deeper than `maxDepth`, in one pass over the bytes with brackets
 * inside strings skipped; far cheaper than the parse it protects (no allocation, no calls).
 * Malformed text is left for JSON.parse to refuse.
 */
export function jsonDepthExceeds(bytes: Uint8Array, maxDepth: number): boolean {
  let depth = 0;
  let inString = false;
  const length = bytes.length;
  for (let i = 0; i < length; i++) {
    const byte = bytes[i] as number;
    if (inString) {
      if (byte === 0x5c) i++;
      else if (byte === 0x22) inString = false;
    } else if (byte === 0x22) inString = true;
    else if (byte === 0x5b || byte === 0x7b) {
      if (++depth > maxDepth) return true;
    } else if (byte === 0x5d || byte === 0x7d) depth--;
  }
  return false;
}

/**
 * True when the text holds at most `limit` opening brackets, so it cannot nest deeper: counted
 * with native searches, which makes the depth check nearly free for the usual request (a few
 * dozen brackets at most) and leaves the byte scan to bodies with many.
 */
function bracketsAtMost(bytes: Buffer, limit: number): boolean {
  let count = 0;
  for (let at = bytes.indexOf(0x5b); at !== -1; at = bytes.indexOf(0x5b, at + 1)) if (++count > limit) return false;
  for (let at = bytes.indexOf(0x7b); at !== -1; at = bytes.indexOf(0x7b, at + 1)) if (++count > limit) return false;
  return true;
}

/** Reads the raw body, undoing Content-Encoding, up to `maxBytes` decoded bytes. */
export function readBodyBytes(req: IncomingMessage, maxBytes: number): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > maxBytes) {
    return Promise.reject(tooLarge(maxBytes));
  }
  const encoding = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  let decoder: Transform | null = null;
  if (encoding !== 'identity' && encoding !== '') {
    const make = DECODERS.get(encoding);
    if (!make) {
      req.resume();
      return Promise.reject(
        new BodyError('unsupported_encoding', `Content-Encoding '${encoding.slice(0, 40)}' is not supported.`),
      );
    }
    decoder = make();
  }
  return new Promise<Buffer>((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    let settled = false;
    const source = decoder ?? req;
    const finish = (err: BodyError | null) => {
      if (settled) return;
      settled = true;
      source.off('data', onData);
      source.off('end', onEnd);
      source.off('error', onDecodeError);
      req.off('error', onAbort);
      req.off('aborted', onAbort);
      if (decoder) {
        req.unpipe(decoder);
        decoder.destroy();
      }
      if (err) {
        // Whatever is left of a refused body is read and dropped so the connection can be reused.
        if (!req.complete) req.resume();
        reject(err);
      } else resolve(parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, size));
    };
    const onData = (part: Buffer) => {
      size += part.length;
      if (size > maxBytes) finish(tooLarge(maxBytes));
      else parts.push(part);
    };
    const onEnd = () => finish(null);
    const onDecodeError = (err: unknown) =>
      finish(
        decoder
          ? new BodyError('bad_encoding', `The request body is not valid ${encoding} data.`, undefined, { cause: err })
          : new BodyError('aborted', 'The client aborted the request body.', undefined, { cause: err }),
      );
    const onAbort = (err?: unknown) =>
      finish(new BodyError('aborted', 'The client aborted the request body.', undefined, { cause: err }));
    source.on('data', onData);
    source.on('end', onEnd);
    source.on('error', onDecodeError);
    req.on('error', onAbort);
    req.on('aborted', onAbort);
    if (decoder) req.pipe(decoder);
  });
}

function tooLarge(maxBytes: number): BodyError {
  return new BodyError('too_large', `The request body is larger than the limit of ${maxBytes} bytes.`, maxBytes);
}

/**
 * Express middleware in place of `express.json()`: every body is read as JSON (whatever its
 * Content-Type, so clients that forget the header still get a JSON answer) with readJsonBody's
 * bounds; `req.body` is the parsed value (undefined when empty). Failures go to the error
 * middleware as BodyError.
 */
export function jsonBody(limits: JsonBodyLimits): RequestHandler {
  return (req, _res, next) => {
    if (req.method === 'GET' || req.method === 'HEAD' || req.method === 'DELETE' || req.method === 'OPTIONS') {
      if (!hasBody(req)) return next();
    }
    readJsonBody(req, limits).then(
      (body) => {
        req.body = body;
        next();
      },
      (err: unknown) => next(err),
    );
  };
}

function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}
