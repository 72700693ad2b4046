import type { Response } from 'express';
import type { SessionEventHub } from '../store/session-event-hub';
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
  const onClose = () => {
    if (!res.writableFinished) waiter.dispose();
  };
  res.once('close', onClose);
  try {
    let record = await deps.store.get(sessionId, org);
    while (record && record.status === 'running') {
      const outcome = await waiter.next(deadline);
      if (outcome === 'disposed') return 'aborted';
      record = await deps.store.get(sessionId, org);
      if (outcome === 'timeout') break;
    }
    return record;
  } finally {
    res.off('close', onClose);
    waiter.dispose();
  }
}
