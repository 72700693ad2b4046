import type { ChatCompletionChunk } from '@tollway/contracts';
import type { SimulatedEngineSpec } from '../../catalog/catalog.schema';
import { EngineHttpError } from '../engine-error';
import type { ChunkStream, CompletionResult, Engine, EngineCall } from '../engine.types';
import { renderSimError, SimParameterError, Simulator } from './simulator';

/**
 * The in-process simulated engine: the same generator as the standalone sim server, without
 * the HTTP hop. Its refusals take the same path as an HTTP engine's (EngineHttpError), so the
 * gateway cannot tell them apart.
 */
export class SimulatedEngine implements Engine {
  private readonly simulator: Simulator;

  constructor(spec: SimulatedEngineSpec) {
    const { kind: _kind, ...options } = spec;
    this.simulator = new Simulator(options);
  }

  async complete(call: EngineCall): Promise<CompletionResult> {
    try {
      return {
        completion: await this.simulator.complete(call.request, call.signal, call.promptTokens),
      };
    } catch (err) {
      throw this.refusal(err);
    }
  }

  async stream(call: EngineCall): Promise<ChunkStream> {
    // Like an HTTP engine asked for usage: final usage chunk and usage on every chunk.
    const options = { includeUsage: true, continuousUsage: true };
    const generator = this.simulator.stream(call.request, call.signal, options, call.promptTokens);
    let first: IteratorResult<ChatCompletionChunk[]>;
    try {
      first = await generator.next();
    } catch (err) {
      throw this.refusal(err);
    }
    if (first.done) throw new Error('The simulated engine produced an empty stream.');
    return { first: first.value, rest: { [Symbol.asyncIterator]: () => generator } };
  }

  async probe(): Promise<boolean> {
    return true;
  }

  async close(): Promise<void> {
    this.simulator.stop();
  }

  private refusal(err: unknown): unknown {
    if (!(err instanceof SimParameterError)) return err;
    const { contentType, body } = renderSimError(err, this.simulator.options.error_style);
    return new EngineHttpError(400, contentType, Buffer.from(body));
  }
}
