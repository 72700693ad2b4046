import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { z } from 'zod';
import { durationMs, type ConfigSource } from './config';
import type { Logger } from './logger';

/**
 * Connection limits of a service's HTTP server, shared by both services' config schemas:
 * spread `HTTP_LIMIT_FIELDS` into the schema and `HTTP_LIMIT_SOURCES` into its sources.
 */
export const HTTP_LIMIT_FIELDS = {
  /** Largest request head (request line + headers), bytes; default 16 384. Larger gets 431. */
  maxHeaderBytes: z.coerce.number().int().min(1024).max(1_048_576).default(16_384),
  /** Most request headers read; more are dropped; default 100. */
  maxHeadersCount: z.coerce.number().int().min(8).default(100),
  /** Time a client has to send the whole request head, ms; default 20 000. Slower gets 408 and a close. */
  headersTimeoutMs: durationMs(100).default(20_000),
  /** Time a client has to send the whole request (head and body), ms; default 60 000; 0 = no limit. */
  requestTimeoutMs: durationMs(0).default(60_000),
  /** Idle keep-alive connections are closed after this, ms; default 65 000 (longer than the usual 60 s of load balancers). */
  keepAliveTimeoutMs: durationMs(0).default(65_000),
  /** Most open client connections per process; more are closed at once; default 10 000. */
  maxConnections: z.coerce.number().int().min(1).default(10_000),
};

/** Where the connection limits are read from (the same variables in both services). */
export const HTTP_LIMIT_SOURCES = {
  maxHeaderBytes: { env: 'HTTP_MAX_HEADER_BYTES' },
  maxHeadersCount: { env: 'HTTP_MAX_HEADERS_COUNT' },
  headersTimeoutMs: { env: 'HTTP_HEADERS_TIMEOUT_MS' },
  requestTimeoutMs: { env: 'HTTP_REQUEST_TIMEOUT_MS' },
  keepAliveTimeoutMs: { env: 'HTTP_KEEP_ALIVE_TIMEOUT_MS' },
  maxConnections: { env: 'HTTP_MAX_CONNECTIONS' },
} satisfies Record<keyof typeof HTTP_LIMIT_FIELDS, ConfigSource>;

/** Parsed connection limits. */
export type HttpLimits = { [K in keyof typeof HTTP_LIMIT_FIELDS]: z.infer<(typeof HTTP_LIMIT_FIELDS)[K]> };

/** The defaults, for apps built without a config (tests). */
export const DEFAULT_HTTP_LIMITS: Readonly<HttpLimits> = Object.freeze(z.object(HTTP_LIMIT_FIELDS).parse({}));

/** Options of createHttpServer besides the limits. */
export interface HttpServerOptions {
  /** Logs client errors at debug level. */
  logger?: Logger;
}

/**
 * How often Node checks the header and request timeouts, ms. Node's default (30 s) would let a
 * slow client hold a connection up to 30 s past its timeout.
 */
const TIMEOUT_CHECK_INTERVAL_MS = 1000;

/**
 * Requests one connection may have waiting for their answers: a client that pipelines more is
 * cut off. Node serves every request of a read before it looks at whether the client reads its
 * answers, so one read of 2,000 pipelined `GET /metrics` (68 KB) made 2,000 answers of 100 KB
 * each, held in memory for a client that never read them (700 MiB, seconds of stalled event
 * loop). Browsers and HTTP clients do not pipeline; those that do keep far fewer in flight.
 */
export const MAX_PIPELINED_REQUESTS = 16;

/** Requests of a connection not answered yet (see MAX_PIPELINED_REQUESTS). */
const PENDING = Symbol('pending requests');

interface CountedSocket extends Duplex {
  [PENDING]?: number;
}

/**
 * The handler, for requests of connections within MAX_PIPELINED_REQUESTS; a connection past it
 * is destroyed, and the requests Node still parses from the bytes it had read are not served.
 */
function boundedPipelining(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const socket = req.socket as CountedSocket;
    if (socket.destroyed) return;
    const pending = (socket[PENDING] ?? 0) + 1;
    if (pending > MAX_PIPELINED_REQUESTS) {
      socket.destroy();
      return;
    }
    socket[PENDING] = pending;
    res.once('close', answered);
    handler(req, res);
  };
}

function answered(this: ServerResponse): void {
  const socket = this.req.socket as CountedSocket;
  socket[PENDING] = (socket[PENDING] ?? 1) - 1;
}

/**
 * An HTTP server with the limits applied and an answer for what Node would otherwise drop
 * silently or answer without a body: a request it cannot parse (400), a head too large (431),
 * a head or body too slow (408), CONNECT and Upgrade requests (405/400), an `Expect` other than
 * 100-continue (417), a request without Host (served). Each answer is the
 * services' error envelope, then the connection closes. A connection with more than
 * MAX_PIPELINED_REQUESTS requests waiting for their answers is closed.
 */
export function createHttpServer(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  limits: HttpLimits,
  options: HttpServerOptions = {},
): Server {
  const server = createServer(
    {
      maxHeaderSize: limits.maxHeaderBytes,
      // Node refuses a head timeout longer than the whole-request timeout: the shorter one applies.
      headersTimeout:
        limits.requestTimeoutMs > 0
          ? Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs)
          : limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS,
      // Node would answer a request without Host with a bare 400 of its own; the handler serves it
      // (nothing here routes by host).
      requireHostHeader: false,
    },
    boundedPipelining(handler),
  );
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  server.maxHeadersCount = limits.maxHeadersCount;
  server.maxConnections = limits.maxConnections;
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    const [status, code, message] = clientErrorAnswer(err);
    if (status !== 408) options.logger?.debug('client error', { code: err.code, status });
    closeWith(socket, status, code, message);
  });
  server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    closeWith(socket, 405, 'method_not_allowed', 'CONNECT is not supported by this server.', {
      Allow: 'GET, POST, PUT, DELETE',
    });
  });
  // Without a listener Node writes a bare 417 for any Expect other than 100-continue.
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    const body = errorBody('expectation_failed', 'Only "Expect: 100-continue" is supported.');
    res.writeHead(417, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      connection: 'close',
    });
    res.end(body);
  });
  server.on('upgrade', (_req: IncomingMessage, socket: Duplex) => {
    closeWith(socket, 400, 'upgrade_not_supported', 'Connection upgrades are not supported by this server.');
  });
  return server;
}

function clientErrorAnswer(err: NodeJS.ErrnoException): [number, string, string] {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return [431, 'request_header_too_large', 'The request headers are larger than the server accepts.'];
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return [408, 'request_timeout', 'The request was not received in time.'];
    default:
      return [400, 'bad_request', 'The request is not valid HTTP.'];
  }
}

/** What node keeps on a server socket: the response it is writing (the first of those pending). */
interface ServerSocket extends Duplex {
  _httpMessage?: ServerResponse | null;
}

/** Sockets whose error answer is written or waiting: a parser that failed fails again on every later read. */
const answeredWithError = new WeakSet<Duplex>();

/**
 * Writes one error response straight to the socket (no response object exists here) and closes,
 * once every request that came whole before the bad bytes has its answer. HTTP/1.1 answers a
 * connection's requests in order, so an error written as soon as the parser fails would be read as
 * the answer to the request before it (pipelined, or still being served), which the server did
 * serve: a deletion or a billed completion answered 400.
 */
function closeWith(
  socket: Duplex,
  status: number,
  code: string,
  message: string,
  extra: Record<string, string> = {},
): void {
  if (answeredWithError.has(socket)) return;
  answeredWithError.add(socket);
  afterEarlierAnswers(socket as ServerSocket, () =>
    writeAndClose(socket as ServerSocket, status, code, message, extra),
  );
}

/**
 * Runs `then` once no request that arrived whole is still being answered on `socket`. Node
 * answers a connection's requests one at a time: `_httpMessage` is the one being written, the
 * others wait behind it, and each takes the socket when the one before finishes. Reading stops
 * meanwhile (the parser has failed; what follows is not read). An answer written at once, in the
 * request's own turn before the parser reached the bad bytes, is still the socket's until its
 * 'finish' has run, even with all its bytes out: it is waited for too (its 'close' follows).
 */
function afterEarlierAnswers(socket: ServerSocket, then: () => void): void {
  const answering = socket._httpMessage;
  if (socket.destroyed || !answering || answering.destroyed || !answering.req?.complete) {
    then();
    return;
  }
  socket.pause();
  // 'close' comes after node has handed the socket to the next answer, or ended it.
  answering.once('close', () => afterEarlierAnswers(socket, then));
}

function writeAndClose(
  socket: ServerSocket,
  status: number,
  code: string,
  message: string,
  extra: Record<string, string>,
): void {
  if (socket.destroyed || !socket.writable) return;
  // A socket that already sent part of a response cannot take another status line.
  if (socket._httpMessage?.headersSent) {
    socket.destroy();
    return;
  }
  const body = errorBody(code, message);
  const head = [
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? 'Error'}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
    ...Object.entries(extra).map(([name, value]) => `${name}: ${value}`),
  ];
  socket.on('error', () => undefined);
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`, () => socket.destroy());
}

function errorBody(code: string, message: string): string {
  return JSON.stringify({ error: { message, type: 'invalid_request_error', param: null, code } });
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  405: 'Method Not Allowed',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
};

/** Listens on `port` and `host` (`backlog`: pending connections the kernel may queue); resolves once bound. */
export function listenServer(server: Server, port: number, host: string, backlog?: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host, ...(backlog ? { backlog } : {}) }, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}
