/**
 * Names of the OpenTelemetry GenAI semantic conventions, v1.37.0 (status: Development), as this
 * code base uses them. Prometheus form follows the OpenTelemetry-to-Prometheus compatibility rules:
 * dots become underscores, a unit in seconds adds `_seconds`, a `{token}` annotation adds nothing,
 * counters add `_total`; histograms expose `_bucket`, `_sum` and `_count`.
 */
export const GEN_AI_SEMCONV_VERSION = '1.37.0';

/** Metric names: the OpenTelemetry name and its Prometheus form. */
export const GEN_AI_METRICS = {
  serverRequestDuration: {
    otel: 'gen_ai.server.request.duration',
    prometheus: 'gen_ai_server_request_duration_seconds',
  },
  serverTimeToFirstToken: {
    otel: 'gen_ai.server.time_to_first_token',
    prometheus: 'gen_ai_server_time_to_first_token_seconds',
  },
  serverTimePerOutputToken: {
    otel: 'gen_ai.server.time_per_output_token',
    prometheus: 'gen_ai_server_time_per_output_token_seconds',
  },
  clientTokenUsage: { otel: 'gen_ai.client.token.usage', prometheus: 'gen_ai_client_token_usage' },
  clientOperationDuration: {
    otel: 'gen_ai.client.operation.duration',
    prometheus: 'gen_ai_client_operation_duration_seconds',
  },
} as const;

/** Attribute names, as span attributes (dotted) and as Prometheus labels (underscored). */
export const GEN_AI_ATTRS = {
  operationName: 'gen_ai.operation.name',
  providerName: 'gen_ai.provider.name',
  requestModel: 'gen_ai.request.model',
  responseModel: 'gen_ai.response.model',
  tokenType: 'gen_ai.token.type',
  conversationId: 'gen_ai.conversation.id',
  agentName: 'gen_ai.agent.name',
  usageInputTokens: 'gen_ai.usage.input_tokens',
  usageOutputTokens: 'gen_ai.usage.output_tokens',
  responseFinishReasons: 'gen_ai.response.finish_reasons',
  responseId: 'gen_ai.response.id',
  errorType: 'error.type',
} as const;

/** The Prometheus label of an attribute: dots become underscores. */
export function promLabel(attribute: string): string {
  return attribute.replaceAll('.', '_');
}

/** Prometheus label names of the GenAI attributes used as metric labels. */
export const GEN_AI_LABELS = {
  operationName: promLabel(GEN_AI_ATTRS.operationName),
  providerName: promLabel(GEN_AI_ATTRS.providerName),
  requestModel: promLabel(GEN_AI_ATTRS.requestModel),
  responseModel: promLabel(GEN_AI_ATTRS.responseModel),
  tokenType: promLabel(GEN_AI_ATTRS.tokenType),
  errorType: promLabel(GEN_AI_ATTRS.errorType),
} as const;

/** Bucket boundaries the conventions advise (explicit bucket boundaries of each metric). */
export const GEN_AI_BUCKETS = {
  /** gen_ai.client.token.usage, in tokens. */
  tokens: [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864],
  /** gen_ai.client.operation.duration and gen_ai.server.request.duration, in seconds. */
  duration: [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92],
  /** gen_ai.server.time_to_first_token, in seconds. */
  timeToFirstToken: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0],
  /** gen_ai.server.time_per_output_token, in seconds. */
  timePerOutputToken: [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5],
} as const;
