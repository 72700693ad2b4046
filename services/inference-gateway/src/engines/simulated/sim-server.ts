import { once } from 'node:events';
import { setImmediate } from 'node:timers/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { CreateChatCompletionRequest } from '@tollway/contracts';
import { drainedOrClosed, formatIssuePath } from '@tollway/service-kit';
import type { SimulationOptions } from '../../catalog/catalog.schema';
import { EngineAbortedError } from '../engine.types';
import { renderSimError, SimParameterError, Simulator } from './simulator';
import { renderVllmMetrics } from './vllm-metrics';

/** Largest body the sim server reads. */
const MAX_BODY_BYTES = 16 * 1024 * 1024;

/** What the sim server has seen, for tests and benchmarks (`GET /sim/stats`). */
export interface SimStats {
  requests: number;
  completed: number;
  /** Generations stopped because the client went away. */
  aborted: number;
  /** Bytes of SSE written so far, over all streams (shows whether a reader holds the engine back). */
  streamedBytes: number;
  /**
   * Chat requests in the server (read, running, waiting or streaming out) integrated over time,
   * request-milliseconds: over an interval, its growth divided by the interval is the mean load.
   */
  loadMs: number;
}

/** How the sim server writes a stream. */
export interface SimServerOptions {
  /**
   * Every event as a write (an HTTP chunk) of its own, each in a turn of the event loop of its
   * own, as vLLM, SGLang and llama.cpp's server send one per generated token (a scheduler step
   * each); by default the events generated together leave in one write.
   */
  flushEachEvent?: boolean;
}

/**
 * The simulated engine as a standalone OpenAI-compatible HTTP server, shaped like vLLM's:
 * `POST /v1/chat/completions` (JSON or SSE, `stream_options.include_usage` and
 * `continuous_usage_stats`), `GET /v1/models`, `GET /health`, `GET /metrics` under vLLM's names (in
 * prefix-caching mode; 404 otherwise), plus `GET /sim/stats` and `POST /sim/reset` (prefix-caching
 * mode, idle: a cold cache and zeroed counters, for benchmarks). A client that
 * disconnects stops its generation at once. Plain `node:http`, so it can stand in for a fast engine.
 */
export class SimServer {
  readonly server: Server;
  readonly stats: SimStats = { requests: 0, completed: 0, aborted: 0, streamedBytes: 0, loadMs: 0 };
  /** Chat requests in the server now, and when that last changed (for `stats.loadMs`). */
  private inFlight = 0;
  private inFlightSince = performance.now();
  private readonly simulator: Simulator;

  constructor(
    readonly options: SimulationOptions,
    private readonly modelName = 'simulated',
    private readonly serverOptions: SimServerOptions = {},
  ) {
    this.simulator = new Simulator(options);
    this.server = createServer((req, res) => {
      this.handle(req, res).catch(() => {
        if (!res.headersSent)
          this.sendJson(res, 500, {
            object: 'error',
            message: 'internal error',
            type: 'InternalServerError',
            param: null,
            code: 500,
          });
        else res.destroy();
      });
    });
    this.server.keepAliveTimeout = 65_000;
  }

  /** Generations running and queued right now. */
  load(): { running: number; waiting: number } {
    return this.simulator.load();
  }

  /** Listens; resolves with the bound port. */
  async listen(port: number, host = '127.0.0.1'): Promise<number> {
    this.server.listen(port, host);
    await once(this.server, 'listening');
    const address = this.server.address();
    return typeof address === 'object' && address ? address.port : port;
  }

  /** Stops listening and drops idle connections. */
  close(): Promise<void> {
    this.simulator.stop();
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    if (req.method === 'POST' && url === '/v1/chat/completions') return this.chat(req, res);
    if (req.method === 'GET' && url === '/v1/models') {
      return this.sendJson(res, 200, {
        object: 'list',
        data: [{ id: this.modelName, object: 'model', created: 0, owned_by: 'tollway-sim' }],
      });
    }
    if (req.method === 'GET' && url === '/health') return this.sendJson(res, 200, { status: 'ok' });
    const batchStats = req.method === 'GET' && url === '/metrics' ? this.simulator.batchStats() : null;
    if (batchStats) {
      const body = renderVllmMetrics(batchStats, this.modelName);
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4', 'content-length': Buffer.byteLength(body) });
      res.end(body);
      return;
    }
    if (req.method === 'POST' && url === '/sim/reset') {
      req.resume();
      // Between benchmark runs: a cold cache without restarting the process.
      if (!this.simulator.resetCache()) return this.sendJson(res, 409, { reset: false });
      this.countLoad(0);
      Object.assign(this.stats, { requests: 0, completed: 0, aborted: 0, streamedBytes: 0, loadMs: 0 });
      return this.sendJson(res, 200, { reset: true });
    }
    if (req.method === 'GET' && url === '/sim/stats') {
      this.countLoad(0);
      return this.sendJson(res, 200, { ...this.stats, ...this.simulator.load() });
    }
    req.resume();
    this.sendJson(res, 404, { object: 'error', message: 'Not Found', type: 'NotFoundError', param: null, code: 404 });
  }

  /** Adds the load since the last change to `stats.loadMs`, then changes the count by `change`. */
  private countLoad(change: number): void {
    const now = performance.now();
    this.stats.loadMs += this.inFlight * (now - this.inFlightSince);
    this.inFlightSince = now;
    this.inFlight += change;
  }

  private async chat(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.stats.requests++;
    this.countLoad(1);
    res.once('close', () => this.countLoad(-1));
    const body = await readBody(req);
    if (body === null) return this.refuse(res, new SimParameterError('The request body is too large.', null));
    let json: unknown;
    try {
      json = JSON.parse(body);
    } catch {
      return this.refuse(res, new SimParameterError('The request body is not valid JSON.', null));
    }
    const parsed = CreateChatCompletionRequest.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const param = issue ? formatIssuePath(issue.path) : null;
      return this.refuse(res, new SimParameterError(`${param ?? 'body'}: ${issue?.message ?? 'invalid'}`, param));
    }
    const request = parsed.data;
    const streamOptions = request.stream_options as
      { include_usage?: boolean | null; continuous_usage_stats?: unknown } | null | undefined;
    if (streamOptions && !request.stream) {
      return this.refuse(
        res,
        new SimParameterError('Stream options can only be defined when `stream=True`.', 'stream_options'),
      );
    }
    const controller = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) controller.abort();
    });
    try {
      if (!request.stream) {
        const completion = await this.simulator.complete(request, controller.signal);
        this.sendJson(res, 200, completion);
      } else {
        const options = {
          includeUsage: streamOptions?.include_usage === true,
          continuousUsage: streamOptions?.continuous_usage_stats === true,
        };
        const batches = this.simulator.stream(request, controller.signal, options);
        // The first step checks the request (its context length among others): a refusal is still a
        // 400, as vLLM refuses before it streams, not a 200 cut off.
        try {
          let next = await batches.next();
          res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
          while (!next.done) {
            await this.writeEvents(res, next.value, controller.signal);
            if (controller.signal.aborted) throw new EngineAbortedError(null);
            next = await batches.next();
          }
        } finally {
          // Frees the generation slot of a stream left early (what for-await's exit did).
          await batches.return(undefined);
        }
        res.end('data: [DONE]\n\n');
      }
      this.stats.completed++;
    } catch (err) {
      if (err instanceof EngineAbortedError) {
        this.stats.aborted++;
        return;
      }
      if (err instanceof SimParameterError) return this.refuse(res, err);
      throw err;
    }
  }

  /**
   * Writes a batch of chunks as SSE events, waiting while the socket buffer is full. With
   * flushEachEvent, each event is a write of its own in a turn of the event loop of its own, as an
   * engine produces a token per scheduler step.
   */
  private async writeEvents(res: ServerResponse, batch: readonly unknown[], signal: AbortSignal): Promise<void> {
    if (!this.serverOptions.flushEachEvent) {
      const text = batch.map(sseEvent).join('');
      this.stats.streamedBytes += text.length;
      if (!res.write(text)) await drainedOrClosed(res);
      return;
    }
    for (let i = 0; i < batch.length && !signal.aborted; i++) {
      if (i > 0) await setImmediate();
      const event = sseEvent(batch[i]);
      this.stats.streamedBytes += event.length;
      if (!res.write(event)) await drainedOrClosed(res);
    }
  }

  private refuse(res: ServerResponse, err: SimParameterError): void {
    const { contentType, body } = renderSimError(err, this.options.error_style);
    res.writeHead(400, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
    res.end(body);
  }

  private sendJson(res: ServerResponse, status: number, value: unknown): void {
    const body = JSON.stringify(value);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  }
}

/** One chunk as an SSE event. */
function sseEvent(chunk: unknown): string {
  return `data: ${JSON.stringify(chunk)}\n\n`;
}

/** Reads a request body as text; null when it exceeds the limit. */
async function readBody(req: IncomingMessage): Promise<string | null> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const part of req) {
    size += (part as Buffer).length;
    if (size > MAX_BODY_BYTES) return null;
    parts.push(part as Buffer);
  }
  return parts.length === 1 ? (parts[0] as Buffer).toString('utf8') : Buffer.concat(parts).toString('utf8');
}
