import { SimulationOptions, type PrefixCachingOptions } from '../../catalog/catalog.schema';
import { SimServer } from './sim-server';

/** The simulated engine in its vLLM-like mode, over HTTP, as the benchmark runs it. */
const servers: SimServer[] = [];

async function start(prefixCaching: Partial<PrefixCachingOptions>, maxConcurrency = 64): Promise<string> {
  const server = new SimServer(
    SimulationOptions.parse({
      ignore_eos: true,
      max_concurrency: maxConcurrency,
      prefix_caching: { kv_cache_blocks: 4096, ...prefixCaching },
    }),
    'sim/kv',
  );
  servers.push(server);
  return `http://127.0.0.1:${await server.listen(0)}`;
}

afterAll(async () => {
  await Promise.all(servers.map((server) => server.close()));
});

/** A prompt of about `words` tokens, different for each `seed`. */
function prompt(seed: string, words: number): Array<{ role: string; content: string }> {
  const text = Array.from({ length: words }, (_, i) => `${seed}${i % 97}`).join(' ');
  return [
    { role: 'system', content: text },
    { role: 'user', content: 'go' },
  ];
}

interface Timed {
  ttftMs: number;
  totalMs: number;
}

/** A streamed request; times to the first content token and to the end. */
async function timed(base: string, messages: unknown, maxTokens: number): Promise<Timed> {
  const started = performance.now();
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'sim/kv',
      messages,
      max_tokens: maxTokens,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  expect(res.status).toBe(200);
  let ttftMs = -1;
  let text = '';
  const decoder = new TextDecoder();
  for await (const part of res.body as unknown as AsyncIterable<Uint8Array>) {
    text += decoder.decode(part, { stream: true });
    if (ttftMs < 0 && text.includes('"content":"')) {
      const tokenAt = text.search(/"content":"[^"]/);
      if (tokenAt !== -1) ttftMs = performance.now() - started;
    }
  }
  return { ttftMs, totalMs: performance.now() - started };
}

/** `/metrics` as name{labels} → value. */
async function metrics(base: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const values = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line === '') continue;
    const at = line.lastIndexOf(' ');
    values.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return values;
}

const label = '{model_name="sim/kv"}';

describe('simulated engine, prefix-caching mode', () => {
  it('prefills only the uncached tokens: the same prompt again is served from the cache, at prefill rate', async () => {
    // A slow prefill, so the simulated time stands well above what a loaded machine adds.
    const base = await start({ prefill_tokens_per_s: 2000, decode_step_ms: 1, decode_ms_per_sequence: 0 });
    const cold = await timed(base, prompt('a', 3000), 2);
    // The engine's own count of the prompt (a token per 4 characters), as it looked it up.
    const tokens = (await metrics(base)).get(`vllm:prefix_cache_queries_total${label}`) as number;
    expect(tokens).toBeGreaterThan(2500);
    const warm = await timed(base, prompt('a', 3000), 2);
    // About 2600 tokens at 2000 a second: 1.3 s, whatever the machine adds on top.
    expect(cold.ttftMs).toBeGreaterThanOrEqual((tokens / 2000) * 1000 * 0.95);
    expect(warm.ttftMs).toBeLessThan(cold.ttftMs / 4);
    const values = await metrics(base);
    expect(values.get(`vllm:prefix_cache_queries_total${label}`)).toBe(2 * tokens);
    // The warm request found its whole blocks (all but the last partial block and the last token).
    const hits = values.get(`vllm:prefix_cache_hits_total${label}`) as number;
    expect(hits).toBeGreaterThan(tokens - 17);
    expect(hits).toBeLessThan(tokens);
  });

  it('evicts least recently used blocks: a prompt pushed out by others is prefilled again', async () => {
    // Room for about one 1800-token prompt (110 blocks) and a half.
    const base = await start({ kv_cache_blocks: 160, prefill_tokens_per_s: 1e6, decode_step_ms: 0 });
    const hits = async () => (await metrics(base)).get(`vllm:prefix_cache_hits_total${label}`) as number;
    await timed(base, prompt('a', 2000), 1);
    await timed(base, prompt('a', 2000), 1);
    const afterRepeat = await hits();
    expect(afterRepeat).toBeGreaterThan(1500);
    await timed(base, prompt('b', 2000), 1);
    await timed(base, prompt('a', 2000), 1);
    // b took most of a's blocks, from a's tail: a now finds only part of its prefix.
    const partial = (await hits()) - afterRepeat;
    expect(partial).toBeLessThan(afterRepeat / 2);
  });

  it('decodes slower as the running batch grows', async () => {
    const base = await start({ prefill_tokens_per_s: 1e6, decode_step_ms: 2, decode_ms_per_sequence: 3 });
    const alone = await timed(base, prompt('c', 20), 40);
    const together = await Promise.all(Array.from({ length: 8 }, (_, i) => timed(base, prompt(`d${i}`, 20), 40)));
    const perToken = (run: Timed) => (run.totalMs - run.ttftMs) / 39;
    // Alone: 2 + 3 ms a step; eight at once: 2 + 24 ms.
    expect(perToken(alone)).toBeLessThan(15);
    for (const run of together) expect(perToken(run)).toBeGreaterThan(2 * perToken(alone));
  });

  it('runs at most max_concurrency sequences; the others wait, and the gauges say so', async () => {
    const base = await start({ prefill_tokens_per_s: 1e6, decode_step_ms: 20, decode_ms_per_sequence: 0 }, 2);
    const runs = Array.from({ length: 5 }, (_, i) => timed(base, prompt(`e${i}`, 20), 10));
    await new Promise((resolve) => setTimeout(resolve, 60));
    const during = await metrics(base);
    expect(during.get(`vllm:num_requests_running${label}`)).toBe(2);
    expect(during.get(`vllm:num_requests_waiting${label}`)).toBe(3);
    expect(during.get(`vllm:kv_cache_usage_perc${label}`)).toBeGreaterThan(0);
    const done = await Promise.all(runs);
    // The last two waited for two rounds of 10 steps of 20 ms before their first token.
    const ttfts = done.map((run) => run.ttftMs).sort((a, b) => a - b);
    expect(ttfts[4]).toBeGreaterThan(350);
    const after = await metrics(base);
    expect(after.get(`vllm:num_requests_running${label}`)).toBe(0);
    expect(after.get(`vllm:kv_cache_usage_perc${label}`)).toBe(0);
    expect(after.get(`vllm:time_to_first_token_seconds_count${label}`)).toBe(5);
    expect(after.get(`vllm:time_to_first_token_seconds_bucket{model_name="sim/kv",le="+Inf"}`)).toBe(5);
    expect(after.get(`vllm:time_to_first_token_seconds_bucket{model_name="sim/kv",le="0.001"}`)).toBe(0);
    expect(after.get(`vllm:generation_tokens_total${label}`)).toBe(50);
  });

  it('serves JSON completions with their whole output, and stops a stream whose client left', async () => {
    const base = await start({ prefill_tokens_per_s: 1e6, decode_step_ms: 50, decode_ms_per_sequence: 0 });
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim/kv', messages: prompt('f', 10), max_tokens: 3 }),
    });
    const body = (await res.json()) as { usage: { completion_tokens: number } };
    expect(body.usage.completion_tokens).toBe(3);
    const controller = new AbortController();
    const stream = fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim/kv', messages: prompt('g', 10), max_tokens: 1000, stream: true }),
      signal: controller.signal,
    });
    await (await stream).body?.getReader().read();
    controller.abort();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await metrics(base)).get(`vllm:num_requests_running${label}`)).toBe(0);
  });

  it('empties its cache and counters on POST /sim/reset when idle, as a restarted engine', async () => {
    const base = await start({ prefill_tokens_per_s: 1e6, decode_step_ms: 0 });
    await timed(base, prompt('h', 200), 1);
    expect((await fetch(`${base}/sim/reset`, { method: 'POST' })).status).toBe(200);
    await timed(base, prompt('h', 200), 1);
    const values = await metrics(base);
    expect(values.get(`vllm:prefix_cache_hits_total${label}`)).toBe(0);
    expect(values.get(`vllm:time_to_first_token_seconds_count${label}`)).toBe(1);
  });

  it('answers 404 at /metrics in fixed-delay mode (it has no vLLM metrics to give)', async () => {
    const server = new SimServer(SimulationOptions.parse({}), 'sim/fixed');
    servers.push(server);
    const res = await fetch(`http://127.0.0.1:${await server.listen(0)}/metrics`);
    expect(res.status).toBe(404);
  });
});
