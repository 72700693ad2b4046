import http from 'node:http';
import * as fc from 'fast-check';
import { readSseFrames, SessionEvent } from '@tollway/contracts';
import { answerChat } from '../worker/worker-harness';
import { send, sleep, startStreamPlatform, StreamReader, type Got, type StreamPlatform } from './stream-harness';

// A cut connection resumed on the other of two API replicas misses and repeats nothing, wherever
// the cut falls: a property over the byte at which the stream is cut, which replica served it,
// whether the resume id goes in the header or the query, and how long the client stays away.
jest.setTimeout(180_000);

const REPLY = Array.from({ length: 30 }, (_, i) => `piece ${i} of a turn that streams for a while; `).join('');
let platform: StreamPlatform;

beforeAll(async () => {
  // A short flush interval: a turn is then many events, and cuts fall between and inside them.
  platform = await startStreamPlatform({ replicas: 2, workerEnv: { SESSION_EVENTS_FLUSH_MS: '5' } });
  platform.reply = (request, res) => answerChat(request, res, REPLY, 11, { paceMs: 2, pieceChars: 8 });
});

afterAll(() => platform.close());

/**
 * Reads `url`'s stream over a raw connection and cuts it once `cutAt` bytes (at least its first
 * frame) have come; returns the bytes received.
 */
function readThenCut(url: string, cutAt: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const received: Buffer[] = [];
    let length = 0;
    const request = http.get(url, (response) => {
      response.on('data', (chunk: Buffer) => {
        received.push(chunk);
        length += chunk.length;
        const text = Buffer.concat(received).toString('utf8');
        const firstFrame = text.indexOf('\n\n') + 2;
        if (firstFrame > 1 && length >= Math.max(cutAt, firstFrame)) {
          request.destroy();
          resolve(Buffer.concat(received).subarray(0, Math.max(cutAt, firstFrame)));
        }
      });
      response.on('end', () => resolve(Buffer.concat(received)));
    });
    request.on('error', (err) => (request.destroyed ? undefined : reject(err)));
  });
}

/** The events a client parses from the bytes it got (a frame cut in half is not one), and its last event id. */
async function parse(bytes: Buffer): Promise<{ events: Got[]; lastEventId: string }> {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new Uint8Array(bytes));
      controller.close();
    },
  });
  const state = { lastEventId: '', retryMs: undefined };
  const events: Got[] = [];
  for await (const frame of readSseFrames(body, state)) {
    if (frame.data !== null) {
      events.push({ id: frame.lastEventId, event: SessionEvent.parse(JSON.parse(frame.data)) });
    }
  }
  return { events, lastEventId: state.lastEventId };
}

it('resuming on the other replica after a cut at any point gives every event once, in order', async () => {
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.nat({ max: 12_000 }),
      fc.constantFrom(0, 1),
      fc.boolean(),
      fc.constantFrom(0, 50, 400),
      async (cutAt, first, inQuery, awayMs) => {
        runs++;
        const sessionId = await platform.createSession();
        const [a, b] = first === 0 ? platform.replicas : [...platform.replicas].reverse();
        const reference = await StreamReader.open(`${platform.replicas[0]!.url}/sessions/${sessionId}/events`);
        const cut = readThenCut(`${a!.url}/sessions/${sessionId}/events`, cutAt);
        // Both readers are registered before the turn starts: their streams must be the same.
        await sleep(30);
        expect((await send(a!.url, sessionId, 'go')).status).toBe(202);
        const before = await parse(await cut);
        await sleep(awayMs);
        const resumeUrl = `${b!.url}/sessions/${sessionId}/events${inQuery ? `?last_event_id=${before.lastEventId}` : ''}`;
        const resumed = await StreamReader.open(resumeUrl, {
          headers: inQuery ? {} : { 'last-event-id': before.lastEventId },
        });
        expect(resumed.response.status).toBe(200);
        const after = await resumed.rest();
        const whole = await reference.rest();
        expect(whole.at(-1)!.event.type).toBe('turn.completed');
        expect([...before.events, ...after]).toEqual(whole);
      },
    ),
    { numRuns: 14, seed: Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31) },
  );
  expect(runs).toBe(14);
});
