// From the shared bench-host kit; bundled by pack-ab.sh for turn-cost-ab.sh.
// An OpenAI-compatible engine that answers at once, to measure what a gateway in front of it costs.
// PORT env; GET /v1/models, POST /v1/chat/completions (JSON or SSE with N chunks, CHUNKS env).
import http from 'node:http';
const port = Number(process.env.PORT || 18000);
const chunks = Number(process.env.CHUNKS || 16);
const body = JSON.stringify({
  id: 'chatcmpl-mock',
  object: 'chat.completion',
  created: 1700000000,
  model: 'mock/model',
  choices: [
    {
      index: 0,
      message: { role: 'assistant', content: 'hello from the mock engine' },
      logprobs: null,
      finish_reason: 'stop',
    },
  ],
  usage: { prompt_tokens: 12, completion_tokens: 6, total_tokens: 18 },
});
const server = http.createServer((req, res) => {
  if (req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'application/json' });
    return res.end(
      JSON.stringify({
        object: 'list',
        data: [{ id: 'mock/model', object: 'model', created: 1700000000, owned_by: 'mock' }],
      }),
    );
  }
  let raw = '';
  req.on('data', (d) => (raw += d));
  req.on('end', () => {
    let stream = false;
    try {
      stream = JSON.parse(raw).stream === true;
    } catch {
      // not JSON: answered as a plain completion
    }
    if (!stream) {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      return res.end(body);
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const base = { id: 'chatcmpl-mock', object: 'chat.completion.chunk', created: 1700000000, model: 'mock/model' };
    res.write(
      `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }] })}\n\n`,
    );
    for (let i = 0; i < chunks; i++) {
      res.write(
        `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta: { content: 'tok ' }, logprobs: null, finish_reason: null }], usage: { prompt_tokens: 12, completion_tokens: i + 1, total_tokens: 13 + i } })}\n\n`,
      );
    }
    res.write(
      `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }] })}\n\n`,
    );
    res.write(
      `data: ${JSON.stringify({ ...base, choices: [], usage: { prompt_tokens: 12, completion_tokens: chunks, total_tokens: 12 + chunks } })}\n\n`,
    );
    res.end('data: [DONE]\n\n');
  });
});
server.keepAliveTimeout = 65000;
server.listen(port, '127.0.0.1', () => console.log(`mock engine on ${port}`));
