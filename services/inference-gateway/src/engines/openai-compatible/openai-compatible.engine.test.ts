import type { CreateChatCompletionRequest } from '@tollway/contracts';
import { Upstream } from '../../../test/helpers/upstream';
import { OpenAICompatibleEngineSpec } from '../../catalog/catalog.schema';
import { ClientAbort, EngineStreamError, RAW_JSON, type StreamItem } from '../engine.types';
import { OpenAICompatibleEngine } from './openai-compatible.engine';

const MODEL = 'test/model';
const REQUEST = {
  model: MODEL,
  messages: [{ role: 'user', content: 'hi' }],
  stream: true,
} as CreateChatCompletionRequest;

const chunk = (content: string) =>
  JSON.stringify({
    id: 'chatcmpl-1',
    object: 'chat.completion.chunk',
    created: 1,
    model: MODEL,
    choices: [{ index: 0, delta: { content }, logprobs: null, finish_reason: null }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  });
const frame = (payload: string) => `data: ${payload}\n\n`;
const SSE = { 'content-type': 'text/event-stream' };
const tick = () => new Promise((resolve) => setImmediate(resolve));

/** Each item's delta content. */
function contents(items: StreamItem[]): string[] {
  return items.map((item) => {
    const parsed = (
      typeof item === 'string' ? JSON.parse(item) : JSON.parse(item[RAW_JSON] ?? JSON.stringify(item))
    ) as {
      choices: { delta: { content: string } }[];
    };
    return parsed.choices[0]?.delta.content ?? '';
  });
}

// The reader between the engine's bytes and the relay, against a real HTTP server: what reaches
// the consumer, in which order, and what becomes of the replica and its keep-alive connection.
describe('OpenAI-compatible engine: reading a stream', () => {
  let upstream: Upstream;
  let engine: OpenAICompatibleEngine;

  beforeEach(async () => {
    upstream = new Upstream();
    const base = await upstream.start();
    engine = new OpenAICompatibleEngine(
      MODEL,
      OpenAICompatibleEngineSpec.parse({ kind: 'openai-compatible', replicas: [{ base_url: `${base}/v1` }] }),
      { connections: 1, timeoutMs: 5000 },
    );
  });

  afterEach(async () => {
    await engine.close();
    await upstream.close();
  });

  /**
   * Every item of one stream and the error that ended it, if any, read as the relay reads it: step
   * by step, with `return()` once it is over, however it ended.
   */
  async function readStream(): Promise<{ items: StreamItem[]; error: unknown }> {
    const stream = await engine.stream({ request: REQUEST, signal: new ClientAbort() });
    const items = [...stream.first];
    const rest = stream.rest[Symbol.asyncIterator]();
    try {
      for (let step = await rest.next(); !step.done; step = await rest.next()) items.push(...step.value);
    } catch (err) {
      return { items, error: err };
    } finally {
      await rest.return?.();
    }
    return { items, error: null };
  }

  const outstanding = () => engine.replicaStats()[0]?.outstanding;

  it('relays events written one at a time in order, and keeps the connection after [DONE]', async () => {
    upstream.answer = (_req, res) => {
      res.writeHead(200, SSE);
      const words = ['a', 'b', 'c', 'd'];
      const next = () => {
        const word = words.shift();
        if (word === undefined) return void res.end(frame('[DONE]'));
        res.write(frame(chunk(word)));
        setImmediate(next);
      };
      next();
    };
    for (let i = 0; i < 2; i++) {
      const { items, error } = await readStream();
      expect(error).toBeNull();
      expect(contents(items)).toEqual(['a', 'b', 'c', 'd']);
      expect(outstanding()).toBe(0);
    }
    expect(upstream.connections).toBe(1);
  });

  it('drops the byte order mark a body opens with, even split over HTTP chunks, and keeps a U+FEFF in content', async () => {
    const bom = Buffer.from('\uFEFF');
    upstream.answer = (_req, res) => {
      res.writeHead(200, SSE);
      res.write(bom.subarray(0, 1));
      setImmediate(() => {
        res.write(Buffer.concat([bom.subarray(1), Buffer.from(frame(chunk('a')))]));
        setImmediate(() => res.end(frame(chunk('\uFEFFb')) + frame('[DONE]')));
      });
    };
    const { items, error } = await readStream();
    expect(error).toBeNull();
    expect(contents(items)).toEqual(['a', '\uFEFFb']);
    expect(outstanding()).toBe(0);
  });

  it('chunks read before a broken event reach the consumer before its error', async () => {
    upstream.answer = (_req, res) => {
      res.writeHead(200, SSE);
      res.end(frame(chunk('a')) + frame(chunk('b')) + frame('not json') + frame(chunk('c')) + frame('[DONE]'));
    };
    const { items, error } = await readStream();
    expect(contents(items)).toEqual(['a', 'b']);
    expect(error).toBeInstanceOf(EngineStreamError);
    expect((error as Error).message).toMatch(/not JSON/);
    expect(outstanding()).toBe(0);
  });

  it('a body that ends without [DONE] gives its last chunk, then an error', async () => {
    upstream.answer = (_req, res) => {
      res.writeHead(200, SSE);
      res.write(frame(chunk('a')));
      setImmediate(() => res.end(`data: ${chunk('b')}`)); // no blank line after the last event, no [DONE]
    };
    const { items, error } = await readStream();
    expect(contents(items)).toEqual(['a', 'b']);
    expect(error).toBeInstanceOf(EngineStreamError);
    expect((error as Error).message).toMatch(/before \[DONE\]/);
    expect(outstanding()).toBe(0);
  });

  it('a consumer that leaves mid-stream gives the replica back and drops the connection', async () => {
    let closed = 0;
    upstream.answer = (_req, res) => {
      res.writeHead(200, SSE);
      res.write(frame(chunk('a'))); // and never ends
      res.on('close', () => closed++);
    };
    const stream = await engine.stream({ request: REQUEST, signal: new ClientAbort() });
    expect(contents(stream.first)).toEqual(['a']);
    expect(outstanding()).toBe(1);
    const rest = stream.rest[Symbol.asyncIterator]();
    await rest.return?.();
    expect(outstanding()).toBe(0);
    expect(await rest.next()).toEqual({ done: true, value: undefined });
    for (let i = 0; i < 50 && closed === 0; i++) await tick();
    expect(closed).toBe(1);
    expect(outstanding()).toBe(0); // given back once, not twice
  });
});
