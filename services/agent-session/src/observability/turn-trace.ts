import { SpanKind, type Context, type Span, type Tracer } from '@opentelemetry/api';
import type { AgentTurnJob } from '@tollway/contracts';
import type { ChatCallEnd } from '../agents/gateway-client';
import { MAX_MODEL_LABEL_LENGTH, modelLabelOf } from './model-label';
import { contextFromHeaders, endSpanWithError, GEN_AI_ATTRS, traceparentOf, withSpan } from '@tollway/telemetry';

/**
 * The spans of one turn in the worker: `process agent-turns` (consumer), a child of the API
 * request that queued it through the `traceparent` carried in the job, and under it
 * `invoke_agent` (the GenAI agent span, `gen_ai.conversation.id` = the session id), and under
 * that a `chat {model}` client span per model call, whose `traceparent` the call sends to the
 * gateway. Built only when tracing is on.
 */
export class TurnTrace {
  private readonly span: Span;
  private readonly context: Context;
  private agentSpan: Span | null = null;
  private agentContext: Context | null = null;
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
          'messaging.system': 'tollway',
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
    this.agentContext = withSpan(this.agentSpan, this.context);
    return traceparentOf(this.agentContext);
  }

  /** A model call of the agent begins: its client span (a child of invoke_agent) and the `traceparent` it sends. */
  chatStarts(model: string): { span: Span; traceparent: string | undefined } {
    const parent = this.agentContext ?? this.context;
    // The span name is bounded as the metrics' label is; the attribute keeps what was asked, cut.
    const span = this.tracer.startSpan(
      `chat ${modelLabelOf(model)}`,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          [GEN_AI_ATTRS.operationName]: 'chat',
          [GEN_AI_ATTRS.providerName]: CHAT_PROVIDER,
          [GEN_AI_ATTRS.requestModel]: model.slice(0, MAX_MODEL_LABEL_LENGTH),
        },
      },
      parent,
    );
    return { span, traceparent: traceparentOf(withSpan(span, parent)) };
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

/** `gen_ai.provider.name` of the agent's model calls: they go to the Tollway gateway. */
export const CHAT_PROVIDER = 'tollway';

/** Ends a model call's client span with the response's model, usage and finish reasons, or as failed. */
export function endChatSpan(span: Span, outcome: ChatCallEnd): void {
  if (outcome.responseModel !== undefined) span.setAttribute(GEN_AI_ATTRS.responseModel, outcome.responseModel);
  if (outcome.inputTokens !== undefined) span.setAttribute(GEN_AI_ATTRS.usageInputTokens, outcome.inputTokens);
  if (outcome.outputTokens !== undefined) span.setAttribute(GEN_AI_ATTRS.usageOutputTokens, outcome.outputTokens);
  if (outcome.finishReasons) span.setAttribute(GEN_AI_ATTRS.responseFinishReasons, outcome.finishReasons);
  if (outcome.errorType) endSpanWithError(span, outcome.errorType);
  else span.end();
}
