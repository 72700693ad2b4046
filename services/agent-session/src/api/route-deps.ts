import type { AgentTurnJob } from '@tollway/contracts';
import type { Logger } from '@tollway/service-kit';
import type { SessionEventHub } from '../store/session-event-hub';
import type { SessionStore } from '../store/session-store';
import type { EventReaderHub } from '../streaming/event-reader-hub';

/** Hands an accepted turn to the workers; rejects when the queue is unreachable. */
export interface TurnQueue {
  enqueue(job: AgentTurnJob): Promise<void>;
  /** Resolves when the queue can take jobs: started, its connection answering (`/readyz`); absent: assumed. */
  check?(): Promise<void>;
}

/** What the session and message routes need. */
export interface SessionRouteDeps {
  store: SessionStore;
  hub: SessionEventHub;
  /** Serves the session event streams; null: none (no events route, and every send answers 202). */
  events: EventReaderHub | null;
  turnQueue: TurnQueue;
  logger: Logger;
  /** Session cap (`--max-sessions`). */
  maxSessions: number;
  /** Largest history of a session, bytes of its messages as JSON (`--max-history-bytes`). */
  maxHistoryBytes: number;
  /** `--allow-custom-ids`: PUT /sessions/{id} is enabled. */
  allowCustomIds: boolean;
  /** Unix ms; injectable for tests. */
  clock: () => number;
}
