import { connect } from 'node:net';
import { SimServer, type SimServerOptions } from './sim-server';

/** Sends one raw HTTP/1.1 request and reads the whole answer (the server closes the connection). */
function rawExchange(port: number, body: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const parts: Buffer[] = [];
    socket.on('data', (part) => parts.push(part));
    socket.on('end', () => resolve(Buffer.concat(parts)));
    socket.on('error', reject);
    socket.write(
      'POST /v1/chat/completions HTTP/1.1\r\nHost: sim\r\nConnection: close\r\nContent-Type: application/json\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  });
}

/** The HTTP chunks of a chunked answer, as text, in order (the empty last chunk left out). */
function httpChunks(answer: Buffer): string[] {
  const text = answer.toString('latin1');
  let at = text.indexOf('\r\n\r\n') + 4;
  const chunks: string[] = [];
  for (;;) {
    const lineEnd = text.indexOf('\r\n', at);
    const size = parseInt(text.slice(at, lineEnd), 16);
    if (!(size > 0)) return chunks;
    chunks.push(Buffer.from(text.slice(lineEnd + 2, lineEnd + 2 + size), 'latin1').toString('utf8'));
    at = lineEnd + 2 + size + 2;
  }
}

describe('sim server: how a stream is written', () => {
  const started: SimServer[] = [];
  const sim = async (serverOptions: SimServerOptions) => {
    const server = new SimServer(
      {
        time_to_first_token_ms: 0,
        time_per_output_token_ms: 0,
        max_concurrency: 8,
        default_max_tokens: 16,
        max_model_len: 4096,
        reasoning: false,
        ignore_eos: true,
        error_style: 'json',
      },
      'simulated',
      serverOptions,
    );
    started.push(server);
    return server.listen(0);
  };
  const body = JSON.stringify({
    model: 'simulated',
    messages: [{ role: 'user', content: 'Count.' }],
    max_tokens: 16,
    stream: true,
    stream_options: { include_usage: true },
  });

  afterAll(async () => {
    await Promise.all(started.map((server) => server.close()));
  });

  it('flushEachEvent: every SSE event is an HTTP chunk of its own, as a per-token engine sends it', async () => {
    const chunks = httpChunks(await rawExchange(await sim({ flushEachEvent: true }), body));
    // The role chunk, 16 tokens, the finish chunk, the usage chunk and [DONE].
    expect(chunks.length).toBeGreaterThanOrEqual(19);
    for (const chunk of chunks) expect(chunk).toMatch(/^data: [^\n]*\n\n$/);
    expect(chunks.at(-1)).toBe('data: [DONE]\n\n');
  });

  it('refuses a stream past the context length with a 400, as a JSON request, not a 200 cut off', async () => {
    const port = await sim({});
    const tooLong = (stream: boolean) =>
      fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'simulated',
          messages: [{ role: 'user', content: 'x' }],
          max_tokens: 5000,
          stream,
        }),
      });
    for (const stream of [false, true]) {
      const res = await tooLong(stream);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { message: string }).message).toMatch(/context length/);
    }
  });

  it('gives the generation slot of a stream whose client left back at once', async () => {
    // A token every 5 s: a stream left to finish would hold its slot for over a minute.
    const slow = new SimServer({
      time_to_first_token_ms: 0,
      time_per_output_token_ms: 5000,
      max_concurrency: 1,
      default_max_tokens: 16,
      max_model_len: 4096,
      reasoning: false,
      ignore_eos: true,
      error_style: 'json',
    });
    started.push(slow);
    const url = `http://127.0.0.1:${await slow.listen(0)}/v1/chat/completions`;
    const init = { method: 'POST', headers: { 'content-type': 'application/json' }, body };
    for (let i = 0; i < 2; i++) {
      // Each stream gets the only slot (the second only if the first gave it back), then its client leaves.
      const left = new AbortController();
      const res = await fetch(url, { ...init, signal: left.signal });
      expect((await res.body?.getReader().read())?.done).toBe(false);
      expect(slow.load()).toEqual({ running: 1, waiting: 0 });
      left.abort();
      const deadline = Date.now() + 2000;
      while (slow.load().running > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(slow.load()).toEqual({ running: 0, waiting: 0 });
    }
  });

  it('by default the events generated together leave in one HTTP chunk', async () => {
    const chunks = httpChunks(await rawExchange(await sim({}), body));
    expect(chunks.length).toBeLessThanOrEqual(2);
    expect(chunks.join('').match(/^data: /gm)?.length).toBeGreaterThanOrEqual(19);
  });
});
