import net from 'node:net';
import { Redis } from 'ioredis';
import { readSseFrames, SessionEvent, streamSessionEvents } from '@tollway/contracts';
import { streamKeys } from '../../src/store/event-log-keys';
import { fixtureAgent, waitFor } from '../worker/worker-harness';
import { send, startStreamPlatform, StreamReader, type Got, type StreamPlatform } from './stream-harness';

// What readers cost and what they cannot do: many readers of a session share one read; a reader
// that stops reading is dropped (and resumes by id, missing nothing) while the turn and the other
// readers go on; a broken read connection is made again without losing an event.
jest.setTimeout(90_000);

let platform: StreamPlatform;
let url: string;
let redis: Redis;

beforeAll(async () => {
  platform = await startStreamPlatform({
    workerEnv: { AGENT_MODULE: fixtureAgent('chatty') },
    events: { clientBufferBytes: 64 * 1024, watchTtlMs: 600 },
  });
  url = platform.replicas[0]!.url;
  redis = new Redis('redis://127.0.0.1:6379');
});

afterAll(async () => {
  await platform.close();
  await redis.quit();
});

/** The XREAD calls of replica 0's blocking-read connection, counted from now. */
function countReads(): { reads: number; stop(): void } {
  const reader = platform.replicas[0]!.replica.eventReader!;
  const call = reader.call.bind(reader);
  const counter = {
    reads: 0,
    stop: () => {
      reader.call = call;
    },
  };
  reader.call = ((...args: Parameters<typeof call>) => {
    if (String(args[0]).toUpperCase() === 'XREAD') counter.reads++;
    return call(...args);
  }) as typeof reader.call;
  return counter;
}

/** Replica 0's Redis connections, by name (CLIENT LIST). */
async function replicaConnections(): Promise<string[]> {
  const tag = platform.replicas[0]!.replica.connectionTag;
  return ((await redis.client('LIST')) as string)
    .split('\n')
    .map((line) => /name=(\S*)/.exec(line)?.[1] ?? '')
    .filter((name) => name.startsWith(tag))
    .sort();
}

it('serves a hundred readers of one session from one read: no connection and no read per reader', async () => {
  const sessionId = await platform.createSession();
  const connections = await replicaConnections();
  const readers = await Promise.all(
    Array.from({ length: 100 }, () => StreamReader.open(`${url}/sessions/${sessionId}/events`)),
  );
  const counter = countReads();
  try {
    await send(url, sessionId, 'go', undefined, { user_params: { events: 40, bytes: 100 } });
    const all = await Promise.all(readers.map((reader) => reader.rest()));
    expect(all[0]!.at(-1)!.event.type).toBe('turn.completed');
    expect(all[0]!.filter(({ event }) => event.type === 'agent.event')).toHaveLength(40);
    for (const events of all) expect(events).toEqual(all[0]);
    expect(await replicaConnections()).toEqual(connections);
    // One read per batch of the turn's events, whatever the number of readers.
    expect(counter.reads).toBeGreaterThan(0);
    expect(counter.reads).toBeLessThan(40);
  } finally {
    counter.stop();
  }
});

it('drops a reader that stops reading, while the turn and a reader that reads go on; it resumes by id and misses nothing', async () => {
  const sessionId = await platform.createSession();
  const { port } = new URL(url);
  // A client that sends its request and then never reads a byte.
  const stalled = net.connect(Number(port), '127.0.0.1');
  stalled.pause();
  stalled.write(`GET /sessions/${sessionId}/events HTTP/1.1\r\nHost: x\r\n\r\n`);
  let closedByServer = false;
  stalled.on('close', () => (closedByServer = true));
  stalled.on('error', () => undefined);
  // A reader that reads, through the client that resumes by itself: on a loaded machine this test
  // process may fall behind too, be dropped like the stalled one, and come back.
  const reading = (async () => {
    const events: Got[] = [];
    for await (const got of streamSessionEvents({ baseUrl: url, sessionId })) events.push(got);
    return events;
  })();
  await waitFor(() => platform.replicas[0]!.replica.events!.size === 2);
  // 30 MB of events: far more than the socket buffers and the 64 KiB the server keeps for a client.
  await send(url, sessionId, 'go', undefined, { user_params: { events: 500, bytes: 60_000 } });
  const whole = await reading;
  expect(whole.at(-1)!.event.type).toBe('turn.completed');
  await waitFor(() => platform.replicas[0]!.replica.events!.size === 0, 10_000);
  const session = (await (await fetch(`${url}/sessions/${sessionId}`)).json()) as { status: string };
  expect(session.status).toBe('idle');

  // What the stalled client got before it was cut, then the rest by its last event id.
  const received: Buffer[] = [];
  stalled.on('data', (chunk: Buffer) => received.push(chunk));
  stalled.resume();
  await waitFor(() => closedByServer, 10_000);
  const text = Buffer.concat(received).toString('utf8');
  const body = text.slice(text.indexOf('\r\n\r\n') + 4);
  const got = await parseChunked(body);
  expect(got.events.length).toBeLessThan(whole.length);
  // Resumed through the client that resumes by itself: the rest is 30 MB, read from the log as fast
  // as this process takes it, and on a loaded machine it may fall behind and be dropped again.
  const rest: Got[] = [];
  for await (const event of streamSessionEvents({ baseUrl: url, sessionId, lastEventId: got.lastEventId })) {
    rest.push(event);
  }
  expect([...got.events, ...rest]).toEqual(whole);
});

it('reads on after its read connection is cut, missing nothing', async () => {
  const sessionId = await platform.createSession();
  const reader = await StreamReader.open(`${url}/sessions/${sessionId}/events`);
  const reference = await StreamReader.open(`${platform.replicas[0]!.url}/sessions/${sessionId}/events`);
  await send(url, sessionId, 'go', undefined, { user_params: { events: 200, bytes: 2000 } });
  await reader.until('agent.event');
  const tag = platform.replicas[0]!.replica.connectionTag;
  const line = ((await redis.client('LIST')) as string).split('\n').find((l) => l.includes(`name=${tag}:event-reader`));
  await redis.client('KILL', 'ID', /id=(\d+)/.exec(line!)![1]!);
  const events = await reader.rest();
  expect(events.filter(({ event }) => event.type === 'agent.event')).toHaveLength(200);
  expect(events).toEqual(await reference.rest());
});

it('keeps a session watched while it has a reader, and lets the mark lapse once the last one has gone', async () => {
  const sessionId = await platform.createSession();
  const watch = streamKeys(platform.prefix).watch(sessionId);
  const reader = await StreamReader.open(`${url}/sessions/${sessionId}/events`);
  await new Promise((resolve) => setTimeout(resolve, 1500));
  expect(await redis.pttl(watch)).toBeGreaterThan(0);
  reader.close();
  await waitFor(async () => (await redis.exists(watch)) === 0, 3000);
});

/** Parses an HTTP/1.1 chunked body's SSE frames (the chunk framing removed), and its last event id. */
async function parseChunked(body: string): Promise<{ events: Got[]; lastEventId: string }> {
  let sse = '';
  for (let at = 0; at < body.length;) {
    const lineEnd = body.indexOf('\r\n', at);
    if (lineEnd === -1) break;
    const size = parseInt(body.slice(at, lineEnd), 16);
    if (!(size > 0) || lineEnd + 2 + size > body.length) break;
    sse += body.slice(lineEnd + 2, lineEnd + 2 + size);
    at = lineEnd + 2 + size + 2;
  }
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode(sse));
      controller.close();
    },
  });
  const state = { lastEventId: '', retryMs: undefined };
  const events: Got[] = [];
  for await (const frame of readSseFrames(stream, state)) {
    if (frame.data !== null) events.push({ id: frame.lastEventId, event: SessionEvent.parse(JSON.parse(frame.data)) });
  }
  return { events, lastEventId: state.lastEventId };
}
