import type { ServerResponse } from 'node:http';
import { SpanKind, type Context, type Span, type Tracer } from '@opentelemetry/api';
import type { ChatCompletionResponse } from '@tollway/contracts';
import { CLIENT_GONE, ServiceError, statusLogged, type AccessLogSink } from '@tollway/service-kit';
import {
  contextFromHeaders,
  endSpanWithError,
  GEN_AI_ATTRS,
  traceIdOf,
  traceparentOf,
  withSpan,
} from '@tollway/telemetry';
import type { IncomingHttpHeaders } from 'node:http';
import type { AdmissionTicket, Principal, SettledUsage } from '../admission/admission.types';
import type { CatalogModel } from '../catalog/catalog.schema';
import type { EngineCall } from '../engines/engine.types';
import type { AdmissionOutcome, GatewayMetrics, ModelMetrics } from './gateway-metrics';

/** What observing chat requests needs; each part is null when turned off. */
export interface GatewayTelemetry {
  metrics: GatewayMetrics | null;
  tracer: Tracer | null;
  /** Where the access log lines go; null = no access log. */
  accessLog: AccessLogSink | null;
}

/** True when any part of the telemetry is on (else the request path skips observation entirely). */
export function telemetryOn(telemetry: GatewayTelemetry | undefined): telemetry is GatewayTelemetry {
  return !!telemetry && (!!telemetry.metrics || !!telemetry.tracer || !!telemetry.accessLog);
}

/**
 * One chat request as metrics, trace and access log see it, from its arrival to its last byte.
 * Created only when some telemetry is on; each hook is a few field writes, and the metrics are
 * recorded once, in `finish`, on the model's pre-resolved children.
 */
export class ChatObservation {
  private readonly startedAt = performance.now();
  private model: ModelMetrics | null = null;
  private modelId: string | null = null;
  private orgId: string | null = null;
  private firstChunkAt = 0;
  private usage: SettledUsage | null = null;
  private stream = false;
  private finishReasons: string[] | null = null;
  private gone = false;
  private span: Span | null = null;
  private context: Context | null = null;
  private engineSpan: Span | null = null;

  constructor(
    private readonly telemetry: GatewayTelemetry,
    private readonly requestId: string,
    headers: IncomingHttpHeaders,
  ) {
    const tracer = telemetry.tracer;
    if (tracer) {
      const parent = contextFromHeaders(headers);
      this.span = tracer.startSpan(
        'chat',
        { kind: SpanKind.SERVER, attributes: { [GEN_AI_ATTRS.operationName]: 'chat' } },
        parent,
      );
      this.context = withSpan(this.span, parent);
    }
  }

  /** The caller is known. */
  authenticated(principal: Principal): void {
    this.orgId = principal.orgId;
  }

  /** The model is known (validation passed). */
  modelChosen(model: CatalogModel, stream: boolean): void {
    this.modelId = model.id;
    this.stream = stream;
    if (this.telemetry.metrics) this.model = this.telemetry.metrics.forModel(model.id, model.engine.kind);
    if (this.span) {
      this.span.updateName(`chat ${model.id}`);
      this.span.setAttribute(GEN_AI_ATTRS.requestModel, model.id);
      this.span.setAttribute(GEN_AI_ATTRS.providerName, model.engine.kind);
    }
  }

  /** Awaits the admission decision, counting its outcome and tracing it as a child span. */
  async admission(decision: Promise<AdmissionTicket>): Promise<AdmissionTicket> {
    const span = this.span && this.telemetry.tracer!.startSpan('admission', { kind: SpanKind.INTERNAL }, this.context!);
    try {
      const ticket = await decision;
      this.telemetry.metrics?.admission('admitted');
      span?.end();
      return ticket;
    } catch (err) {
      const outcome = refusalOutcome(err);
      if (outcome) this.telemetry.metrics?.admission(outcome);
      if (span) endSpanWithError(span, outcome ?? errorTypeOf(err, 500));
      throw err;
    }
  }

  /** The engine call starts: its span, and the `traceparent` the engine receives. */
  engineCallStarts(call: EngineCall, engineKind: string): void {
    if (!this.span) return;
    this.engineSpan = this.telemetry.tracer!.startSpan(
      `chat ${call.request.model}`,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          [GEN_AI_ATTRS.operationName]: 'chat',
          [GEN_AI_ATTRS.providerName]: engineKind,
          [GEN_AI_ATTRS.requestModel]: call.request.model,
        },
      },
      this.context!,
    );
    call.traceparent = traceparentOf(withSpan(this.engineSpan, this.context!));
  }

  /** The first chunk of a stream is ready to be written. */
  firstChunk(): void {
    this.firstChunkAt = performance.now();
    if (this.telemetry.metrics) this.telemetry.metrics.sseStreamsOpen++;
  }

  /**
   * The client went away before its answer was complete: the request is counted, logged and
   * traced as failed with `error_type` `client_gone` (never as a success nobody received), and a
   * cut stream records no time per token.
   */
  clientGone(): void {
    this.gone = true;
  }

  /** The usage the request was settled with. */
  settled(usage: SettledUsage): void {
    this.usage = usage;
  }

  /** A whole (non-streamed) completion was sent: its finish reasons go on the span. */
  finished(completion: ChatCompletionResponse): void {
    if (this.span) this.finishReasons = completion.choices.map((choice) => choice.finish_reason ?? 'null');
  }

  /**
   * The response is complete (or failed with `err`): records the metrics, ends the spans and
   * writes the access log line.
   */
  finish(res: ServerResponse, err?: unknown): void {
    const now = performance.now();
    // Called after the error writer, so the status is the one the client got (499 if it left first).
    const status = statusLogged(res);
    const failed = status >= 400 || this.gone;
    const errorType = this.gone ? CLIENT_GONE : failed ? errorTypeOf(err, status) : '';
    if (status === 401) this.telemetry.metrics?.admission('unauthorized');
    if (this.firstChunkAt > 0 && this.telemetry.metrics) this.telemetry.metrics.sseStreamsOpen--;
    const model = this.model;
    const usage = this.usage;
    const seconds = (now - this.startedAt) / 1000;
    if (model) {
      (failed ? model.failed(errorType) : model.requestDuration).observe(seconds);
      if (usage) {
        model.inputTokens.observe(usage.prompt_tokens);
        model.outputTokens.observe(usage.completion_tokens);
      }
      if (!failed && this.firstChunkAt > 0) {
        model.timeToFirstToken.observe((this.firstChunkAt - this.startedAt) / 1000);
        if (usage && usage.completion_tokens > 1) {
          model.timePerOutputToken.observe((now - this.firstChunkAt) / 1000 / (usage.completion_tokens - 1));
        }
      }
    }
    if (this.span) this.endSpans(failed, errorType, status, usage);
    this.telemetry.accessLog?.info('request', {
      request_id: this.requestId,
      trace_id: this.context ? traceIdOf(this.context) : undefined,
      method: 'POST',
      path: '/v1/chat/completions',
      org_id: this.orgId,
      model: this.modelId,
      stream: this.stream,
      status,
      duration_ms: Math.round((now - this.startedAt) * 1000) / 1000,
      input_tokens: usage?.prompt_tokens,
      output_tokens: usage?.completion_tokens,
      error_type: failed ? errorType : undefined,
    });
  }

  private endSpans(failed: boolean, errorType: string, status: number, usage: SettledUsage | null): void {
    const span = this.span!;
    span.setAttribute('http.response.status_code', status);
    if (this.modelId) span.setAttribute(GEN_AI_ATTRS.responseModel, this.modelId);
    if (usage) {
      span.setAttribute(GEN_AI_ATTRS.usageInputTokens, usage.prompt_tokens);
      span.setAttribute(GEN_AI_ATTRS.usageOutputTokens, usage.completion_tokens);
      this.engineSpan?.setAttribute(GEN_AI_ATTRS.usageInputTokens, usage.prompt_tokens);
      this.engineSpan?.setAttribute(GEN_AI_ATTRS.usageOutputTokens, usage.completion_tokens);
    }
    if (this.finishReasons) span.setAttribute(GEN_AI_ATTRS.responseFinishReasons, this.finishReasons);
    if (failed) {
      if (this.engineSpan) endSpanWithError(this.engineSpan, errorType);
      endSpanWithError(span, errorType);
    } else {
      this.engineSpan?.end();
      span.end();
    }
  }
}

/** The admission outcome a refusal stands for; null for a failure that is no refusal (Redis down). */
function refusalOutcome(err: unknown): AdmissionOutcome | null {
  if (!(err instanceof ServiceError)) return null;
  if (err.code === 'rate_limit_exceeded') {
    return err.type === 'requests' || err.type === 'input_tokens' || err.type === 'output_tokens' ? err.type : null;
  }
  if (err.code === 'insufficient_quota' || err.code === 'provider_overloaded') return err.code;
  return null;
}

/** `error.type`: the error's code when it has one (bounded: the gateway's own table), else the status. */
function errorTypeOf(err: unknown, status: number): string {
  if (err instanceof ServiceError && typeof err.code === 'string') return err.code;
  return String(status);
}
