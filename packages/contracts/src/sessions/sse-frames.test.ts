import { readSseFrames, type SseFrame, type SseReaderState } from './sse-frames';

/** A body that delivers `chunks` as they are split (each a separate read). */
function body(chunks: Array<string | Uint8Array>): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(typeof chunk === 'string' ? encoder.encode(chunk) : chunk);
      controller.close();
    },
  });
}

async function frames(
  chunks: Array<string | Uint8Array>,
  state: SseReaderState = { lastEventId: '', retryMs: undefined },
) {
  const out: SseFrame[] = [];
  for await (const frame of readSseFrames(body(chunks), state)) out.push(frame);
  return { out, state };
}

describe('readSseFrames (the WHATWG event-stream rules)', () => {
  it('reads events with their type, data lines joined, and the id kept across frames', async () => {
    const { out, state } = await frames(['id: 1-0\nevent: a\ndata: x\ndata: y\n\n', 'data: z\n\n']);
    expect(out).toEqual([
      { lastEventId: '1-0', type: 'a', data: 'x\ny' },
      { lastEventId: '1-0', type: 'message', data: 'z' },
    ]);
    expect(state.lastEventId).toBe('1-0');
  });

  it('yields an id-only frame, which moves the last event id as EventSource does', async () => {
    const { out, state } = await frames(['retry: 1000\nid: 7-3\n\n', ': keep-alive\n\n'], {
      lastEventId: '1-0',
      retryMs: undefined,
    });
    expect(out).toEqual([{ lastEventId: '7-3', type: null, data: null }]);
    expect(state).toEqual({ lastEventId: '7-3', retryMs: 1000 });
  });

  it('takes LF, CRLF and CR line ends, a CRLF split between two reads, and a leading byte order mark', async () => {
    const { out } = await frames(['\ufeffdata: a\r', '\n\r\ndata: b\r\rdata: c\n\n']);
    expect(out.map((frame) => frame.data)).toEqual(['a', 'b', 'c']);
  });

  it('puts a UTF-8 character split between two reads back together', async () => {
    const bytes = new TextEncoder().encode('data: ✓ done\n\n');
    const { out } = await frames([bytes.subarray(0, 8), bytes.subarray(8)]);
    expect(out[0]!.data).toBe('✓ done');
  });

  it('ignores comments, unknown fields, an id holding NUL, a bad retry, and a frame the stream ends inside', async () => {
    const { out, state } = await frames([': hello\nfoo: bar\nid: a\0b\nretry: soon\ndata: kept\n\n', 'data: cut']);
    expect(out).toEqual([{ lastEventId: '', type: 'message', data: 'kept' }]);
    expect(state.retryMs).toBeUndefined();
  });

  it('takes a field without a colon as an empty value, and strips one space only', async () => {
    const { out } = await frames(['data\ndata:  two\n\n']);
    expect(out[0]!.data).toBe('\n two');
  });
});
