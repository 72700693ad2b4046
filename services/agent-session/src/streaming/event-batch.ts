import type { SessionEvent } from '@tollway/contracts';

/** An event of a running turn waiting to be written to its session's log. */
export type PendingEvent = Exclude<
  SessionEvent,
  { type: 'turn.completed' | 'turn.failed' | 'turn.cancelled' | 'stream.truncated' }
>;

/** Bounds of a batch. */
export interface EventBatchLimits {
  /** Text one coalesced delta may hold before the next one starts, characters. */
  maxDeltaChars: number;
  /** `agent.event`s held at most; more are dropped (and counted) until some are written. */
  maxCustomEvents: number;
}

/** Defaults: a delta of at most 16 Ki characters; 1 000 custom events waiting. */
export const DEFAULT_BATCH_LIMITS: EventBatchLimits = { maxDeltaChars: 16_384, maxCustomEvents: 1_000 };

/**
 * The events of a turn not yet written, in order. A delta that follows a delta of the same
 * message (or of the same tool call) is merged into it, so however many chunks a model streams
 * between two flushes, or for however long no one reads the session, what waits is one delta per
 * stretch of text: the concatenation of the written deltas is the same text, whatever the batching.
 */
export class EventBatch {
  private events: PendingEvent[] = [];
  private chars = 0;
  private customEvents = 0;
  /** `agent.event`s dropped because too many waited. */
  dropped = 0;

  constructor(private readonly limits: EventBatchLimits = DEFAULT_BATCH_LIMITS) {}

  /** Events waiting. */
  get length(): number {
    return this.events.length;
  }

  /** Characters of delta text waiting (what size-bounds a flush). */
  get textChars(): number {
    return this.chars;
  }

  add(event: PendingEvent): void {
    if (event.type === 'agent.event') {
      if (this.customEvents >= this.limits.maxCustomEvents) {
        this.dropped++;
        return;
      }
      this.customEvents++;
    }
    const text = deltaChars(event);
    this.chars += text;
    const last = this.events.at(-1);
    if (last && text > 0 && deltaChars(last) + text <= this.limits.maxDeltaChars && merge(last, event)) return;
    // A copy: the merges above write into the events held.
    this.events.push({ ...event });
  }

  /** Takes every event waiting, oldest first, leaving the batch empty. */
  take(): PendingEvent[] {
    const taken = this.events;
    this.events = [];
    this.chars = 0;
    this.customEvents = 0;
    return taken;
  }

  /** Puts back events taken but not written, ahead of those added since. */
  restore(taken: PendingEvent[]): void {
    const newer = this.take();
    for (const event of [...taken, ...newer]) this.add(event);
  }
}

/** Events as the log scripts take them: [type, JSON]. */
export function serializeEvents(events: PendingEvent[]): Array<[string, string]> {
  return events.map((event) => [event.type, JSON.stringify(event)]);
}

function deltaChars(event: PendingEvent): number {
  if (event.type === 'message.delta') return (event.content?.length ?? 0) + (event.reasoning_content?.length ?? 0);
  if (event.type === 'tool_call.delta') return event.arguments?.length ?? 0;
  return 0;
}

/** Merges `next` into `last` when both are pieces of the same text; false when they are not. */
function merge(last: PendingEvent, next: PendingEvent): boolean {
  if (last.type === 'message.delta' && next.type === 'message.delta') {
    if (last.message_index !== next.message_index) return false;
    if (next.content !== undefined) last.content = (last.content ?? '') + next.content;
    if (next.reasoning_content !== undefined) {
      last.reasoning_content = (last.reasoning_content ?? '') + next.reasoning_content;
    }
    return true;
  }
  if (last.type === 'tool_call.delta' && next.type === 'tool_call.delta') {
    if (last.message_index !== next.message_index || last.index !== next.index) return false;
    if (next.id !== undefined && last.id !== undefined) return false;
    if (next.id !== undefined) last.id = next.id;
    if (next.name !== undefined) last.name = (last.name ?? '') + next.name;
    if (next.arguments !== undefined) last.arguments = (last.arguments ?? '') + next.arguments;
    return true;
  }
  return false;
}
