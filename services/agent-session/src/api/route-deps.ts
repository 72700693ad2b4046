import type { Logger } from '@tollway/service-kit';
import type { SessionEventHub } from '../store/session-event-hub';
import type { OrganizationLimitsSource } from '../store/organization-limits';
import type { SessionStore } from '../store/session-store';
import type { EventReaderHub } from '../streaming/event-reader-hub';
import type { TurnNotifier } from '../webhooks/turn-notifier';

/** What the session and message routes need. */
export interface SessionRouteDeps {
  store: SessionStore;
  hub: SessionEventHub;
  /** Serves the session event streams; null: none (no events route, and every send answers 202). */
  events: EventReaderHub | null;
  /** Each organization's session limits (its record, else the configured defaults). */
  limits: OrganizationLimitsSource;
  /** Sends the cancellation callback of a turn a deletion took out of the queue; null = none sent. */
  notifier: TurnNotifier | null;
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
