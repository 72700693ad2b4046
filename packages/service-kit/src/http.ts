import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Express } from 'express';
import { createHttpServer, type HttpLimits } from './http-server';
import type { Logger } from './logger';

/** Listens on `port` (0 picks a free one) and resolves once the socket is bound. */
export function listen(app: Express, port: number, host = '0.0.0.0'): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = app.listen(port, host, (err?: Error) => (err ? reject(err) : resolve(server)));
    server.once('error', reject);
  });
}

/**
 * Makes `app.listen` create its server with createHttpServer's limits and answers, serving
 * `handler` (default the app itself; the gateway puts its fast path in front).
 */
export function listenWithLimits(
  app: Express,
  limits: HttpLimits,
  logger?: Logger,
  handler: (req: IncomingMessage, res: ServerResponse) => void = app,
): void {
  app.listen = ((...args: unknown[]) => {
    const server = createHttpServer(handler, limits, { logger });
    return server.listen(...(args as Parameters<typeof server.listen>));
  }) as Express['listen'];
}

/** How often a closing server closes the keep-alive connections that have gone idle since, ms. */
const IDLE_SWEEP_MS = 50;

/**
 * Stops accepting connections and resolves once every connection is closed. Those idle now are
 * closed at once, and a keep-alive connection whose answer was in flight (a long-poll that
 * shutdown answers, a stream) within IDLE_SWEEP_MS of that answer being done, instead of being left
 * open until its client's keep-alive runs out, which held a shutdown for its whole grace.
 */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    const sweep = setInterval(() => server.closeIdleConnections(), IDLE_SWEEP_MS);
    server.close(() => {
      clearInterval(sweep);
      resolve();
    });
    server.closeIdleConnections();
  });
}

/** Resolves on the next `drain` or `close` of a writable, leaving no listener behind. */
export function drainedOrClosed(stream: NodeJS.EventEmitter): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      stream.off('drain', done);
      stream.off('close', done);
      resolve();
    };
    stream.once('drain', done);
    stream.once('close', done);
  });
}

/**
 * Calls `gone` once if the client of `res` leaves before its answer is finished, and returns a
 * function that stops listening. The response's own 'close' says so, except for an answer queued
 * behind another on a pipelining connection: node hands it the socket (and with it a 'close') only
 * once the answers before it are finished, and a client that leaves first never lets them finish.
 * So a queued answer also waits on the connection's close (`onConnectionClose`).
 */
export function onClientGone(res: ServerResponse, gone: () => void): () => void {
  let stopWaitingOnConnection: (() => void) | null = null;
  const stop = () => {
    res.off('close', onClose);
    stopWaitingOnConnection?.();
  };
  const onClose = () => {
    stop();
    if (!res.writableFinished) gone();
  };
  res.once('close', onClose);
  if (!res.socket) stopWaitingOnConnection = onConnectionClose(res.req.socket, onClose);
  return stop;
}

/** What each connection with queued answers runs when it closes: one listener, however many wait. */
const connectionWaiters = new WeakMap<Socket, Set<() => void>>();

/**
 * Runs `fn` when `socket` closes (at once if it already has), with one 'close' listener per
 * connection: a client can pipeline any number of requests, and a listener each would trip node's
 * leak warning for every such connection. Returns a function that cancels.
 */
function onConnectionClose(socket: Socket, fn: () => void): () => void {
  if (socket.destroyed) {
    queueMicrotask(fn);
    return () => undefined;
  }
  let waiting = connectionWaiters.get(socket);
  if (!waiting) {
    const set = new Set<() => void>();
    connectionWaiters.set(socket, set);
    socket.once('close', () => {
      connectionWaiters.delete(socket);
      for (const waiter of set) waiter();
      set.clear();
    });
    waiting = set;
  }
  const set = waiting;
  set.add(fn);
  return () => set.delete(fn);
}
