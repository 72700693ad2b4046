import type { ChatMessage, TraceMetrics, WebhookPayload, WebhookSpec } from '@tollway/contracts';
import type { StoredMessage } from '../store/session-store';

export { TURN_CANCELLED_ERROR } from '../domain/turn-errors';

/** How a turn ended, for its webhook. */
export type TurnEnd = { kind: 'success'; response: ChatMessage } | { kind: 'error'; error: string };

/** What the webhook payload is built from. */
export interface TurnReport {
  sessionId: string;
  end: TurnEnd;
  /** The history after the turn (sent only when `include_messages`); null when unknown. */
  history: StoredMessage[] | null;
  /** Wall-clock milliseconds the turn took. */
  durationMs: number;
  /** Tokens of all model calls of the turn. */
  totalTokens: number;
  /** Id of the turn's OpenTelemetry trace (32 hex digits); null or absent when tracing is off. */
  traceId?: string | null;
}

/**
 * The spec's WebhookPayload: `idle` + response on success, `error` + error otherwise; `messages`
 * only with `include_messages`; `trace_metrics` only when tracing is on.
 */
export function buildWebhookPayload(spec: WebhookSpec, report: TurnReport, tracingEnabled: boolean): WebhookPayload {
  const success = report.end.kind === 'success';
  const traceMetrics = tracingEnabled ? traceMetricsOf(report) : null;
  return {
    session_id: report.sessionId,
    status: success ? 'idle' : 'error',
    response: report.end.kind === 'success' ? report.end.response : null,
    error: report.end.kind === 'error' ? report.end.error : null,
    messages: spec.include_messages ? (report.history ?? []) : null,
    trace_metrics: traceMetrics,
  };
}

/** The turn's TraceMetrics (its webhook's with tracing on, and its ending event's). */
export function traceMetricsOf(
  report: Pick<TurnReport, 'end' | 'durationMs' | 'totalTokens' | 'traceId'>,
): TraceMetrics {
  return {
    trace_id: report.traceId ?? null,
    total_duration: report.durationMs / 1000,
    total_tokens: report.totalTokens,
    has_error: report.end.kind !== 'success',
  };
}
