import type { ChatCompletionChunk, ChatCompletionResponse } from '@tollway/contracts';
import { jsonDepthExceeds, ServiceError } from '@tollway/service-kit';
import type { OpenAICompatibleEngineSpec } from '../../catalog/catalog.schema';
import { badEngineResponse, engineResponseTooLarge, engineUnavailable, upstreamTimeout } from '../../errors';
import { normaliseFinishReasons } from '../../streaming/finish-reason';
import { renameChoicesReasoning } from '../../streaming/reasoning-field';
import { isPassthroughChunk } from '../../streaming/passthrough';
import { SseParser } from '../../streaming/sse-parser';
import { EngineHttpError, engineRefusal, flattenEngineError } from '../engine-error';
import {
  DEFAULT_ENGINE_RESPONSE_LIMITS,
  EngineAbortedError,
  EngineStreamError,
  ITERATION_DONE,
  RAW_JSON,
  type EngineResponseLimits,
  type ChunkStream,
  type ClientAbort,
  type EngineChunk,
  type StreamItem,
  type CompletionResult,
  type Engine,
  type EngineCall,
  type ReplicaStats,
  type RoutingStats,
} from '../engine.types';
import { exchange, type EngineBody, type EngineResponse } from './engine-exchange';
import { ReplicaSet, type PoolOptions, type Replica } from './replica-set';
import { toEngineBody } from './to-engine';

/** Deepest nesting of arrays and objects in a JSON answer; deeper is 502 `bad_engine_response`. */
const MAX_ANSWER_DEPTH = 64;

/** Errors raised before any response byte, on which a request is safe to send elsewhere. */
const CONNECT_ERRORS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
]);

/**
 * An OpenAI-compatible HTTP engine (vLLM, SGLang, llama.cpp server, Ollama, OpenAI): keep-alive
 * pools per replica, a replica chosen by the model's routing policy, one retry elsewhere on a connect error or a 5xx
 * before the first byte, abort on client disconnect, streams read with backpressure.
 */
export class OpenAICompatibleEngine implements Engine {
  private readonly replicas: ReplicaSet;
  private readonly continuousUsage: boolean;
  /** `"model":"<catalog id>"` as compact JSON writes it. */
  private readonly modelField: string;
  private readonly limits: EngineResponseLimits;

  constructor(
    private readonly modelId: string,
    spec: OpenAICompatibleEngineSpec,
    private readonly options: PoolOptions,
  ) {
    this.replicas = new ReplicaSet(spec.replicas, modelId, options, spec.routing);
    this.continuousUsage = spec.continuous_usage_stats;
    this.modelField = `"model":${JSON.stringify(modelId)}`;
    this.limits = options.limits ?? DEFAULT_ENGINE_RESPONSE_LIMITS;
  }

  async complete(call: EngineCall): Promise<CompletionResult> {
    const { replica, response } = await this.send(call);
    try {
      const raw = await this.readBounded(response.body);
      // JSON.parse takes any depth, but the JSON.stringify that renames the model overflows the
      // stack on deep nesting (a 500); an OpenAI answer nests under ten levels.
      if (jsonDepthExceeds(raw, MAX_ANSWER_DEPTH)) throw badEngineResponse(this.modelId);
      let completion: ChatCompletionResponse;
      try {
        completion = JSON.parse(raw.toString('utf8')) as ChatCompletionResponse;
      } catch (err) {
        throw badEngineResponse(this.modelId, err);
      }
      if (typeof completion !== 'object' || completion === null || !Array.isArray(completion.choices)) {
        throw badEngineResponse(this.modelId);
      }
      const reasonsChanged = normaliseFinishReasons(completion.choices);
      const reasoningRenamed = renameChoicesReasoning(completion.choices);
      if (completion.model === this.modelId && !reasonsChanged && !reasoningRenamed) return { completion, raw };
      completion.model = this.modelId;
      return { completion };
    } catch (err) {
      throw this.duringBody(err, call.signal);
    } finally {
      replica.outstanding--;
    }
  }

  async stream(call: EngineCall): Promise<ChunkStream> {
    const { replica, response } = await this.send(call);
    const chunks = this.readChunks(response.body, replica, call.signal);
    let first: IteratorResult<StreamItem[]>;
    try {
      first = await chunks.next();
    } catch (err) {
      // An error event before any chunk is a refusal: give it its status, like a non-200 answer.
      if (err instanceof EngineStreamError && err.engineError) {
        const flat = flattenEngineError(err.engineError, 500);
        const status = flat.code >= 400 && flat.code <= 599 ? flat.code : 500;
        const body = Buffer.from(JSON.stringify({ ...flat, code: status }));
        throw engineRefusal(this.modelId, status, 'application/json', body, null);
      }
      // Nothing was sent to the client yet, so a broken start still gets a status of its own.
      if (err instanceof EngineStreamError) {
        if (errorCode(err.cause) === 'UND_ERR_BODY_TIMEOUT')
          throw upstreamTimeout(this.modelId, this.options.timeoutMs, err);
        throw badEngineResponse(this.modelId, err);
      }
      throw err;
    }
    if (first.done) throw badEngineResponse(this.modelId);
    return { first: first.value, rest: { [Symbol.asyncIterator]: () => chunks } };
  }

  async probe(): Promise<boolean> {
    return (await this.probeReplicas()).includes(true);
  }

  probeReplicas(): Promise<boolean[]> {
    return Promise.all(
      this.replicas.replicas.map(async (replica) => {
        try {
          const response = await replica.pool.request({
            method: 'GET',
            path: replica.modelsPath,
            headers: replica.headers,
            headersTimeout: 2000,
            bodyTimeout: 2000,
            signal: AbortSignal.timeout(2500),
          });
          await response.body.dump();
          replica.healthy = response.statusCode < 500;
        } catch {
          replica.healthy = false;
        }
        return replica.healthy;
      }),
    );
  }

  replicaStats(): ReplicaStats[] {
    return this.replicas.replicas.map((replica, i) => {
      const loadSource = this.replicas.loadSourceOf(i);
      return {
        origin: replica.origin,
        outstanding: replica.outstanding,
        errors: replica.errors,
        retries: replica.retries,
        healthy: replica.healthy,
        load: this.replicas.loadOf(i),
        loadSource,
        kvCacheUsage: loadSource === 'engine_metrics' ? (replica.scraped?.kvCacheUsage ?? null) : null,
      };
    });
  }

  routingStats(): RoutingStats {
    return this.replicas.routingStats();
  }

  close(): Promise<void> {
    return this.replicas.close();
  }

  /**
   * Sends to the best replica; on a connect error or a 5xx, once more to another (the same when it
   * is the only one); on a 429 (that replica is overloaded), once more to another when there is
   * one. Resolves on a 200.
   */
  private async send(call: EngineCall): Promise<{ replica: Replica; response: EngineResponse }> {
    let replica = this.replicas.pick(call.request);
    for (let attempt = 1; ; attempt++) {
      replica.outstanding++;
      let response: EngineResponse;
      try {
        response = await exchange(
          replica.pool,
          {
            method: 'POST',
            path: replica.chatPath,
            headers: call.traceparent ? { ...replica.headers, traceparent: call.traceparent } : replica.headers,
            body: toEngineBody(call.request, {
              upstreamModel: replica.upstreamModel,
              continuousUsage: this.continuousUsage,
            }),
          },
          call.signal,
        );
      } catch (err) {
        replica.outstanding--;
        if (call.signal.aborted) throw new EngineAbortedError(null);
        replica.errors++;
        if (attempt === 1 && isConnectError(err)) {
          replica.retries++;
          replica = this.replicas.pick(call.request, replica);
          continue;
        }
        if (errorCode(err) === 'UND_ERR_HEADERS_TIMEOUT')
          throw upstreamTimeout(this.modelId, this.options.timeoutMs, err);
        throw engineUnavailable(this.modelId, err);
      }
      if (response.statusCode === 200) return { replica, response };
      try {
        if (response.statusCode >= 500) replica.errors++;
        const overloaded = response.statusCode === 429 && this.replicas.replicas.length > 1;
        if ((response.statusCode >= 500 || overloaded) && attempt === 1) {
          await response.body.dump();
          replica.retries++;
          replica = this.replicas.pick(call.request, replica);
          continue;
        }
        const body = await this.readBounded(response.body);
        throw engineRefusal(this.modelId, response.statusCode, response.contentType(), body, response.retryAfterMs());
      } catch (err) {
        throw this.duringBody(err, call.signal);
      } finally {
        replica.outstanding--;
      }
    }
  }

  /**
   * Parses the engine's SSE into chunk batches; throws EngineStreamError when the stream breaks.
   * A plain iterator, not an async generator: an engine that writes every event on its own makes
   * each event a step, and a generator's step (its request queue, the for-await inside it and the
   * yield) costs several promise turns where this costs one await. Ends (and gives the replica
   * back, dropping the connection unless `[DONE]` came) on its last step, its first error, or
   * `return()`.
   */
  private readChunks(body: EngineBody, replica: Replica, signal: ClientAbort): AsyncIterator<StreamItem[]> {
    const bytes = body[Symbol.asyncIterator]();
    const parser = new SseParser(this.limits.maxEventBytes);
    let done = false;
    let closed = false;
    let received = 0;
    /** An error met after chunks of the same read: thrown on the step after theirs. */
    let deferred: unknown = null;
    const close = () => {
      if (closed) return;
      closed = true;
      replica.outstanding--;
      if (!done) body.destroy();
    };
    const next = async (): Promise<IteratorResult<StreamItem[]>> => {
      if (closed) return ITERATION_DONE;
      try {
        if (deferred) throw deferred;
        for (;;) {
          const read = await bytes.next();
          if (read.done) {
            if (done) {
              close();
              return ITERATION_DONE;
            }
            deferred = new EngineStreamError('The engine ended the stream before [DONE].', null);
            const batch = parser
              .end()
              .filter((payload) => payload !== '[DONE]')
              .map((payload) => this.parseChunk(payload, replica));
            if (batch.length > 0) return { done: false, value: batch };
            throw deferred;
          }
          received += read.value.length;
          if (received > this.limits.maxStreamBytes) {
            throw new EngineStreamError(`The engine stream grew past ${this.limits.maxStreamBytes} bytes.`, null);
          }
          const batch: StreamItem[] = [];
          for (const payload of parser.push(read.value)) {
            if (done || deferred) continue;
            if (payload === '[DONE]') {
              done = true;
              continue;
            }
            const text = isPassthroughChunk(payload) ? this.withCatalogModel(payload, replica) : null;
            if (text !== null) {
              batch.push(text);
              continue;
            }
            try {
              batch.push(this.parseChunk(payload, replica));
            } catch (err) {
              deferred = err;
            }
          }
          // Chunks that came before a broken event in the same read still reach the client first.
          if (batch.length > 0) return { done: false, value: batch };
          if (deferred) throw deferred;
          // After [DONE] the reads go on to the end of the body (engines end it right away):
          // stopping early would destroy the body and with it the keep-alive connection.
        }
      } catch (err) {
        close();
        throw this.streamError(err, signal);
      }
    };
    return {
      next,
      return: () => {
        close();
        return Promise.resolve(ITERATION_DONE);
      },
    };
  }

  /** What a reader throws for `err`: its own stream errors as they are, an aborted or broken read as one. */
  private streamError(err: unknown, signal: ClientAbort): unknown {
    if (err instanceof EngineStreamError) return err;
    if (signal.aborted) return new EngineAbortedError(null);
    const message =
      errorCode(err) === 'UND_ERR_BODY_TIMEOUT'
        ? 'The engine stopped sending within the upstream timeout.'
        : 'The engine connection broke mid-stream.';
    return new EngineStreamError(message, null, { cause: err });
  }

  /**
   * A whole response body, refused with 502 `bad_engine_response` once it grows past
   * maxResponseBytes (the rest is not read: the connection is dropped, not drained).
   */
  private async readBounded(body: EngineBody): Promise<Buffer> {
    const parts: Buffer[] = [];
    let size = 0;
    for await (const part of body) {
      size += part.length;
      if (size > this.limits.maxResponseBytes) {
        body.destroy();
        throw engineResponseTooLarge(this.modelId, this.limits.maxResponseBytes);
      }
      parts.push(part);
    }
    return parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, size);
  }

  /** The chunk text naming the catalog id, or null when its model field is not found as expected. */
  private withCatalogModel(payload: string, replica: Replica): string | null {
    if (payload.includes(this.modelField)) return payload;
    if (payload.includes(replica.modelField)) return payload.replace(replica.modelField, () => this.modelField);
    return null;
  }

  private parseChunk(payload: string, replica: Replica): ChatCompletionChunk {
    let parsed: unknown;
    try {
      parsed = JSON.parse(payload);
    } catch (err) {
      throw new EngineStreamError('The engine sent an event that is not JSON.', null, { cause: err });
    }
    if (typeof parsed !== 'object' || parsed === null)
      throw new EngineStreamError('The engine sent an event that is not an object.', null);
    const record = parsed as Record<string, unknown>;
    if (record.error && typeof record.error === 'object') {
      throw new EngineStreamError('The engine reported an error mid-stream.', record.error as Record<string, unknown>);
    }
    if (record.object === 'error') throw new EngineStreamError('The engine reported an error mid-stream.', record);
    if (!Array.isArray(record.choices)) throw new EngineStreamError('The engine sent a chunk without choices.', null);
    const chunk = parsed as EngineChunk;
    if (chunk.model === this.modelId) {
      chunk[RAW_JSON] = payload;
    } else {
      // Compact JSON (vLLM, SGLang) has exactly one `"model":"<name>"`: swap the name in the text.
      if (chunk.model === replica.upstreamModel && payload.includes(replica.modelField)) {
        chunk[RAW_JSON] = payload.replace(replica.modelField, () => this.modelField);
      }
      chunk.model = this.modelId;
    }
    return chunk;
  }

  /** An error while reading a response body: the gateway's own errors as they are, a broken connection a 502. */
  private duringBody(err: unknown, signal: ClientAbort): unknown {
    if (signal.aborted) return new EngineAbortedError(null);
    if (errorCode(err) === 'UND_ERR_BODY_TIMEOUT') return upstreamTimeout(this.modelId, this.options.timeoutMs, err);
    if (err instanceof ServiceError || err instanceof EngineHttpError) return err;
    return badEngineResponse(this.modelId, err);
  }
}

function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

function isConnectError(err: unknown): boolean {
  const code = errorCode(err) ?? errorCode((err as { cause?: unknown } | null)?.cause);
  return code !== undefined && CONNECT_ERRORS.has(code);
}
