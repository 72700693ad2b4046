import type { Span } from '@opentelemetry/api';
import type { ChatCallSink, ChatEndMessage, ChatStartMessage } from '../worker/child-protocol';
import type { WorkerMetrics } from './session-metrics';
import { endChatSpan, type TurnTrace } from './turn-trace';

interface OpenCall {
  model: string;
  startedAt: number;
  span: Span | null;
}

/**
 * The model calls of one turn as its child reports them: a `chat {model}` client span each
 * (under the turn's invoke_agent span) and the client metrics. Calls still open when the turn
 * ends (its child was killed: cancelled, timed out, crashed) are ended by `abandon`, so no span
 * the gateway's server span points at is left unexported.
 */
export class TurnChatCalls implements ChatCallSink {
  private readonly open = new Map<number, OpenCall>();

  constructor(
    private readonly trace: TurnTrace | null,
    private readonly metrics: WorkerMetrics | null,
  ) {}

  started(message: ChatStartMessage): string | undefined {
    const chat = this.trace?.chatStarts(message.model);
    this.open.set(message.callId, { model: message.model, startedAt: performance.now(), span: chat?.span ?? null });
    return chat?.traceparent;
  }

  ended(message: ChatEndMessage): void {
    const call = this.open.get(message.callId);
    if (!call) return;
    this.open.delete(message.callId);
    this.metrics?.chatCallEnded(call.model, message.durationSeconds, message);
    if (call.span) endChatSpan(call.span, message);
  }

  /** Ends the calls still open with `errorType` (the turn's outcome), timed here. */
  abandon(errorType: string): void {
    for (const call of this.open.values()) {
      this.metrics?.chatCallEnded(call.model, (performance.now() - call.startedAt) / 1000, { errorType });
      if (call.span) endChatSpan(call.span, { errorType });
    }
    this.open.clear();
  }
}
