import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import streams from './__fixtures__/chat-streams.json';
import { CompletionAssembler } from './chat-stream';

// Saved streams: a reasoning model's (reasoning, then content, usage on every chunk as the
// gateway sends it) and a model forming two tool calls at once, its arguments in pieces.
const chunks = (name: keyof typeof streams) => streams[name] as unknown as ChatCompletionChunk[];

describe('CompletionAssembler', () => {
  it("makes the completion a non-streamed call would have answered, and tells each chunk's deltas", () => {
    const assembler = new CompletionAssembler();
    const deltas = chunks('reasoner').map((chunk) => assembler.add(chunk));
    expect(deltas.map((d) => d.content ?? '').join('')).toBe('Hello, how can I help?');
    expect(deltas.map((d) => d.reasoning_content ?? '').join('')).toBe('The user greets me.');
    expect(assembler.completion()).toEqual({
      id: 'chatcmpl-7f3',
      object: 'chat.completion',
      created: 1767225600,
      model: 'tollway/sim-reasoner',
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: 'Hello, how can I help?',
            refusal: null,
            reasoning_content: 'The user greets me.',
          },
          finish_reason: 'stop',
          logprobs: null,
        },
      ],
      usage: {
        prompt_tokens: 12,
        completion_tokens: 5,
        total_tokens: 17,
        completion_tokens_details: { reasoning_tokens: 2 },
      },
    });
  });

  it('puts tool calls together by index, however their pieces interleave', () => {
    const assembler = new CompletionAssembler();
    const deltas = chunks('tool_calls').flatMap((chunk) => assembler.add(chunk).toolCalls);
    expect(deltas[0]).toEqual({ index: 0, id: 'call_a', name: 'calculator' });
    const completion = assembler.completion();
    expect(completion.choices[0]!.message).toEqual({
      role: 'assistant',
      content: null,
      refusal: null,
      tool_calls: [
        { id: 'call_a', type: 'function', function: { name: 'calculator', arguments: '{"expression":"2*3"}' } },
        { id: 'call_b', type: 'function', function: { name: 'calculator', arguments: '{"expression":"1+1"}' } },
      ],
    });
    expect(completion.choices[0]!.finish_reason).toBe('tool_calls');
    expect(completion.usage?.total_tokens).toBe(50);
  });
});
