import { countPromptTokens, countPromptTokensFairly, countTextTokens } from './count-tokens';

describe('token counting', () => {
  it('counts text with cl100k_base', () => {
    expect(countTextTokens('')).toBe(0);
    expect(countTextTokens('Hello world')).toBe(2);
  });

  it('counts messages with framing, text parts, names and tool calls', () => {
    const plain = countPromptTokens([{ role: 'user', content: 'Hello world' }]);
    expect(plain).toBe(3 + 4 + 2);
    expect(
      countPromptTokens([{ role: 'user', content: [{ type: 'text', text: 'Hello world' }, { type: 'image_url' }] }]),
    ).toBe(plain);
    expect(countPromptTokens([{ role: 'user', content: 'Hello world', name: 'bob' }])).toBe(
      plain + 1 + countTextTokens('bob'),
    );
    const calls = [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }];
    expect(countPromptTokens([{ role: 'assistant', content: null, tool_calls: calls }])).toBe(
      3 + 4 + countTextTokens(JSON.stringify(calls)),
    );
  });

  it('counts a long prompt in slices to the same total, letting other work run meanwhile', async () => {
    const words = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'river', 'mountain'];
    let text = '';
    for (let i = 0; text.length < 200_000; i++) text += `${words[(i * 7) % words.length]}${i % 13 === 0 ? '.\n' : ' '}`;
    const messages = [
      { role: 'system', content: text },
      { role: 'user', content: 'short' },
    ];
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 0);
    const fair = await countPromptTokensFairly(messages);
    clearInterval(ticker);
    expect(fair).toBe(countPromptTokens(messages));
    expect(ticks).toBeGreaterThan(0);
  });

  it.each([
    ['CJK', '中'],
    ['spaces', ' '],
    ['punctuation', '!'],
    ['letters', 'w'],
  ])('a 1 MiB run of %s is counted in seconds at most (BPE on it whole takes minutes)', (_name, char) => {
    const started = performance.now();
    const count = countTextTokens(`start ${char.repeat(1 << 20)} end`);
    expect(performance.now() - started).toBeLessThan(5000);
    expect(count).toBeGreaterThan(1000);
  });

  it('counts runs exactly when they repeat', () => {
    expect(countTextTokens('w'.repeat(4096))).toBe(2048);
  });
});
