import { createServer, type Server, type ServerResponse } from 'node:http';
import { drainedOrClosed } from '@tollway/service-kit';

/**
 * What the hostile engine does with a chat completion, by the first path segment of its base URL
 * (`http://127.0.0.1:<port>/<behaviour>/v1`). Each one tries to make the gateway buffer without
 * bound or wait forever; the gateway must end each with a clear error (a 5xx before the first byte,
 * an error event mid-stream) and keep its memory bounded.
 */
export const HOSTILE_BEHAVIOURS = [
  'huge-json', // a 200 JSON body of 8 MiB, past the response limit
  'huge-event', // one SSE event of 2 MiB with no line end, past the event limit
  'endless', // valid stream chunks until the gateway hangs up (past the stream limit)
  'confetti', // 4 MiB of stream chunks on the wire, one byte per HTTP chunk (thousands per socket read), then cut
  'huge-error', // a 400 text/plain error body of 8 MiB
  'garbage', // 200 application/json that is not JSON, with invalid UTF-8
  'mangled', // a whole stream: a split byte order mark, bytes that are not UTF-8, a split character, control characters
  'cut', // the head of a stream, one chunk, then the connection destroyed
  'silent', // the head, then nothing (past the upstream timeout, 1 s in the suite)
  'no-answer', // never even a status line (past the upstream timeout, 1 s in the suite)
  // Refusals in turn: 429s with retry headers no client should be handed as they are (a
  // 400-digit wait, a negative one, a date in year 0, garbage), 401 and 413 with bodies quoting a
  // key, and a 422 refusing a parameter, each as raw bytes (node would not write some headers).
  'refuses',
  // A well-formed answer whose usage lies, in turn 1e308, counts that are not counts (-5, 1.5,
  // "lots") and 2^40: the gateway must bill and show only counts within the request's bounds. Its
  // streams also send a second finish and text for a choice after its finish_reason, in the finish
  // chunk and after it, which the gateway must drop.
  'lying',
  // The control: an engine that answers well, as vLLM does (every event a write of its own, usage
  // on every chunk when asked), so the gateway's path for a healthy engine over HTTP (the passthrough
  // of its chunks, its usage billed, its replica given back after [DONE]) meets hostile clients too.
  'faithful',
] as const;
export type HostileBehaviour = (typeof HOSTILE_BEHAVIOURS)[number];

/** Catalog id of the model served by `behaviour`. */
export const hostileModelId = (behaviour: HostileBehaviour): string => `hostile/${behaviour}`;
/** The model of the faithful engine, whose streams must end with [DONE] like every healthy one. */
export const FAITHFUL_MODEL = hostileModelId('faithful');
/** The model of the engine whose answers are well formed but whose usage lies. */
export const LYING_MODEL = hostileModelId('lying');
/** The model of the engine that only refuses, with hostile retry headers and a key in its message. */
export const REFUSING_MODEL = hostileModelId('refuses');
/** True for the catalog id of a hostile engine's model. */
export const isHostileModel = (id: string): boolean => id.startsWith('hostile/');

const MIB = 1024 * 1024;
const CHUNK =
  'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},"finish_reason":null}]}\n\n';

/**
 * A stream the gateway must relay whole: a byte order mark split over the first two writes, a
 * character split between two writes (two reads at the gateway), bytes that are not UTF-8 in
 * content, control characters and U+2028; then [DONE].
 */
async function mangled(res: ServerResponse): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const euro = Buffer.from(CHUNK.replace('aaaa', '€\\u0000\\u001b\u2028'));
  const split = euro.indexOf(Buffer.from('€')) + 1;
  const notUtf8 = Buffer.from(CHUNK.replace('aaaa', 'a\xffb\xc3'), 'latin1');
  const pieces = [
    Buffer.from([0xef]), // a byte order mark split over the first two writes
    Buffer.concat([Buffer.from([0xbb, 0xbf]), euro.subarray(0, split)]),
    euro.subarray(split),
    notUtf8,
    'data: [DONE]\n\n',
  ];
  for (const piece of pieces) {
    if (res.destroyed) return;
    res.write(piece);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  res.end();
}

/** Writes `bytes` of filler in 64 KiB pieces, minding back-pressure; stops when the socket goes. */
async function fill(res: ServerResponse, bytes: number, piece: string): Promise<void> {
  const block = piece.repeat(Math.ceil((64 * 1024) / piece.length));
  for (let sent = 0; sent < bytes && !res.destroyed; sent += block.length) {
    if (!res.write(block)) await drainedOrClosed(res);
  }
}

/**
 * Writes the chunked answer of a stream by hand on the socket, every byte of CHUNK an HTTP chunk
 * of its own (6 bytes on the wire each), `bytes` of them on the wire, then cuts the connection.
 */
async function confetti(res: ServerResponse, bytes: number): Promise<void> {
  const socket = res.socket;
  if (!socket) return;
  const block = Buffer.from(
    Array.from(CHUNK.repeat(Math.ceil((64 * 1024) / 6 / CHUNK.length)), (char) => `1\r\n${char}\r\n`).join(''),
    'latin1',
  );
  socket.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n');
  for (let sent = 0; sent < bytes && !socket.destroyed; sent += block.length) {
    if (!socket.write(block)) await drainedOrClosed(socket);
  }
  socket.destroy();
}

/** What the faithful engine reads of a request: the OpenAI fields that shape its answer. */
interface FaithfulRequest {
  model?: unknown;
  stream?: unknown;
  max_tokens?: unknown;
  stream_options?: { include_usage?: unknown; continuous_usage_stats?: unknown } | null;
}

/**
 * A well-formed answer: a `chat.completion`, or a stream of a role chunk, up to 8 token chunks, a
 * finish chunk, the usage chunk when asked, and [DONE], each written in a turn of its own.
 */
async function faithful(body: string, res: ServerResponse): Promise<void> {
  let request: FaithfulRequest = {};
  try {
    request = (JSON.parse(body) as FaithfulRequest | null) ?? {};
  } catch {
    // Answered all the same: the gateway sends only JSON it has validated.
  }
  const model = typeof request.model === 'string' ? request.model : 'faithful';
  const maxTokens = typeof request.max_tokens === 'number' ? request.max_tokens : 4;
  const tokens = Math.max(1, Math.min(8, Math.floor(maxTokens)));
  const usage = (completion: number) => ({
    prompt_tokens: 5,
    completion_tokens: completion,
    total_tokens: 5 + completion,
  });
  const head = { id: 'chatcmpl-faithful', created: 1767225600, model };
  if (request.stream !== true) {
    res.writeHead(200, { 'content-type': 'application/json' });
    const message = { role: 'assistant', content: 'ok '.repeat(tokens).trim() };
    return void res.end(
      JSON.stringify({
        ...head,
        object: 'chat.completion',
        choices: [{ index: 0, message, logprobs: null, finish_reason: 'length' }],
        usage: usage(tokens),
      }),
    );
  }
  const continuous = request.stream_options?.continuous_usage_stats === true;
  const chunk = (delta: object, finish: string | null, completion: number) =>
    JSON.stringify({
      ...head,
      object: 'chat.completion.chunk',
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      ...(continuous ? { usage: usage(completion) } : {}),
    });
  const events = [chunk({ role: 'assistant', content: '' }, null, 0)];
  for (let i = 1; i < tokens; i++) events.push(chunk({ content: ' ok' }, null, i));
  events.push(chunk({ content: ' ok' }, 'length', tokens));
  if (request.stream_options?.include_usage === true)
    events.push(JSON.stringify({ ...head, object: 'chat.completion.chunk', choices: [], usage: usage(tokens) }));
  events.push('[DONE]');
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  for (const event of events) {
    if (res.destroyed) return;
    res.write(`data: ${event}\n\n`);
    await new Promise((resolve) => setImmediate(resolve));
  }
  res.end();
}

/** The usages `lying` answers with in turn. */
const LIES: readonly object[] = [
  { prompt_tokens: 1e308, completion_tokens: 1e308, total_tokens: 1e308 },
  { prompt_tokens: -5, completion_tokens: 1.5, total_tokens: 'lots' },
  { prompt_tokens: 2 ** 40, completion_tokens: 2 ** 40, total_tokens: 2 ** 41 },
  // Counts that hold, with details no client could parse (the contract oracle judges the answer).
  { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5, completion_tokens_details: { reasoning_tokens: 'lots' } },
];
let lies = 0;

/** A well-formed answer with `usage` that lies, and in a stream, a choice that goes on after its finish. */
function lying(stream: boolean, res: ServerResponse): void {
  const usage = LIES[lies++ % LIES.length];
  const head = { id: 'chatcmpl-lying', created: 1767225600, model: 'lying' };
  if (!stream) {
    res.writeHead(200, { 'content-type': 'application/json' });
    const message = { role: 'assistant', content: 'ok ok' };
    const choices = [{ index: 0, message, logprobs: null, finish_reason: 'stop' }];
    return void res.end(JSON.stringify({ ...head, object: 'chat.completion', choices, usage }));
  }
  const chunk = (choices: object[], extra: object = {}) =>
    `data: ${JSON.stringify({ ...head, object: 'chat.completion.chunk', choices, ...extra })}\n\n`;
  const choice = (content: string | null, finish: string | null) => ({
    index: 0,
    delta: content === null ? {} : { content },
    logprobs: null,
    finish_reason: finish,
  });
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.write(chunk([{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }]));
  res.write(chunk([choice('ok', null)], { usage }));
  res.write(chunk([choice(' ok', 'stop'), choice(' after the finish', null)]));
  res.write(chunk([choice(' more', 'length')], { usage }));
  res.write(chunk([], { usage }));
  res.end('data: [DONE]\n\n');
}

/** The refusals `refuses` answers in turn: status and extra header lines. */
const REFUSALS: ReadonlyArray<[number, string]> = [
  [429, `retry-after-ms: ${'9'.repeat(400)}\r\nretry-after: ${'9'.repeat(400)}\r\n`],
  [429, 'retry-after-ms: -5\r\nretry-after: Mon, 01 Jan 0000 00:00:00 GMT\r\n'],
  [429, 'retry-after: soon\r\nretry-after-ms: 1e400\r\n'],
  [429, 'retry-after: \x01\x7f\xff\r\n'],
  [401, 'www-authenticate: Bearer realm="engine"\r\n'],
  [422, ''],
  [413, ''],
];
let refusalTurn = 0;

/** Writes the next refusal of REFUSALS as raw bytes on the socket, then closes it. */
function refuse(res: ServerResponse): void {
  const socket = res.socket;
  if (!socket) return;
  const [status, headers] = REFUSALS[refusalTurn++ % REFUSALS.length] as [number, string];
  const body = JSON.stringify({
    object: 'error',
    // A parameter refusal (422) is the client's to read; the others name the gateway's own key.
    message:
      status === 422
        ? 'top_k: must be at least -1'
        : 'refused (Incorrect API key provided: sk-engine-\u0000secret\r\n)',
    type: 'EngineError',
    param: null,
    code: status,
  });
  socket.end(
    Buffer.from(
      `HTTP/1.1 ${status} Refused\r\ncontent-type: application/json\r\n${headers}` +
        `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      'latin1',
    ),
  );
}

async function answer(behaviour: string, body: string, res: ServerResponse): Promise<void> {
  const sse = { 'content-type': 'text/event-stream' };
  switch (behaviour as HostileBehaviour) {
    case 'faithful':
      return faithful(body, res);
    case 'lying':
      return lying(body.includes('"stream":true'), res);
    case 'refuses':
      return refuse(res);
    case 'huge-json':
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"');
      await fill(res, 8 * MIB, 'a');
      return void res.end('"},"finish_reason":"stop"}]}');
    case 'huge-event':
      res.writeHead(200, sse);
      res.write('data: {"id":"x","choices":[{"index":0,"delta":{"content":"');
      await fill(res, 2 * MIB, 'a');
      return void res.end();
    case 'endless':
      res.writeHead(200, sse);
      // Bounded all the same (256 MiB), so a gateway without a stream limit cannot make this run forever.
      return fill(res, 256 * MIB, CHUNK).then(() => void res.end());
    case 'confetti':
      return confetti(res, 4 * MIB);
    case 'huge-error':
      res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' });
      res.write('Inference error: ');
      await fill(res, 8 * MIB, 'e');
      return void res.end();
    case 'garbage':
      res.writeHead(200, { 'content-type': 'application/json' });
      return void res.end(Buffer.from([0x7b, 0xff, 0xfe, 0x00, 0x22, 0x7d]));
    case 'mangled':
      return mangled(res);
    case 'cut':
      res.writeHead(200, sse);
      res.write(CHUNK);
      return void setTimeout(() => res.destroy(), 50);
    case 'silent':
      res.writeHead(200, sse);
      res.flushHeaders();
      return;
    default:
      return; // no-answer: the socket stays open until the gateway gives up
  }
}

/**
 * A fake OpenAI-compatible engine that answers the model list (so the gateway is ready) and
 * every chat completion with the hostile behaviour its base path names.
 */
export async function startHostileEngine(): Promise<{ port: number; server: Server }> {
  const server = createServer((req, res) => {
    const behaviour = (req.url ?? '').split('/')[1] ?? '';
    // Only the faithful and lying engines read the request (the gateway's requests are small and bounded).
    const body: Buffer[] = [];
    req.on('data', (part: Buffer) => {
      if (behaviour === 'faithful' || behaviour === 'lying') body.push(part);
    });
    req.on('end', () => {
      // Any GET is the readiness probe's model list.
      if (req.method === 'GET') {
        res.setHeader('content-type', 'application/json');
        return void res.end('{"object":"list","data":[]}');
      }
      answer(behaviour, Buffer.concat(body).toString('utf8'), res).catch(() => res.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return { port: typeof address === 'object' && address ? address.port : 0, server };
}

/** Catalog entries (YAML, to append to the shipped catalog's `models:` list) for every behaviour. */
export function hostileCatalogEntries(port: number): string {
  return HOSTILE_BEHAVIOURS.map(
    (behaviour) => `
  - id: ${hostileModelId(behaviour)}
    owned_by: adversarial
    created: 1767225600
    price_per_million: { input: 1, output: 1 }
    engine:
      kind: openai-compatible
      continuous_usage_stats: ${behaviour === 'faithful'}
      replicas:
        - base_url: http://127.0.0.1:${port}/${behaviour}/v1
`,
  ).join('');
}
