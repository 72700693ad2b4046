import type { ChatCompletionChunk } from '@tollway/contracts';
import { ChunkNormaliser } from './chunk-normaliser';

const chunk = (choices: ChatCompletionChunk['choices'], usage?: ChatCompletionChunk['usage']): ChatCompletionChunk => ({
  id: 'c1',
  object: 'chat.completion.chunk',
  created: 1,
  model: 'engine-name',
  choices,
  ...(usage === undefined ? {} : { usage }),
});

describe('ChunkNormaliser', () => {
  it('splits a first chunk that carries role, content and finish into a role chunk and the rest', () => {
    const normaliser = new ChunkNormaliser('a/b', 10);
    const out: ChatCompletionChunk[] = [];
    normaliser.accept(
      chunk([{ index: 0, delta: { role: 'assistant', content: 'Hi' }, finish_reason: 'stop' }], {
        prompt_tokens: 9,
        completion_tokens: 1,
        total_tokens: 10,
      }),
      out,
    );
    normaliser.finish(out);
    expect(out).toHaveLength(3);
    expect(out[0]).toEqual({
      id: 'c1',
      object: 'chat.completion.chunk',
      created: 1,
      model: 'a/b',
      choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
    });
    expect(out[1]?.choices[0]?.delta).toEqual({ content: 'Hi' });
    expect('usage' in (out[1] as object)).toBe(false);
    expect(out[2]).toMatchObject({ choices: [], usage: { prompt_tokens: 9, completion_tokens: 1, total_tokens: 10 } });
  });

  it("relays and counts a trace named `reasoning` (vLLM's, Ollama's) as `reasoning_content`", () => {
    const normaliser = new ChunkNormaliser('a/b', 10);
    const out: ChatCompletionChunk[] = [];
    const traced = (text: string) => chunk([{ index: 0, delta: { reasoning: text } as never, finish_reason: null }]);
    normaliser.accept(
      chunk([{ index: 0, delta: { role: 'assistant', reasoning: '' } as never, finish_reason: null }]),
      out,
    );
    for (let i = 0; i < 16; i++) normaliser.accept(traced(`step ${i} `), out);
    expect(out[0]?.choices[0]?.delta).toEqual({ role: 'assistant', reasoning_content: '' });
    expect(out[1]?.choices[0]?.delta).toEqual({ reasoning_content: 'step 0 ' });
    expect(out[16]?.usage?.completion_tokens).toBe(16);
    for (const sent of out) expect(JSON.stringify(sent)).not.toContain('"reasoning"');
    // A client that leaves here is charged the trace it was sent.
    expect(normaliser.settledUsage().completion_tokens).toBeGreaterThanOrEqual(16);
  });

  it('drops what an engine sends for a choice after its finish: a second finish, text, a passed-through chunk', () => {
    const normaliser = new ChunkNormaliser('a/b', 10);
    const out: Array<ChatCompletionChunk | string> = [];
    const passthrough =
      '{"id":"c1","object":"chat.completion.chunk","created":1,"model":"a/b","choices":[{"index":1,"delta":{"content":"late"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}';
    normaliser.accept(
      chunk([
        { index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null },
        { index: 1, delta: { role: 'assistant', content: '' }, finish_reason: null },
      ]),
      out,
    );
    normaliser.accept(
      chunk([
        { index: 0, delta: { content: 'A' }, finish_reason: 'stop' },
        { index: 1, delta: { content: 'B' }, finish_reason: null },
      ]),
      out,
    );
    normaliser.accept(chunk([{ index: 0, delta: { content: 'again' }, finish_reason: 'length' }]), out);
    normaliser.accept(passthrough.replace('"index":1', '"index":0'), out);
    normaliser.accept(passthrough, out);
    normaliser.accept(
      chunk([
        { index: 1, delta: {}, finish_reason: 'stop' },
        { index: 1, delta: { content: 'same chunk' }, finish_reason: null },
      ]),
      out,
    );
    normaliser.accept(chunk([{ index: 1, delta: { content: 'after' }, finish_reason: 'stop' }]), out);
    normaliser.finish(out);
    const parsed = out.map((item) => (typeof item === 'string' ? (JSON.parse(item) as ChatCompletionChunk) : item));
    const sent = parsed.flatMap((c) =>
      c.choices.map((choice) => [choice.index, choice.delta?.content ?? '', choice.finish_reason]),
    );
    expect(sent).toEqual([
      [0, '', null],
      [1, '', null],
      [0, 'A', 'stop'],
      [1, 'B', null],
      [1, 'late', null],
      [1, '', 'stop'],
    ]);
  });

  it('holds engine usage chunks back and sends only the last at the end', () => {
    const normaliser = new ChunkNormaliser('a/b', 10);
    const out: ChatCompletionChunk[] = [];
    normaliser.accept(
      chunk([{ index: 0, delta: { role: 'assistant', content: '' } }], {
        prompt_tokens: 5,
        completion_tokens: 0,
        total_tokens: 5,
      }),
      out,
    );
    normaliser.accept(chunk([], { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 }), out);
    normaliser.accept(chunk([{ index: 0, delta: { content: 'x' } }]), out);
    normaliser.accept(chunk([], { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 }), out);
    normaliser.finish(out);
    expect(out.map((c) => c.choices.length)).toEqual([1, 1, 0]);
    expect('usage' in (out[0] as object)).toBe(false);
    expect(out[1]?.usage).toEqual({ prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 });
    expect(out[2]?.usage).toEqual({ prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 });
    expect(normaliser.settledUsage()).toEqual({ prompt_tokens: 5, completion_tokens: 2 });
  });

  it('settles with the tokenizer count of relayed text when the engine never reports usage', () => {
    const normaliser = new ChunkNormaliser('a/b', 12);
    const out: ChatCompletionChunk[] = [];
    normaliser.accept(chunk([{ index: 0, delta: { content: 'Hello world, how are you' } }]), out);
    expect(normaliser.settledUsage()).toEqual({ prompt_tokens: 12, completion_tokens: 6 });
  });

  it('passes text items on as they are once open, parses one that opens the stream, and reads usage from the latest', () => {
    const normaliser = new ChunkNormaliser('a/b', 3);
    const out: Array<ChatCompletionChunk | string> = [];
    const text = (n: number) =>
      `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"a/b","choices":[{"index":0,"delta":{"content":"w"},"finish_reason":null}],"usage":{"prompt_tokens":4,"completion_tokens":${n},"total_tokens":${4 + n}}}`;
    normaliser.accept(text(1), out);
    normaliser.accept(text(2), out);
    normaliser.accept(text(3), out);
    expect(typeof out[0]).toBe('object');
    expect((out[0] as ChatCompletionChunk).choices[0]?.delta.role).toBe('assistant');
    expect(typeof out[1]).toBe('object');
    expect(out.slice(2)).toEqual([text(2), text(3)]);
    expect(normaliser.settledUsage()).toEqual({ prompt_tokens: 4, completion_tokens: 3 });
  });

  it('opens with a role chunk even when the engine sent no choice at all', () => {
    const normaliser = new ChunkNormaliser('a/b', 3);
    const out: ChatCompletionChunk[] = [];
    normaliser.finish(out);
    expect(out[0]?.choices[0]?.delta.role).toBe('assistant');
    expect(out[1]).toMatchObject({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 0, total_tokens: 3 } });
  });
});
