import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import {
  countPromptTokens,
  countPromptTokensFairly,
  countTextTokens,
  countTextTokensUpTo,
  PromptTokenCounter,
} from './count-tokens';

describe('token counting', () => {
  it('counts text with cl100k_base', () => {
    expect(countTextTokens('')).toBe(0);
    expect(countTextTokens('Hello world')).toBe(2);
  });

  it('counts messages with framing, text parts, names and tool calls', () => {
    const plain = countPromptTokens([{ role: 'user', content: 'Hello world' }]);
    expect(plain).toBe(3 + 4 + 2);
    const image = (detail?: string) => ({
      type: 'image_url',
      image_url: { url: 'data:image/png;base64,AAAA', detail },
    });
    expect(countPromptTokens([{ role: 'user', content: [{ type: 'text', text: 'Hello world' }, image()] }])).toBe(
      plain + 765,
    );
    expect(countPromptTokens([{ role: 'user', content: [{ type: 'text', text: 'Hello world' }, image('low')] }])).toBe(
      plain + 85,
    );
    expect(countPromptTokens([{ role: 'user', content: 'Hello world', name: 'bob' }])).toBe(
      plain + 1 + countTextTokens('bob'),
    );
    const calls = [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }];
    expect(countPromptTokens([{ role: 'assistant', content: null, tool_calls: calls }])).toBe(
      3 + 4 + countTextTokens(JSON.stringify(calls)),
    );
  });

  it('counts the tool definitions, which engines render into the prompt, and tool call ids', () => {
    const messages = [{ role: 'user', content: 'Hello world' }];
    const tools = [
      { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: {} } } },
    ];
    expect(countPromptTokens(messages, tools)).toBe(
      countPromptTokens(messages) + countTextTokens(JSON.stringify(tools)),
    );
    expect(countPromptTokens(messages, [])).toBe(countPromptTokens(messages));
    expect(countPromptTokens([{ role: 'tool', content: '18 C', tool_call_id: 'call_1' }])).toBe(
      3 + 4 + countTextTokens('18 C') + countTextTokens('call_1'),
    );
  });

  it('counts tools alike in every counter, the remembering one included', async () => {
    const messages = [{ role: 'user', content: 'Hello world' }];
    const tools = Array.from({ length: 50 }, (_, i) => ({
      type: 'function',
      function: { name: `tool_${i}`, description: 'Looks up the weather for a city. '.repeat(20) },
    }));
    const exact = countPromptTokens(messages, tools);
    expect(exact).toBeGreaterThan(5000);
    expect(await countPromptTokensFairly(messages, tools)).toBe(exact);
    const counter = new PromptTokenCounter(100);
    expect(await counter.count(messages, tools)).toBe(exact);
    expect(await counter.count(messages, tools)).toBe(exact);
    expect(counter.stats().hits).toBeGreaterThan(0);
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

  it('keeps nothing per piece it has seen: 300,000 distinct pieces leave the heap as it was', () => {
    // gpt-tokenizer's merge cache (on by default) kept 28.5 MB after these pieces, and each insert
    // into the full cache stepped over the holes its Map had left: up to 9 µs a character of BPE.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const text = () => Array.from({ length: 5000 }, () => Math.random().toString(36).slice(2)).join(' ');
    countTextTokens(text());
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let round = 0; round < 60; round++) countTextTokens(text());
    gc();
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(8 * 1024 * 1024);
  });

  it('counts up to a limit: exact below it, and no further than it, however long the text', () => {
    const words = ['alpha', 'beta', 'gamma', 'delta', 'river'];
    let text = '';
    for (let i = 0; text.length < 400_000; i++) text += `${words[(i * 3) % words.length]} `;
    const full = countTextTokens(text);
    expect(countTextTokensUpTo(text, full + 10)).toBe(full);
    expect(countTextTokensUpTo(text, 100)).toBe(100);
    expect(countTextTokensUpTo('', 5)).toBe(0);
    // It stops after the first slice instead of counting 400,000 characters.
    const started = performance.now();
    for (let i = 0; i < 5; i++) countTextTokens(text);
    const whole = performance.now() - started;
    const cutStarted = performance.now();
    for (let i = 0; i < 5; i++) countTextTokensUpTo(text, 100);
    expect(performance.now() - cutStarted).toBeLessThan(whole / 3);
  });

  it('counts runs exactly when they repeat', () => {
    expect(countTextTokens('w'.repeat(4096))).toBe(2048);
  });

  it.each([
    ['ASCII letters, then letters of three tokens each', 'a'.repeat(128) + 'ꙮ'.repeat(20_000), 60_016],
    ['ASCII letters, then CJK', 'a'.repeat(128) + '日本語'.repeat(6667), 26_685],
    ['ASCII letters, then astral letters', 'a'.repeat(128) + '𝔘'.repeat(20_000), 60_016],
  ])('estimates a run whose first 128 characters are cheap near its count: %s', (_name, run, count) => {
    // Estimated from its first 128 characters, the first run counted 2,516. From 8 windows at a
    // random offset, only the first can fall on the cheap letters (one time in about 19), and
    // then it weighs an eighth: the estimate stays above 7/8 of the count, less rounding.
    for (let i = 0; i < 50; i++) {
      const estimate = countTextTokens(run);
      expect(estimate).toBeGreaterThan(count * 0.85);
      expect(estimate).toBeLessThan(count * 1.1);
    }
  });
});

describe('PromptTokenCounter', () => {
  const system = 'You are the support assistant of a small shop. Answer briefly and politely. '.repeat(20);
  const turn = (n: number) => [
    { role: 'system', content: system },
    ...Array.from({ length: n }, (_, i) => ({
      role: i % 2 ? 'assistant' : 'user',
      content: `message ${i} of the talk`,
    })),
  ];

  it('gives countPromptTokens’ totals, from memory for the texts it saw', async () => {
    const counter = new PromptTokenCounter(100);
    for (const n of [1, 2, 3, 4]) expect(await counter.count(turn(n))).toBe(countPromptTokens(turn(n)));
    // 1 + 2 + 3 + 4 messages and the system prompt four times: the system prompt and each earlier message come back.
    expect(counter.stats()).toEqual({ lookups: 14, hits: 9, entries: 5 });
    expect(await counter.count([{ role: 'user', content: system, name: 'bob' }])).toBe(
      countPromptTokens([{ role: 'user', content: system, name: 'bob' }]),
    );
  });

  it('keys by the whole text: texts that differ anywhere are counted apart', async () => {
    const counter = new PromptTokenCounter(100);
    const a = `${system}alpha`;
    const b = `${system}alpha beta gamma delta`;
    expect(await counter.count([{ role: 'user', content: a }])).toBe(countPromptTokens([{ role: 'user', content: a }]));
    expect(await counter.count([{ role: 'user', content: b }])).toBe(countPromptTokens([{ role: 'user', content: b }]));
    expect(counter.stats().hits).toBe(0);
  });

  it('answers exactly for texts whose UTF-8 is the same (a lone surrogate is hashed as U+FFFD)', async () => {
    // The key hashes the text's UTF-8, where a lone surrogate becomes U+FFFD: such texts share an
    // entry, which is right only while the tokenizer counts them alike (it too reads UTF-8).
    const pairs = [
      ['a\uD800b', 'a\uFFFDb'],
      ['\uDC00\uDC00 x', '\uFFFD\uFFFD x'],
      ['\uD800'.repeat(300), '\uFFFD'.repeat(300)],
    ];
    for (const pair of pairs) {
      for (const order of [pair, [...pair].reverse()]) {
        const counter = new PromptTokenCounter(100);
        for (const text of order) {
          const messages = [{ role: 'user', content: text }];
          expect(await counter.count(messages)).toBe(countPromptTokens(messages));
        }
        expect(counter.stats().hits).toBe(1);
      }
    }
  });

  it('holds at most its entries, dropping the least recently used', async () => {
    const counter = new PromptTokenCounter(2);
    const say = (text: string) => counter.count([{ role: 'user', content: text }]);
    await say('one');
    await say('two');
    await say('one'); // now `two` is the least recently used
    await say('three');
    expect(counter.stats()).toEqual({ lookups: 4, hits: 1, entries: 2 });
    await say('one');
    expect(counter.stats().hits).toBe(2);
    await say('two');
    expect(counter.stats().hits).toBe(2);
  });

  it('with 0 entries counts every time and remembers nothing', async () => {
    const counter = new PromptTokenCounter(0);
    expect(await counter.count(turn(3))).toBe(countPromptTokens(turn(3)));
    expect(await counter.count(turn(3))).toBe(countPromptTokens(turn(3)));
    expect(counter.stats()).toEqual({ lookups: 0, hits: 0, entries: 0 });
  });

  it.each([
    ['one long text', [{ role: 'system', content: 'lorem ipsum dolor sit amet, '.repeat(8000) }]],
    [
      'many texts under a slice each',
      Array.from({ length: 40 }, (_, i) => ({
        role: 'user',
        content: `${i} lorem ipsum dolor sit amet, `.repeat(300),
      })),
    ],
  ])('counts %s not seen before in slices, letting other work run meanwhile', async (_name, messages) => {
    const counter = new PromptTokenCounter(100);
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 0);
    const counted = await counter.count(messages);
    clearInterval(ticker);
    expect(counted).toBe(countPromptTokens(messages));
    expect(ticks).toBeGreaterThan(0);
  });
});
