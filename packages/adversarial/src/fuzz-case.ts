import { gzipSync } from 'node:zlib';
import * as fc from 'fast-check';
import { toJsonBytes, type JsonNode, type RefValues } from './hostile-json';
import type { RawRequest } from './raw-http';

/** The two services under attack. */
export type ServiceName = 'gateway' | 'sessions';

/** How the body travels; everything but `length` and `none` breaks the framing on purpose. */
export type Framing =
  | { kind: 'length' }
  | { kind: 'none' }
  /** Content-Length off by `delta` from the body sent; the write side is half-closed after the body. */
  | { kind: 'wrong-length'; delta: number }
  /** Chunked; `stopAfter` bytes then EOF, or a chunk-size line `badSize`. */
  | { kind: 'chunked'; stopAfter: number | null; badSize: string | null }
  /** The right Content-Length, only `keep` bytes of the body, then EOF. */
  | { kind: 'truncated'; keep: number }
  /** A slow client: `keep` body bytes (or, with `inHead`, part of the head), then silence with the socket open. */
  | { kind: 'stall'; keep: number; inHead: boolean }
  /** Both Content-Length and Transfer-Encoding, or two different Content-Lengths. */
  | { kind: 'conflicting'; variant: 'cl-te' | 'two-cl' }
  /**
   * The request, rightly framed, `1 + copies` times in one write, only the last asking to close:
   * pipelining. The first answer is judged; the later requests are cut off when the fuzz closes
   * the connection after it, so they are clients gone mid-request or mid-stream.
   */
  | { kind: 'pipelined'; copies: number }
  /** `Content-Encoding: encoding`, the body compressed (`valid`), not compressed at all (`garbage`), or a decompression bomb. */
  | { kind: 'encoding'; encoding: string; payload: 'valid' | 'garbage' | 'bomb' };

/** The request line and head rules a case may bend. */
export interface HeadShape {
  version: string;
  lineEnd: '\r\n' | '\n';
  host: 'normal' | 'missing' | 'twice';
}

/**
 * One generated request, plain data so it prints and replays. Strings in `target` and header
 * values may hold placeholders (`{sessionId}`, `{orgKey}`, `{adminToken}`, `{consoleCookie}`,
 * `{csrfToken}`, `{tenantKey}`, `{tenantSessionsKey}`, `{orgId}`, `{victimOrgId}`, `{victimKeyId}`, `{webhookUrl}`) filled in when the
 * case is sent.
 */
export interface FuzzCase {
  service: ServiceName;
  /** The endpoint template the case started from, e.g. `POST /sessions/{id}/messages`. */
  endpoint: string;
  /** What was changed, in words; empty for a valid request. */
  mutations: string[];
  method: string;
  target: string;
  /** Header values are written as UTF-8 (strings) or as they are (bytes). */
  headers: Array<[string, string | Uint8Array]>;
  body: JsonNode | Uint8Array | null;
  framing: Framing;
  head: HeadShape;
  /** Which of the live sessions `{sessionId}` names (modulo their number). */
  pick: number;
  /** True when the request is invalid in a way that must be refused (a 2xx is then a finding). */
  mustRefuse: boolean;
}

/** Everything a placeholder can stand for. */
export interface SendContext extends RefValues {
  host: string;
  port: number;
  /**
   * The fuzz organization's key. On the session service `{orgKey}` is filled with
   * `sessionsOrgKey` instead (see Campaign.run).
   */
  orgKey: string;
  /**
   * A key of the organization the session cases act as: its agent turns are billed to it (the
   * worker's service key names the session's organization), not to the fuzz organization, whose
   * usage the billing ledger checks against the gateway cases alone.
   */
  sessionsOrgKey: string;
  adminToken: string;
  /** The value of the operator's console session cookie, signed in when the platform started. */
  consoleCookie: string;
  /** That session's CSRF token. */
  csrfToken: string;
  /** An admin key of a third organization, which must reach nothing of the victim's. */
  tenantKey: string;
  /** A standard key of that organization, which must reach none of the fuzz organization's sessions. */
  tenantSessionsKey: string;
}

/** Bytes of a gzipped JSON body that inflates to 64 MiB, built once. */
let bombBytes: Buffer | null = null;
function gzipBomb(): Buffer {
  bombBytes ??= gzipSync(
    Buffer.concat([Buffer.from('{"content":"'), Buffer.alloc(64 * 1024 * 1024, 0x61), Buffer.from('"}')]),
    {
      level: 9,
    },
  );
  return bombBytes;
}

/** Fills the placeholders of `text`. */
export function fill(text: string, ctx: SendContext): string {
  return text.replace(
    /\{(sessionId|orgKey|adminToken|consoleCookie|csrfToken|tenantKey|tenantSessionsKey|orgId|victimOrgId|victimKeyId|webhookUrl)\}/g,
    (_m, name: keyof SendContext) => String(ctx[name]),
  );
}

function bodyBytes(body: FuzzCase['body'], ctx: SendContext): Buffer | null {
  if (body === null) return null;
  if (body instanceof Uint8Array) return Buffer.from(body);
  return toJsonBytes(body, ctx);
}

/** The exact bytes a case writes, and whether the write side is half-closed after them. */
export function encodeCase(c: FuzzCase, ctx: SendContext): RawRequest {
  if (c.framing.kind === 'pipelined') {
    const framed: FuzzCase = { ...c, framing: { kind: 'length' } };
    const open = encodeCase({ ...framed, headers: c.headers.filter(([name]) => !/^connection$/i.test(name)) }, ctx);
    const parts = [
      ...Array.from({ length: c.framing.copies }, () => open.parts).flat(),
      ...encodeCase(framed, ctx).parts,
    ];
    return { parts: [Buffer.concat(parts)], finish: 'keep', head: open.head };
  }
  const eol = c.head.lineEnd;
  const lines: Buffer[] = [Buffer.from(`${c.method} ${fill(c.target, ctx)} ${c.head.version}${eol}`, 'utf8')];
  const header = (name: string, value: string | Uint8Array) =>
    lines.push(
      Buffer.concat([
        Buffer.from(`${name}: `),
        typeof value === 'string' ? Buffer.from(fill(value, ctx), 'utf8') : Buffer.from(value),
        Buffer.from(eol),
      ]),
    );
  if (c.head.host !== 'missing') header('Host', `${ctx.host}:${ctx.port}`);
  if (c.head.host === 'twice') header('Host', 'other.example');
  for (const [name, value] of c.headers) header(name, value);

  let body = bodyBytes(c.body, ctx);
  const f = c.framing;
  let finish: RawRequest['finish'] = 'keep';
  let payload: Buffer[] = [];
  if (f.kind === 'encoding') {
    header('Content-Encoding', f.encoding);
    if (f.payload === 'bomb') body = gzipBomb();
    else if (f.payload === 'valid') body = gzipSync(body ?? Buffer.alloc(0));
  }
  body ??= f.kind === 'none' ? null : Buffer.alloc(0);
  if (f.kind === 'none' || body === null) {
    // no body, no length
  } else if (f.kind === 'chunked') {
    header('Transfer-Encoding', 'chunked');
    if (f.badSize !== null) payload = [Buffer.from(`${f.badSize}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')];
    else if (f.stopAfter !== null) {
      payload = [Buffer.from(`${body.length.toString(16)}\r\n`), body.subarray(0, f.stopAfter)];
      finish = 'end';
    } else payload = [Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')];
  } else if (f.kind === 'wrong-length') {
    header('Content-Length', String(Math.max(0, body.length + f.delta)));
    payload = [body];
    finish = 'end';
  } else if (f.kind === 'truncated') {
    header('Content-Length', String(body.length));
    payload = [body.subarray(0, f.keep)];
    finish = 'end';
  } else if (f.kind === 'stall') {
    header('Content-Length', String(body.length));
    if (f.inHead) {
      const headBytes = Buffer.concat(lines);
      return { parts: [headBytes.subarray(0, Math.max(1, headBytes.length - 1 - (f.keep % 20)))], finish: 'keep' };
    }
    payload = [body.subarray(0, Math.min(f.keep, Math.max(0, body.length - 1)))];
  } else if (f.kind === 'conflicting') {
    header('Content-Length', String(body.length));
    if (f.variant === 'two-cl') header('Content-Length', String(body.length + 7));
    else header('Transfer-Encoding', 'chunked');
    payload = [body];
  } else {
    header('Content-Length', String(body.length));
    payload = [body];
  }
  lines.push(Buffer.from(eol));
  return { parts: [Buffer.concat(lines), ...payload], finish, head: c.method === 'HEAD' };
}

/** A readable rendering of the bytes a case writes (escaped, long runs elided), for findings. */
export function describeCase(c: FuzzCase, ctx: SendContext): string {
  const request = encodeCase(c, ctx);
  const bytes = Buffer.concat(request.parts);
  const shown =
    bytes.length > 1500
      ? Buffer.concat([bytes.subarray(0, 1000), Buffer.from(`…[${bytes.length - 1300} bytes]…`), bytes.subarray(-300)])
      : bytes;
  let text = '';
  for (const byte of shown) {
    if (byte === 0x0a) text += '\\n';
    else if (byte === 0x0d) text += '\\r';
    else if (byte === 0x5c) text += '\\\\';
    else if (byte < 0x20 || byte >= 0x7f) text += `\\x${byte.toString(16).padStart(2, '0')}`;
    else text += String.fromCharCode(byte);
  }
  return `${c.service} ${c.endpoint} [${c.mutations.join('; ') || 'valid'}] ${request.finish === 'end' ? '(then EOF) ' : ''}bytes: "${text}"`;
}

/** fast-check prints cases with this, so a counterexample shows the endpoint and its mutations. */
export function printable(c: FuzzCase): FuzzCase {
  return Object.assign(c, {
    [fc.toStringMethod]: () =>
      `${c.service} ${c.method} ${c.target} (${c.endpoint}) [${c.mutations.join('; ') || 'valid'}]`,
  });
}
