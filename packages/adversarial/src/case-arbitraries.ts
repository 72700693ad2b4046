import * as fc from 'fast-check';
import { breaksContract } from './contract-oracle';
import { gatewayEndpoints, sessionEndpoints, type EndpointTemplate } from './endpoints';
import { printable, type Framing, type FuzzCase, type HeadShape, type ServiceName } from './fuzz-case';
import { ByteString, Deep, Entries, LongString, RawToken, isPlainObject, type JsonNode } from './hostile-json';
import { boundValue, hostileQuery, hostileSegment, hostileValue, type Hostile } from './hostile-values';

type Mutation =
  | { kind: 'body-replace'; at: number; value: Hostile }
  | { kind: 'param'; at: number; value: Hostile }
  | { kind: 'body-delete'; at: number }
  | { kind: 'body-add'; at: number; key: string; value: Hostile }
  | { kind: 'body-whole'; body: JsonNode | Uint8Array; label: string; invalid: boolean }
  | { kind: 'segment'; at: number; segment: string }
  | { kind: 'query'; query: string }
  | { kind: 'method'; method: string }
  | { kind: 'header'; name: string; value: string | Uint8Array; label: string }
  | { kind: 'framing'; framing: Framing; label: string }
  | { kind: 'head'; head: Partial<HeadShape>; label: string };

const VALID_JSON_BODY = '{"content":"hi"}';

const bytes = (text: string, encoding: BufferEncoding = 'utf8') => new Uint8Array(Buffer.from(text, encoding));

const wholeBody: fc.Arbitrary<Mutation> = fc
  .constantFrom<[JsonNode | Uint8Array, string, boolean]>(
    [bytes('hello'), 'not JSON', true],
    [bytes(''), 'empty body', false],
    [bytes('{'), 'cut JSON', true],
    [bytes('{"a":'), 'cut JSON value', true],
    [bytes('{} x'), 'trailing garbage', true],
    [bytes('{}{}'), 'two JSON values', true],
    [bytes('[]'), 'an array', false],
    [bytes('null'), 'null', false],
    [bytes('"str"'), 'a string', false],
    [bytes('1'), 'a number', false],
    [bytes('\ufeff{}'), 'BOM then {}', false],
    [bytes(VALID_JSON_BODY, 'utf16le'), 'UTF-16LE JSON', true],
    [new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]), 'invalid UTF-8 in a key', false],
    [new Uint8Array([0x00, 0x01, 0x02, 0xff]), 'binary', true],
    [bytes('a=1&b=2'), 'form-encoded', true],
    [new Deep(100_000, 'array'), 'whole body nested 100000 deep', false],
    [new Deep(10_000, 'object'), 'whole body objects nested 10000 deep', false],
    [new RawToken('NaN'), 'bare NaN', true],
  )
  .map(([body, label, invalid]) => ({ kind: 'body-whole', body, label, invalid }));

const framingKinds: fc.Arbitrary<Framing>[] = [
  fc.constantFrom(-5, -1, 1, 10, 1_000_000).map((delta) => ({ kind: 'wrong-length' as const, delta })),
  fc.record({ stopAfter: fc.nat(200), badSize: fc.constant(null) }).map((f) => ({ kind: 'chunked' as const, ...f })),
  fc
    .constantFrom('zz', 'fffffffffffffffffff', '-1', '1;ext=1', ' 5', '0x5')
    .map((badSize) => ({ kind: 'chunked' as const, stopAfter: null, badSize })),
  fc.constant({ kind: 'chunked' as const, stopAfter: null, badSize: null }),
  fc.nat(100).map((keep) => ({ kind: 'truncated' as const, keep })),
  fc.constantFrom<'cl-te' | 'two-cl'>('cl-te', 'two-cl').map((variant) => ({ kind: 'conflicting' as const, variant })),
  fc.integer({ min: 1, max: 3 }).map((copies) => ({ kind: 'pipelined' as const, copies })),
  fc
    .tuple(
      fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'compress', 'x-unknown', 'gzip, gzip', 'GZIP', ''),
      fc.constantFrom<'valid' | 'garbage' | 'bomb'>('valid', 'garbage', 'bomb'),
    )
    .map(([encoding, payload]) => ({
      kind: 'encoding' as const,
      encoding,
      payload: encoding === 'gzip' || payload !== 'valid' ? payload : ('garbage' as const),
    })),
];

/** A slow client; rare, as each waits out the services' request timeouts (seconds, see Platform). */
const stall: fc.Arbitrary<Framing> = fc
  .record({ keep: fc.nat(100), inHead: fc.boolean() })
  .map((f) => ({ kind: 'stall' as const, ...f }));

const framing: fc.Arbitrary<Mutation> = fc
  .oneof(...framingKinds.map((arbitrary) => ({ weight: 6, arbitrary })), { weight: 1, arbitrary: stall })
  .map((f) => ({ kind: 'framing', framing: f, label: `framing ${JSON.stringify(f)}` }));

/** Labels of the header mutations that must cost a cookie-borne write its CSRF check. */
const CSRF_BROKEN = 'CSRF token broken';
const CROSS_SITE = 'a cross-site Origin';
/** Label of the header mutations by which an organization key asks to be billed as another. */
const ANOTHER_ORGANIZATION_NAMED = 'x-tollway-organization naming another organization';

const header: fc.Arbitrary<Mutation> = fc
  .constantFrom<[string, string | Uint8Array, string]>(
    ['Authorization', 'Bearer {orgKey}€', 'key + non-Latin-1'],
    [
      'Authorization',
      new Uint8Array([0x42, 0x65, 0x61, 0x72, 0x65, 0x72, 0x20, 0xff, 0xfe]),
      'key of invalid UTF-8 bytes',
    ],
    ['Authorization', 'Bearer', 'Bearer without key'],
    ['Authorization', 'Bearer {orgKey} extra', 'key + extra word'],
    ['Authorization', 'Basic dXNlcjpwYXNz', 'Basic auth'],
    ['Authorization', `Bearer ${'a'.repeat(10_000)}`, 'key of 10000 chars'],
    ['Authorization', 'bearer {adminToken}', 'admin token as org key'],
    ['Authorization', 'Bearer {orgKey}', 'org key again (duplicate header)'],
    ['Authorization', 'Bearer {orgKey}\u0000', 'key + NUL'],
    ['Content-Type', 'text/plain', 'text/plain'],
    ['Content-Type', 'application/json; charset=utf-16', 'charset utf-16'],
    ['Content-Type', 'application/json; charset=bogus', 'charset bogus'],
    ['Content-Type', 'application/json; charset=latin1', 'charset latin1'],
    ['Content-Type', 'multipart/form-data; boundary=x', 'multipart'],
    ['Content-Type', 'application/x-www-form-urlencoded', 'form'],
    ['Content-Type', '', 'empty content type'],
    ['X-Request-Id', 'x'.repeat(200), 'request id 200 chars'],
    ['X-Request-Id', 'id€\u00e9', 'request id non-Latin-1'],
    ['X-Request-Id', new Uint8Array([0x61, 0xff, 0x0b]), 'request id raw bytes'],
    ['X-Request-Id', 'client.id:1-2_3', 'request id acceptable (echoed)'],
    ['X-Request-Id', 'r'.repeat(128), 'request id 128 chars (echoed)'],
    ['X-Request-Id', 'r'.repeat(129), 'request id 129 chars'],
    ['X-Request-Id', 'id with spaces; x=1', 'request id with spaces and ;'],
    ['X-Request-Id', 'id\tx', 'request id with a tab'],
    ['X-Request-Id', bytes('a\r\nX-Request-Id: b'), 'request id twice'],
    ['X-Request-Id', bytes('a\r\nSet-Cookie: s=1'), 'request id then an injected header'],
    ['Idempotency-Key', 'k'.repeat(300), 'idempotency key of 300 chars'],
    ['Idempotency-Key', 'cl\u00e9\u20ac', 'idempotency key non-Latin-1'],
    ['Idempotency-Key', new Uint8Array([0x6b, 0xff, 0xfe]), 'idempotency key of raw bytes'],
    ['Idempotency-Key', '', 'empty idempotency key'],
    ['Idempotency-Key', 'fuzz-idempotency-key', 'one idempotency key for every case (reused)'],
    // What a cross-site page, or a page holding a stale or forged token, would send.
    ['X-CSRF-Token', 'not-the-token', CSRF_BROKEN],
    ['X-CSRF-Token', '', CSRF_BROKEN],
    ['X-CSRF-Token', '{csrfToken}x', CSRF_BROKEN],
    ['X-CSRF-Token', 't'.repeat(10_000), CSRF_BROKEN],
    ['X-CSRF-Token', new Uint8Array([0x74, 0xff, 0x00]), CSRF_BROKEN],
    ['X-CSRF-Token', '{csrfToken}', `${CSRF_BROKEN} (sent twice: joined)`],
    ['Origin', 'http://evil.example', `${CROSS_SITE} (another site)`],
    ['Origin', 'null', `${CROSS_SITE} (null)`],
    ['Origin', 'http://[', `${CROSS_SITE} (not a URL)`],
    ['Origin', 'http://127.0.0.1.evil.example', `${CROSS_SITE} (a look-alike host)`],
    ['Cookie', 'tollway_console=forged.signature', 'a forged session cookie'],
    ['Cookie', `tollway_console=${'c'.repeat(8000)}`, 'a session cookie of 8 KB'],
    ['Cookie', 'tollway_console=%E0%A4%A; a=%ZZ', 'cookies of broken percent-encoding'],
    ['Cookie', Array.from({ length: 500 }, (_, i) => `c${i}=${i}`).join('; '), '500 cookies'],
    ['Cookie', '__proto__=1; constructor=2; tollway_console=', 'cookies named __proto__ and constructor'],
    // Only a service key may act for another organization: from the fuzz organization's key, 401.
    ['X-Tollway-Organization', '{victimOrgId}', ANOTHER_ORGANIZATION_NAMED],
    ['X-Tollway-Organization', '{orgId}, {victimOrgId}', `${ANOTHER_ORGANIZATION_NAMED} (and its own)`],
    ['X-Tollway-Organization', '{orgId}', 'x-tollway-organization naming its own organization'],
    ['X-Tollway-Organization', 'o'.repeat(5000), 'x-tollway-organization of 5000 chars'],
    ['X-Tollway-Organization', new Uint8Array([0x6f, 0xff, 0xfe]), 'x-tollway-organization of raw bytes'],
    ['X-Tollway-Organization', 'org\u0001{victimOrgId}', 'x-tollway-organization with a control character'],
    // A line break smuggling a second header: refused by the parser, or joined (and so not an id).
    [
      'X-Tollway-Organization',
      '{orgId}\r\nX-Tollway-Organization: {victimOrgId}',
      `${ANOTHER_ORGANIZATION_NAMED} (a second header smuggled in)`,
    ],
    ['Accept', 'text/event-stream', 'accept SSE'],
    ['Accept', 'text/event-stream;q=0.5, application/json;q=0.4', 'accept SSE preferred by weight'],
    ['Accept', `text/event-stream;${'q=1;'.repeat(2000)}`, 'accept SSE with 2000 parameters'],
    // Resume ids of the session event stream: none is an id the log gave (or it is its start).
    ['Last-Event-ID', '', 'empty Last-Event-ID'],
    ['Last-Event-ID', 'abc', 'Last-Event-ID not an id'],
    ['Last-Event-ID', '0-0', 'Last-Event-ID at the log start'],
    ['Last-Event-ID', '18446744073709551615-18446744073709551615', 'Last-Event-ID at the largest id'],
    ['Last-Event-ID', '18446744073709551616-0', 'Last-Event-ID past 2^64'],
    ['Last-Event-ID', `${'1'.repeat(10_000)}-0`, 'Last-Event-ID of 10 000 digits'],
    ['Last-Event-ID', '1-0, 2-0', 'Last-Event-ID twice (joined)'],
    ['Last-Event-ID', new Uint8Array([0x31, 0x2d, 0xff]), 'Last-Event-ID of raw bytes'],
    ['Last-Event-ID', '1-0\u00002-0', 'Last-Event-ID with NUL'],
    ['Accept-Encoding', 'gzip, br, zstd', 'accept-encoding'],
    ['X-Big', 'b'.repeat(20_000), 'header of 20 KB'],
    ['X-Huge', 'h'.repeat(100_000), 'header of 100 KB'],
    ['Expect', '100-continue', 'expect 100-continue'],
    ['Expect', 'garbage', 'expect garbage'],
    ['Upgrade', 'h2c', 'upgrade h2c'],
    ['Upgrade', 'websocket', 'upgrade websocket'],
    ['Bad Header', '1', 'header name with a space'],
    ['X-Fold', bytes('a\r\n folded'), 'obs-fold'],
    ['X-Nul', bytes('a\u0000b'), 'NUL in a header'],
    ['X-Bare-Lf', bytes('a\nX-Injected: 1'), 'bare LF in a header'],
    ['Transfer-Encoding', 'identity', 'transfer-encoding identity'],
    ['Content-Length', 'abc', 'non-numeric Content-Length'],
    ['Content-Length', '-1', 'negative Content-Length'],
    ['X-Many', Array.from({ length: 300 }, () => 'v').join('\r\nX-Many: '), '300 headers'],
    ['X-Many', Array.from({ length: 3000 }, () => 'v').join('\r\nX-Many: '), '3000 headers'],
  )
  .map(([name, value, label]) => ({ kind: 'header', name, value, label }));

const method: fc.Arbitrary<Mutation> = fc
  .constantFrom(
    'GET',
    'POST',
    'PUT',
    'PATCH',
    'DELETE',
    'HEAD',
    'OPTIONS',
    'TRACE',
    'CONNECT',
    'PROPFIND',
    'FOO',
    'get',
    'M-SEARCH',
    'PRI',
    'G\u0000T',
  )
  .map((m) => ({ kind: 'method', method: m }));

const head: fc.Arbitrary<Mutation> = fc
  .constantFrom<[Partial<HeadShape>, string]>(
    [{ version: 'HTTP/1.0' }, 'HTTP/1.0'],
    [{ version: 'HTTP/2.0' }, 'HTTP/2.0 in the request line'],
    [{ version: 'HTTP/9.9' }, 'HTTP/9.9'],
    [{ version: 'HTTX/1.1' }, 'broken version'],
    [{ lineEnd: '\n' }, 'bare LF line ends'],
    [{ host: 'missing' }, 'no Host'],
    [{ host: 'twice' }, 'Host twice'],
  )
  .map(([shape, label]) => ({ kind: 'head', head: shape, label }));

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('param' as const), at: fc.nat(), value: boundValue }) },
  {
    weight: 8,
    arbitrary: fc.record({ kind: fc.constant('body-replace' as const), at: fc.nat(), value: hostileValue }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('body-delete' as const), at: fc.nat() }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('body-add' as const),
      at: fc.nat(),
      key: fc.constantFrom('extra', '__proto__', 'constructor', 'stream', 'n', 'id', 'model', 'webhook'),
      value: hostileValue,
    }),
  },
  { weight: 1, arbitrary: wholeBody },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('segment' as const), at: fc.nat(), segment: hostileSegment }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('query' as const), query: hostileQuery }) },
  { weight: 1, arbitrary: method },
  { weight: 2, arbitrary: header },
  { weight: 2, arbitrary: framing },
  { weight: 1, arbitrary: head },
);

type Path = Array<string | number>;

/**
 * Parameters that drive work, memory, or later land in a header, URL or log: the ones the issue
 * names bounds for. A `param` mutation sets one of them (created when absent) to a bound value,
 * so they are hit far more often than a uniformly drawn place in the body would be.
 */
const WORK_PARAMETERS: Path[] = [
  ['n'],
  ['max_tokens'],
  ['max_completion_tokens'],
  ['top_logprobs'],
  ['logit_bias'],
  ['stop'],
  ['tools'],
  ['messages'],
  ['seed'],
  ['top_k'],
  ['temperature'],
  ['user'],
  ['model'],
  ['messages', 0, 'content'],
  ['messages', 1, 'name'],
  ['tools', 0, 'function', 'parameters'],
  ['tools', 0, 'function', 'name'],
  ['stream_options', 'include_usage'],
  ['response_format'],
  ['reasoning_effort'],
  ['tool_choice'],
  ['content'],
  ['role'],
  ['name'],
  ['user_params'],
  ['user_params', 'model'],
  ['user_params', 'max_tokens'],
  ['user_params', 'nested'],
  ['webhook', 'url'],
  ['webhook', 'token'],
  ['webhook', 'include_messages'],
  ['tool_calls'],
  ['tool_call_id'],
  ['base64_image'],
  ['state'],
  ['state', 0, 'content'],
  ['state', 0, 'role'],
  ['budgets', 'requests'],
  ['credit'],
  ['credit_top_up'],
  ['session_limits'],
  ['session_limits', 'sessions'],
  ['session_limits', 'running_turns'],
  ['session_limits', 'waiting_turns'],
  ['session_limits', 'weight'],
  ['id'],
];

/** The work parameters whose parent exists in `body`. */
function workParameters(body: JsonNode): Path[] {
  return WORK_PARAMETERS.filter((path) => {
    let node: JsonNode | undefined = body;
    for (const key of path.slice(0, -1)) {
      if (node === undefined || node === null || typeof node !== 'object') return false;
      node = (node as Record<string, JsonNode>)[key as string];
    }
    return Array.isArray(node) || (node !== undefined && isPlainObject(node));
  });
}

/** Every place in a body's plain JSON tree, the root included. */
function pathsOf(node: JsonNode, prefix: Path = []): Path[] {
  const out: Path[] = [prefix];
  if (Array.isArray(node)) node.forEach((item, i) => out.push(...pathsOf(item, [...prefix, i])));
  else if (isPlainObject(node))
    for (const [key, value] of Object.entries(node)) out.push(...pathsOf(value, [...prefix, key]));
  return out;
}

function clone(node: JsonNode): JsonNode {
  if (Array.isArray(node)) return node.map(clone);
  if (isPlainObject(node)) return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, clone(v)]));
  return node;
}

/** Replaces (or, with `value` undefined, deletes) the node at `path`; returns the new root. */
function setAt(root: JsonNode, path: Path, value: JsonNode | undefined): JsonNode {
  if (path.length === 0) return value ?? {};
  const parent = path
    .slice(0, -1)
    .reduce<JsonNode>((node, key) => (node as Record<string, JsonNode>)[key as string] as JsonNode, root);
  const last = path[path.length - 1] as string | number;
  if (Array.isArray(parent) && typeof last === 'number') {
    if (value === undefined) parent.splice(last, 1);
    else parent[last] = value;
  } else if (isPlainObject(parent)) {
    if (value === undefined) delete parent[last as string];
    // An own property even for `__proto__` (as JSON.parse makes it), never the object's prototype.
    else Object.defineProperty(parent, last, { value, enumerable: true, writable: true, configurable: true });
  }
  return root;
}

function pathLabel(path: Path): string {
  return path.length === 0 ? 'body' : `body.${path.join('.')}`;
}

const INVALID_TOKENS = new Set(['NaN', 'Infinity', '-Infinity', '0x10', '+1', '.5', '01', '1.', '--1', '1e', 'nan']);

/** True when the tree holds something no JSON parser may accept. */
function holdsInvalidJson(node: JsonNode): boolean {
  if (node instanceof RawToken) return INVALID_TOKENS.has(node.text);
  if (node instanceof ByteString) return node.bytes.some((b) => b < 0x20);
  if (node instanceof Entries) return node.entries.some(([, v]) => holdsInvalidJson(v));
  if (Array.isArray(node)) return node.some(holdsInvalidJson);
  if (isPlainObject(node)) return Object.values(node).some(holdsInvalidJson);
  return false;
}

const NOT_A_HEADER_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

/** True when a webhook token would not survive as an HTTP header value (the issue's crash). */
function badWebhookToken(body: JsonNode): boolean {
  if (!isPlainObject(body) || !isPlainObject(body.webhook ?? null)) return false;
  const token = (body.webhook as Record<string, JsonNode>).token;
  if (typeof token === 'string') return NOT_A_HEADER_VALUE.test(token);
  if (token instanceof ByteString) return token.bytes.some((b) => b >= 0x80 || (b < 0x20 && b !== 0x09));
  if (token instanceof LongString) return token.length > 0 && NOT_A_HEADER_VALUE.test(token.unit);
  return false;
}

/**
 * True for a write borne by the console's cookie whose CSRF token or Origin a mutation broke, and
 * no other credential: it must be refused (403), whatever else it holds. A safe method needs no
 * token, and an `Authorization` header makes it a bearer call, which needs none either.
 */
function forgedConsoleWrite(
  template: EndpointTemplate,
  method: string,
  labels: readonly string[],
  extraHeaders: ReadonlyArray<[string, string | Uint8Array]>,
): boolean {
  if (template.credential !== 'console' || ['GET', 'HEAD', 'OPTIONS'].includes(method)) return false;
  // A new path segment may lead out of the admin API, to something that needs no session.
  if (credentialsOrPathChanged(labels, extraHeaders)) return false;
  return labels.some((label) => label.includes(CSRF_BROKEN) || label.includes(CROSS_SITE));
}

/** True when a mutation sent an `Authorization` header of its own or replaced a path segment. */
function credentialsOrPathChanged(
  labels: readonly string[],
  extraHeaders: ReadonlyArray<[string, string | Uint8Array]>,
): boolean {
  return (
    labels.some((label) => label.startsWith('path segment')) ||
    extraHeaders.some(([name]) => name.toLowerCase() === 'authorization')
  );
}

/**
 * True for another organization's admin reaching for what is not theirs (`tenant` templates): it
 * must be refused, whatever else the request holds, unless a mutation changed its credentials
 * (an `Authorization` header of its own), its path (a new segment may name something of its
 * own, or nothing: a session id nobody holds is its to create) or asked `OPTIONS`, which the
 * router answers with the methods a path allows, the same for every organization.
 */
function crossTenant(
  template: EndpointTemplate,
  method: string,
  labels: readonly string[],
  extraHeaders: ReadonlyArray<[string, string | Uint8Array]>,
): boolean {
  return template.credential === 'tenant' && method !== 'OPTIONS' && !credentialsOrPathChanged(labels, extraHeaders);
}

/**
 * An inference call with the fuzz organization's key that names another organization in
 * `x-tollway-organization` (a `borrowed` template, or a header mutation of an `org` one): only a
 * service key may act for another, so any 2xx is a finding.
 */
function borrowsOrganization(
  template: EndpointTemplate,
  method: string,
  labels: readonly string[],
  extraHeaders: ReadonlyArray<[string, string | Uint8Array]>,
): boolean {
  const named =
    template.credential === 'borrowed' ||
    (template.credential === 'org' && labels.some((label) => label.includes(ANOTHER_ORGANIZATION_NAMED)));
  return (
    template.service === 'gateway' && named && method !== 'OPTIONS' && !credentialsOrPathChanged(labels, extraHeaders)
  );
}

function build(template: EndpointTemplate, newSessionId: string, pick: number, mutations: Mutation[]): FuzzCase {
  let body = template.body === null ? null : clone(template.body);
  let rawBody: Uint8Array | null = null;
  const segments = template.segments.map((s) => (s === '{newSessionId}' ? newSessionId : s));
  let query = template.query;
  let method = template.method;
  const extraHeaders: Array<[string, string | Uint8Array]> = [];
  let frame: Framing = body === null ? { kind: 'none' } : { kind: 'length' };
  const headShape: HeadShape = { version: 'HTTP/1.1', lineEnd: '\r\n', host: 'normal' };
  const labels: string[] = [];
  let wholeInvalid = false;

  for (const m of mutations) {
    if (m.kind === 'param') {
      if (body === null) body = {};
      const candidates = workParameters(body);
      const path = candidates[m.at % Math.max(1, candidates.length)] ?? [];
      body = setAt(body, path, clone(m.value.node));
      labels.push(`${pathLabel(path)} = ${m.value.label}`);
      if (frame.kind === 'none') frame = { kind: 'length' };
    } else if (m.kind === 'body-replace' || m.kind === 'body-delete' || m.kind === 'body-add') {
      if (body === null) body = {};
      const paths = pathsOf(body);
      const path = paths[m.at % paths.length] as Path;
      if (m.kind === 'body-replace') {
        body = setAt(body, path, clone(m.value.node));
        labels.push(`${pathLabel(path)} = ${m.value.label}`);
      } else if (m.kind === 'body-delete') {
        body = setAt(body, path, undefined);
        labels.push(`${pathLabel(path)} removed`);
      } else {
        const containers = paths.filter((p) => {
          const node = p.reduce<JsonNode>(
            (n, k) => (n as Record<string, JsonNode>)[k as string] as JsonNode,
            body as JsonNode,
          );
          return isPlainObject(node);
        });
        const target = containers[m.at % Math.max(1, containers.length)] ?? [];
        body = setAt(body, [...target, m.key], clone(m.value.node));
        labels.push(`${pathLabel([...target, m.key])} added = ${m.value.label}`);
      }
      if (frame.kind === 'none') frame = { kind: 'length' };
    } else if (m.kind === 'body-whole') {
      // Only the last whole body is sent; a JSON one is judged like any body (holdsInvalidJson).
      if (m.body instanceof Uint8Array) {
        rawBody = m.body;
        wholeInvalid = m.invalid;
      } else {
        body = clone(m.body);
        rawBody = null;
        wholeInvalid = false;
      }
      if (frame.kind === 'none') frame = { kind: 'length' };
      labels.push(`body = ${m.label}`);
    } else if (m.kind === 'segment') {
      const at = m.at % segments.length;
      labels.push(
        `path segment ${at} = ${JSON.stringify(m.segment.slice(0, 40))}${m.segment.length > 40 ? `…(${m.segment.length})` : ''}`,
      );
      segments[at] = m.segment;
    } else if (m.kind === 'query') {
      query = m.query;
      labels.push(`query = ${JSON.stringify(m.query.slice(0, 60))}`);
    } else if (m.kind === 'method') {
      method = m.method;
      labels.push(`method ${JSON.stringify(m.method)}`);
    } else if (m.kind === 'header') {
      extraHeaders.push([m.name, m.value]);
      labels.push(`header ${m.label}`);
    } else if (m.kind === 'framing') {
      if (body === null && rawBody === null) body = {};
      frame = m.framing;
      labels.push(m.label);
    } else {
      Object.assign(headShape, m.head);
      labels.push(m.label);
    }
  }

  const headers: Array<[string, string | Uint8Array]> = [];
  if (template.credential === 'org') headers.push(['Authorization', 'Bearer {orgKey}']);
  if (template.credential === 'borrowed')
    headers.push(['Authorization', 'Bearer {orgKey}'], ['X-Tollway-Organization', '{victimOrgId}']);
  if (template.credential === 'admin') headers.push(['Authorization', 'Bearer {adminToken}']);
  // The other organization's admin key on the gateway; on the session service, which refuses
  // admin keys outright, its standard key (so a refusal there is about the session's owner).
  if (template.credential === 'tenant')
    headers.push([
      'Authorization',
      template.service === 'sessions' ? 'Bearer {tenantSessionsKey}' : 'Bearer {tenantKey}',
    ]);
  if (template.credential === 'console')
    headers.push(['Cookie', 'tollway_console={consoleCookie}'], ['X-CSRF-Token', '{csrfToken}']);
  if (body !== null || rawBody !== null) headers.push(['Content-Type', 'application/json']);
  headers.push(...(template.headers ?? []), ['Connection', 'close'], ...extraHeaders);
  const target = method === 'CONNECT' ? '127.0.0.1:443' : `/${segments.join('/')}${query !== null ? `?${query}` : ''}`;
  const intact =
    method === template.method &&
    template.body !== null &&
    (frame.kind === 'length' ||
      frame.kind === 'pipelined' ||
      (frame.kind === 'chunked' && frame.stopAfter === null && frame.badSize === null));
  const finalBody = rawBody ?? body;
  const mustRefuse =
    (intact &&
      finalBody !== null &&
      (wholeInvalid ||
        (rawBody === null && body !== null && (holdsInvalidJson(body) || badWebhookToken(body))) ||
        breaksContract(template.service, method, segments, finalBody))) ||
    forgedConsoleWrite(template, method, labels, extraHeaders) ||
    crossTenant(template, method, labels, extraHeaders) ||
    borrowsOrganization(template, method, labels, extraHeaders);
  return printable({
    service: template.service,
    endpoint: template.name,
    mutations: labels,
    method,
    target,
    headers,
    body: finalBody,
    framing: frame,
    head: headShape,
    pick,
    mustRefuse,
  });
}

/** Cases for one service: a valid request of one of its endpoints, then up to three mutations (none in about 1 of 8). */
export function caseArbitrary(service: ServiceName): fc.Arbitrary<FuzzCase> {
  const templates = service === 'gateway' ? gatewayEndpoints() : sessionEndpoints();
  return fc
    .record({
      template: fc.constantFrom(...templates),
      newSessionId: fc.uuid(),
      pick: fc.nat(),
      mutations: fc.oneof(
        { weight: 1, arbitrary: fc.constant<Mutation[]>([]) },
        { weight: 7, arbitrary: fc.array(mutation, { minLength: 1, maxLength: 3 }) },
      ),
    })
    .map(({ template, newSessionId, pick, mutations }) => build(template, newSessionId, pick, mutations));
}
