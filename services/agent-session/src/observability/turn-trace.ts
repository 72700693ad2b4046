import { SpanKind, type Context, type Span, type Tracer } from '@opentelemetry/api';
import type { AgentTurnJob } from '@tollway/contracts';
import { contextFromHeaders, endSpanWithError, GEN_AI_ATTRS, traceparentOf, withSpan } from '@tollway/telemetry';

/**
 * The spans of one turn in the worker: `process agent-turns` (consumer), a child of the API
 * request that queued it through the `traceparent` carried in the job, and under it
 * `invoke_agent` (the GenAI agent span, `gen_ai.conversation.id` = the session id), whose
 * `traceparent` the agent's model calls send to the gateway. Built only when tracing is on.
 */
export class TurnTrace {
  private readonly span: Span;
  private readonly context: Context;
  private agentSpan: Span | null = null;
  /** The trace id the webhook reports. */
  readonly traceId: string;

  constructor(
    private readonly tracer: Tracer,
    job: AgentTurnJob,
  ) {
    const parent = contextFromHeaders({ traceparent: job.traceparent });
    this.span = tracer.startSpan(
      'process agent-turns',
      {
        kind: SpanKind.CONSUMER,
        attributes: {
          'messaging.system': 'bullmq',
          'messaging.operation.type': 'process',
          'messaging.destination.name': 'agent-turns',
          'messaging.message.id': job.turn_id,
        },
      },
      parent,
    );
    this.context = withSpan(this.span, parent);
    this.traceId = this.span.spanContext().traceId;
  }

  /** The agent starts: its span, and the `traceparent` its model calls carry. */
  agentStarts(sessionId: string): string | undefined {
    this.agentSpan = this.tracer.startSpan(
      'invoke_agent',
      {
        kind: SpanKind.INTERNAL,
        attributes: {
          [GEN_AI_ATTRS.operationName]: 'invoke_agent',
          [GEN_AI_ATTRS.conversationId]: sessionId,
          [GEN_AI_ATTRS.providerName]: 'tollway',
        },
      },
      this.context,
    );
    return traceparentOf(withSpan(this.agentSpan, this.context));
  }

  /** The turn ended (`succeeded` ends the spans as OK; anything else marks them as errors). */
  end(outcome: string): void {
    if (!this.span.isRecording()) return;
    if (outcome === 'succeeded' || outcome === 'requeued') {
      this.agentSpan?.end();
      this.span.setAttribute('tollway.turn.outcome', outcome);
      this.span.end();
      return;
    }
    if (this.agentSpan) endSpanWithError(this.agentSpan, outcome);
    endSpanWithError(this.span, outcome);
  }
}
