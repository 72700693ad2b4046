import { SESSION_EVENT_BOUNDS } from '@tollway/contracts';
import type { AgentEvents, AgentStreamEvent } from './agent.types';

/**
 * The `ctx.events` of one turn in its agent process. Events are gathered and handed to `send` in
 * one batch per turn of the event loop (a model streams many small chunks; one IPC message each
 * would cost more than the chunk), and `flush()` hands over what is left before the turn's result.
 */
export class AgentEventEmitter implements AgentEvents {
  private message = -1;
  private batch: AgentStreamEvent[] = [];
  private scheduled = false;
  private closed = false;

  constructor(
    private readonly send: (events: AgentStreamEvent[]) => void,
    private isLive = false,
  ) {}

  get live(): boolean {
    return this.isLive;
  }

  /** The session got a reader: from now on model calls are worth streaming. */
  goLive(): void {
    this.isLive = true;
  }

  startMessage(): number {
    return ++this.message;
  }

  delta(delta: { content?: string; reasoning_content?: string }): void {
    const event: AgentStreamEvent = { type: 'message.delta', message_index: this.current() };
    if (typeof delta.content === 'string' && delta.content !== '') event.content = delta.content;
    if (typeof delta.reasoning_content === 'string' && delta.reasoning_content !== '') {
      event.reasoning_content = delta.reasoning_content;
    }
    if (event.content !== undefined || event.reasoning_content !== undefined) this.push(event);
  }

  toolCallDelta(delta: { index: number; id?: string; name?: string; arguments?: string }): void {
    if (!Number.isInteger(delta.index) || delta.index < 0)
      throw new TypeError('tool call index must be an integer ≥ 0');
    const event: AgentStreamEvent = { type: 'tool_call.delta', message_index: this.current(), index: delta.index };
    if (typeof delta.id === 'string') event.id = delta.id;
    if (typeof delta.name === 'string') event.name = delta.name;
    if (typeof delta.arguments === 'string' && delta.arguments !== '') event.arguments = delta.arguments;
    this.push(event);
  }

  toolResult(result: { tool_call_id: string; content: string | null }): void {
    this.push({ type: 'tool.result', tool_call_id: String(result.tool_call_id), content: result.content ?? null });
  }

  emit(name: string, data: unknown = null): void {
    if (typeof name !== 'string' || name.length === 0 || name.length > SESSION_EVENT_BOUNDS.nameMaxLength) {
      throw new TypeError(`an event name must be 1 to ${SESSION_EVENT_BOUNDS.nameMaxLength} characters`);
    }
    const json = JSON.stringify(data);
    if (json === undefined) throw new TypeError('event data must be a JSON value');
    if (Buffer.byteLength(json) > SESSION_EVENT_BOUNDS.dataMaxJsonBytes) {
      throw new TypeError(`event data must be at most ${SESSION_EVENT_BOUNDS.dataMaxJsonBytes} bytes as JSON`);
    }
    // A copy through JSON: what readers get is what the agent passed, as JSON would carry it.
    this.push({ type: 'agent.event', name, data: JSON.parse(json) as unknown });
  }

  /** Hands over the events gathered and stops taking more (the turn is over). */
  flush(): void {
    this.closed = true;
    this.sendBatch();
  }

  private current(): number {
    return Math.max(this.message, 0);
  }

  private push(event: AgentStreamEvent): void {
    if (this.closed) return;
    this.batch.push(event);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.sendBatch());
  }

  private sendBatch(): void {
    this.scheduled = false;
    if (this.batch.length === 0) return;
    const events = this.batch;
    this.batch = [];
    this.send(events);
  }
}
