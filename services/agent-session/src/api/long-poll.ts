import { onClientGone } from '@tollway/service-kit';
import type { Response } from 'express';
import type { SessionEvent, SessionEventHub } from '../store/session-event-hub';
import type { SessionRecord, SessionStore } from '../store/session-store';

/**
 * Reads a session and, while it is `running`, waits for its turn to end: until a session event
 * (any replica, through the hub), `deadline` (Unix ms; null = no limit), or the client leaving.
 * The waiter is registered before the first read, so an end that lands in between is not lost.
 * Resolves the session as last read (null = gone), or `aborted` when the client disconnected.
 */
export async function readSessionWaiting(
  deps: { store: SessionStore; hub: SessionEventHub },
  res: Response,
  sessionId: string,
  org: string | null,
  deadline: number | null,
): Promise<SessionRecord | null | 'aborted'> {
  const waiter = deps.hub.register(sessionId);
  const stopListening = onClientGone(res, () => waiter.dispose());
  try {
    // Registers this replica on the session while it runs, so the turn's end is sent here. A turn
    // this replica started (and registered on) and has not seen end needs no read at all; nor does
    // one whose end just arrived here (the end overtook this long-poll: see recentEnd); one it saw
    // end longer ago needs a plain read, and the registering one only if a turn started elsewhere since.
    const read = () => deps.store.getWatched(sessionId, org, deps.hub.replicaId);
    const known = deps.hub.runningTurn(sessionId, org);
    const end = known ? null : deps.hub.recentEnd(sessionId, org);
    let record: SessionRecord | null;
    if (known) record = { sessionId, status: 'running', org, turnId: known, response: null, error: null };
    else if (end && isEnd(end)) record = recordFromEvent(end, org);
    else if (deps.hub.endedHere(sessionId, org)) {
      record = await deps.store.get(sessionId, org);
      if (record?.status === 'running') record = await read();
    } else record = await read();
    while (record && record.status === 'running') {
      const outcome = await waiter.next(deadline);
      if (outcome === 'disposed') return 'aborted';
      // The end of the very turn we saw running carries its outcome: no second read is needed
      // (the first read checked the org). Anything else (deletion, reconnect) is re-read.
      const event = outcome === 'event' ? waiter.lastEvent() : null;
      record = event && isEnd(event) && event.turn_id === record.turnId ? recordFromEvent(event, org) : await read();
      if (outcome === 'timeout') break;
    }
    return record;
  } finally {
    stopListening();
    waiter.dispose();
  }
}

function isEnd(event: SessionEvent): event is SessionEvent & { status: 'idle' | 'error' } {
  return event.status === 'idle' || event.status === 'error';
}

function recordFromEvent(event: SessionEvent & { status: 'idle' | 'error' }, org: string | null): SessionRecord {
  return {
    sessionId: event.session_id,
    status: event.status,
    org,
    turnId: null,
    response: event.response ? (JSON.parse(event.response) as SessionRecord['response']) : null,
    error: event.status === 'error' ? (event.error ?? null) : null,
  };
}
