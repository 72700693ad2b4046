#!/usr/bin/env node
// Bytes allocated per relayed chunk on the stream relay's hot path (issue 13): the OpenAI-compatible
// engine's reader (SSE parse, passthrough test, model name) → ChunkNormaliser → relayStream → the
// response's write, in process, on the exact bytes the simulated engine sends for a 16-token stream
// with continuous usage (what the gateway asks an engine for). No sockets: the response is a small
// writable that keeps nothing, so what is counted is the relay's own garbage.
// Runs with a young generation large enough that no GC happens while it counts (checked), so the
// heap's growth over N streams is what they allocated; Buffers are counted from arrayBuffers.
// CPU per chunk is measured in a second run with V8's default heap (the large young generation of
// the first slows it down).
// --per-event hands the reader every event as a read of its own, as an engine that writes each
// event on its own (vLLM, SGLang, llama.cpp's server; the table's per-event engine) reaches the
// gateway when it keeps up: what each read costs, on top of what each chunk costs.
// Usage: pnpm build && node bench/relay-alloc.mjs [--streams 2000] [--per-event]
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { PerformanceObserver } from 'node:perf_hooks';

const COUNT_FLAGS = ['--expose-gc', '--min-semi-space-size=256', '--max-semi-space-size=256'];
const mode = process.env.RELAY_ALLOC_MODE;
if (!mode) {
  for (const [childMode, flags] of [
    ['count', COUNT_FLAGS],
    ['time', []],
  ]) {
    const run = spawnSync(process.execPath, [...flags, new URL(import.meta.url).pathname, ...process.argv.slice(2)], {
      stdio: 'inherit',
      env: { ...process.env, RELAY_ALLOC_MODE: childMode },
    });
    if (run.status !== 0) process.exit(run.status ?? 1);
  }
  process.exit(0);
}

const require = createRequire(new URL('../services/inference-gateway/dist/', import.meta.url));
const { OpenAICompatibleEngine } = require('./engines/openai-compatible/openai-compatible.engine.js');
const { ChunkNormaliser } = require('./streaming/chunk-normaliser.js');
const { relayStream } = require('./streaming/sse-relay.js');
const { SimServer } = require('./engines/simulated/sim-server.js');
const { ClientAbort } = require('./engines/engine.types.js');

const at = process.argv.indexOf('--streams');
const streams = at === -1 ? 2000 : Number(process.argv[at + 1]);
const perEvent = process.argv.includes('--per-event');
const MODEL = 'bench/instant';

// The engine's exact bytes for one stream, fetched once from the simulated engine.
const sim = new SimServer(
  {
    time_to_first_token_ms: 0,
    time_per_output_token_ms: 0,
    max_concurrency: 16,
    default_max_tokens: 16,
    max_model_len: 32768,
    reasoning: false,
    ignore_eos: true,
    error_style: 'json',
  },
  MODEL,
);
const port = await sim.listen(0);
/** The engine's bytes for a stream of `tokens` token chunks (plus the role and usage chunks). */
async function wireOf(tokens) {
  const response = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: MODEL,
      messages: [{ role: 'user', content: 'Say hello to the benchmark.' }],
      max_tokens: tokens,
      stream: true,
      stream_options: { include_usage: true, continuous_usage_stats: true },
    }),
  });
  const bytes = Buffer.from(await response.arrayBuffer());
  const chunks = bytes
    .toString()
    .split('\n\n')
    .filter((frame) => frame.startsWith('data: {')).length;
  // The reads the gateway gets: the whole stream at once, or every event on its own.
  const reads = perEvent
    ? bytes
        .toString()
        .split(/(?<=\n\n)/)
        .map((frame) => Buffer.from(frame))
    : [bytes];
  return { bytes, chunks, reads };
}
// 16 tokens as in the table bench; 80 to tell what one more chunk costs from what a stream costs.
const short = await wireOf(16);
const long = await wireOf(80);
await sim.close();

const engine = new OpenAICompatibleEngine(
  MODEL,
  { kind: 'openai-compatible', continuous_usage_stats: true, replicas: [{ base_url: 'http://127.0.0.1:9/v1' }] },
  { connections: 1, timeoutMs: 1000 },
);
const replica = { outstanding: 0, upstreamModel: MODEL, modelField: `"model":${JSON.stringify(MODEL)}` };

/**
 * A response that accepts everything and keeps nothing. It measures each write's UTF-8 length, as
 * a socket encodes the text it is given, which also flattens a string built by concatenation.
 */
class NullResponse {
  bytes = 0;
  destroyed = false;
  write(data) {
    this.bytes += Buffer.byteLength(data);
    return true;
  }
  end(data) {
    if (data) this.bytes += Buffer.byteLength(data);
  }
  cork() {}
  uncork() {}
  get writableCorked() {
    return 0;
  }
  on() {}
  off() {}
}

/** One stream, as the gateway relays it: the engine's body arrives in `reads`. */
async function relayOne(res, reads) {
  const replicaState = { ...replica };
  let next = 0;
  const body = {
    [Symbol.asyncIterator]() {
      return {
        next: () =>
          Promise.resolve(
            next < reads.length ? { done: false, value: reads[next++] } : { done: true, value: undefined },
          ),
      };
    },
    destroy() {},
  };
  const signal = new ClientAbort();
  const chunks = engine.readChunks(body, replicaState, signal);
  const first = await chunks.next();
  const normaliser = new ChunkNormaliser(MODEL, 12);
  const result = await relayStream(
    res,
    { first: first.value, rest: { [Symbol.asyncIterator]: () => chunks } },
    normaliser,
    signal,
  );
  if (result.outcome !== 'done') throw new Error(`relay ended ${result.outcome}`);
}

const res = new NullResponse();
for (let i = 0; i < 3000; i++) await relayOne(res, i % 2 ? short.reads : long.reads); // JIT warm-up
if (mode === 'time') {
  const started = process.hrtime.bigint();
  for (let i = 0; i < streams; i++) await relayOne(res, short.reads);
  const ns = Number(process.hrtime.bigint() - started);
  console.log(
    `  CPU per chunk                 ${(ns / (streams * short.chunks) / 1000).toFixed(2)} µs   (per ${short.chunks}-chunk stream ${(ns / streams / 1000).toFixed(1)} µs; wall clock, noisy on a shared machine)`,
  );
  process.exit(0);
}
let gcs = 0;
new PerformanceObserver((list) => (gcs += list.getEntries().length)).observe({ entryTypes: ['gc'] });
/** A GC's entry reaches the observer after a turn of the event loop or more: this waits for it. */
const gcEntriesDelivered = () => new Promise((resolve) => setTimeout(resolve, 50));
/**
 * Heap and Buffer bytes allocated per stream read as `reads`, over `count` streams, which must fit
 * in the young generation: a GC while counting would hide what it collected (warned).
 */
async function allocatedPerStream(reads, count) {
  global.gc();
  await gcEntriesDelivered();
  const gcsBefore = gcs;
  const before = process.memoryUsage();
  for (let i = 0; i < count; i++) await relayOne(res, reads);
  const after = process.memoryUsage();
  await gcEntriesDelivered();
  if (gcs > gcsBefore) console.log(`warning: ${gcs - gcsBefore} GC(s) ran while counting; the figures are low`);
  return {
    heap: (after.heapUsed - before.heapUsed) / count,
    buffers: (after.arrayBuffers - before.arrayBuffers) / count,
  };
}
const perShort = await allocatedPerStream(short.reads, streams);
// A long stream allocates about five times what a short one does: a quarter as many stay in the young generation.
const perLong = await allocatedPerStream(long.reads, Math.ceil(streams / 4));
const marginal = (perLong.heap - perShort.heap) / (long.chunks - short.chunks);
console.log(
  `relay hot path in process: ${streams} streams of ${short.chunks} JSON chunks (${short.bytes.length} bytes) in ${short.reads.length} read(s), then of ${long.chunks}`,
);
console.log(
  `  heap allocated per ${short.chunks}-chunk stream  ${perShort.heap.toFixed(0)} bytes (${(perShort.heap / short.chunks).toFixed(0)} per chunk on average)`,
);
console.log(
  `  heap allocated per extra chunk    ${marginal.toFixed(0)} bytes (the chunk's text is ${((long.bytes.length - short.bytes.length) / (long.chunks - short.chunks)).toFixed(0)} bytes, decoded once and written once)`,
);
console.log(`  Buffers allocated per stream     ${perShort.buffers.toFixed(0)} bytes`);
