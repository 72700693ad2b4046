import { isTurnEndEvent, SESSION_EVENT_ID, SessionEvent } from '@tollway/contracts';

/** The start of a session event stream as a client read it (it may have closed it mid-way). */
export interface SessionStreamStart {
  /** The de-chunked body received: the frames up to its last blank line are judged. */
  body: string;
  /** The client closed the stream before it ended (the body may stop inside a frame). */
  cut: boolean;
  /** A send answered as a stream: its first event is the turn's start. */
  send: boolean;
}

/**
 * The first rule a session event stream breaks, in words, or null: it opens with `retry:` (and
 * at most an `id:`); every other frame is a comment, or one event with an `event:` type, one
 * `data:` line holding a SessionEvent of that type, and an `id:` (none for `stream.truncated`)
 * greater than the one before; nothing follows an ending event unless the stream follows the
 * session; a send's stream starts with its turn's `turn.started`.
 */
export function sessionStreamRuleBreak({ body, cut, send }: SessionStreamStart): string | null {
  const end = body.lastIndexOf('\n\n');
  if (!cut && end !== body.length - 2) return 'the stream ended inside a frame';
  const frames = end === -1 ? [] : body.slice(0, end).split('\n\n');
  const [opening, ...rest] = frames;
  if (opening !== undefined && !/^retry: \d+(\nid: \d+-\d+)?$/.test(opening)) {
    return `the first frame is not retry: (and an id): ${quote(opening)}`;
  }
  let lastId: [bigint, bigint] | null = null;
  let ended = false;
  let first = true;
  for (const frame of rest) {
    const lines = frame.split('\n');
    if (lines.every((line) => line.startsWith(':'))) continue;
    const fields = new Map<string, string[]>();
    for (const line of lines) {
      const colon = line.indexOf(': ');
      if (colon === -1) return `a line that is not a field: ${quote(line)}`;
      const name = line.slice(0, colon);
      if (!['id', 'event', 'data'].includes(name)) return `an unexpected field ${quote(name)}`;
      fields.set(name, [...(fields.get(name) ?? []), line.slice(colon + 2)]);
    }
    const [type] = fields.get('event') ?? [];
    const data = fields.get('data') ?? [];
    if (type === undefined || data.length !== 1) return `an event without one type and one data line: ${quote(frame)}`;
    let event: SessionEvent;
    try {
      const parsed = SessionEvent.safeParse(JSON.parse(data[0] as string));
      if (!parsed.success)
        return `data that is not a SessionEvent (${parsed.error.issues[0]?.message}): ${quote(frame)}`;
      event = parsed.data;
    } catch {
      return `data that is not JSON: ${quote(frame)}`;
    }
    if (event.type !== type) return `event: ${type} carries a ${event.type}`;
    if (ended) return `an event after the turn's ending event: ${quote(frame)}`;
    if (send && first && event.type !== 'turn.started') return `a send's stream starts with ${event.type}`;
    first = false;
    const ids = fields.get('id') ?? [];
    if (event.type === 'stream.truncated') {
      if (ids.length > 0) return 'a stream.truncated event with an id';
      continue;
    }
    const id = ids[0];
    if (ids.length !== 1 || id === undefined || !SESSION_EVENT_ID.test(id))
      return `an event without one id: ${quote(frame)}`;
    const pair = id.split('-').map(BigInt) as [bigint, bigint];
    if (lastId && (pair[0] < lastId[0] || (pair[0] === lastId[0] && pair[1] <= lastId[1]))) {
      return `id ${id} does not come after the one before`;
    }
    lastId = pair;
    if (event.type === 'turn.cancelled' || (send && isTurnEndEvent(event))) ended = true;
  }
  return null;
}

function quote(text: string): string {
  return JSON.stringify(text.length > 200 ? `${text.slice(0, 200)}…` : text);
}
