import { isPassthroughChunk } from './passthrough';

const token = (extra: string) =>
  `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":null${extra}}]`;

describe('isPassthroughChunk', () => {
  it('passes a compact token chunk with its own usage', () => {
    expect(isPassthroughChunk(`${token('')},"usage":{"prompt_tokens":3,"total_tokens":4,"completion_tokens":1}}`)).toBe(
      true,
    );
  });

  it.each([
    ['no usage', `${token('')}}`],
    ['null usage', `${token('')},"usage":null}`],
    [
      'a finish_reason',
      token('').replace('"finish_reason":null', '"finish_reason":"stop"') + ',"usage":{"prompt_tokens":3}}',
    ],
    [
      'a second choice that finishes',
      token('').replace(']', ',{"index":1,"delta":{},"finish_reason":"stop"}]') + ',"usage":{"prompt_tokens":3}}',
    ],
    ['empty choices', '{"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}'],
    ['an error event', '{"error":{"message":"x"},"choices":[{"finish_reason":null}],"usage":{"prompt_tokens":1}}'],
    ['no finish_reason key', '{"object":"chat.completion.chunk","choices":[{"delta":{}}],"usage":{"prompt_tokens":1}}'],
    ['spaced JSON', '{"id": "c", "choices": [{"delta": {}}], "usage": {"prompt_tokens": 3}}'],
    ['a negative count', `${token('')},"usage":{"prompt_tokens":3,"total_tokens":2,"completion_tokens":-1}}`],
    ['an exponent', `${token('')},"usage":{"prompt_tokens":1e308,"total_tokens":4,"completion_tokens":1}}`],
    ['a fraction', `${token('')},"usage":{"prompt_tokens":3,"total_tokens":4.5,"completion_tokens":1.5}}`],
    ['a string count', `${token('')},"usage":{"prompt_tokens":3,"total_tokens":"lots","completion_tokens":1}}`],
    ['16 digits', `${token('')},"usage":{"prompt_tokens":3,"total_tokens":1000000000000004,"completion_tokens":1}}`],
    ['a field after usage', `${token('')},"usage":{"prompt_tokens":3,"total_tokens":4,"completion_tokens":1},"x":1}`],
    [
      "a trace named `reasoning` (vLLM's, Ollama's)",
      `${token('').replace('{"content":"hi"}', '{"reasoning":"hm"}')},"usage":{"prompt_tokens":3,"total_tokens":4,"completion_tokens":1}}`,
    ],
    [
      'a trace named `reasoning` after the finish_reason key',
      '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"finish_reason":null,"delta":{"reasoning":"hm"}}],"usage":{"prompt_tokens":3,"total_tokens":4,"completion_tokens":1}}',
    ],
  ])('refuses %s', (_name, payload) => {
    expect(isPassthroughChunk(payload)).toBe(false);
  });

  it("passes vLLM's usage with its null details", () => {
    const usage = '"usage":{"prompt_tokens":3,"total_tokens":4,"completion_tokens":1,"prompt_tokens_details":null}';
    expect(isPassthroughChunk(`${token('')},${usage}}`)).toBe(true);
    const traced = token('').replace('{"content":"hi"}', '{"reasoning_content":"hm"}');
    expect(isPassthroughChunk(`${traced},${usage}}`)).toBe(true);
  });

  it('is not fooled by the same words inside content (quotes are escaped there)', () => {
    const content = JSON.stringify('"finish_reason":"stop" "usage":{"prompt_tokens":1} "reasoning":"x"');
    const payload = `${token('').replace('"hi"', content)},"usage":{"prompt_tokens":3,"total_tokens":4,"completion_tokens":1}}`;
    expect(JSON.parse(payload)).toBeTruthy();
    expect(isPassthroughChunk(payload)).toBe(true);
  });
});
