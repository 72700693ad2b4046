import { formatRateLimitDuration, INFERENCE_ERROR_CODES, RETRY_HEADERS, type BudgetKind } from '@tollway/contracts';
import { ServiceError } from '@tollway/service-kit';

/** Refusals of admission control: 429 budgets, 402 credit, 429 capacity, 503 when Redis fails. */

function retryHeaders(retryMs: number, shouldRetry: boolean): Record<string, string> {
  const ms = Math.max(1, Math.ceil(retryMs));
  return {
    [RETRY_HEADERS.retryAfter]: String(Math.ceil(ms / 1000)),
    [RETRY_HEADERS.retryAfterMs]: String(ms),
    [RETRY_HEADERS.shouldRetry]: String(shouldRetry),
  };
}

/** 429 `rate_limit_exceeded`, `error.type` = the budget that refused. */
export function rateLimitExceeded(
  kind: BudgetKind,
  budget: number,
  needed: number,
  retryMs: number,
  neverFits: boolean,
): ServiceError {
  const unit = kind === 'requests' ? 'requests' : kind.replace('_', ' ');
  const message = neverFits
    ? `This request needs ${needed} ${unit} but the organization's ${kind} budget is ${budget} per minute, so it ` +
      'can never be admitted. Do not retry it: make the request smaller or ask for a larger budget.'
    : `Rate limit reached for ${kind} (budget ${budget} per minute). ` +
      `Retry in ${formatRateLimitDuration(retryMs)}.`;
  return new ServiceError({
    status: 429,
    type: kind,
    code: INFERENCE_ERROR_CODES.rateLimitExceeded,
    message,
    headers: retryHeaders(retryMs, !neverFits),
  });
}

/** 402 `insufficient_quota`: the organization's credit is used up. */
export function insufficientQuota(): ServiceError {
  return new ServiceError({
    status: 402,
    code: INFERENCE_ERROR_CODES.insufficientQuota,
    message: 'Your organization has run out of credit. Add credit to continue; retrying will not help.',
    headers: { [RETRY_HEADERS.shouldRetry]: 'false' },
  });
}

/** 429 `provider_overloaded`: the model is serving as many requests as its capacity allows. */
export function providerOverloaded(modelId: string, retryMs: number): ServiceError {
  return new ServiceError({
    status: 429,
    code: INFERENCE_ERROR_CODES.providerOverloaded,
    message: `The model '${modelId}' is at capacity. Retry in ${formatRateLimitDuration(retryMs)}.`,
    headers: retryHeaders(retryMs, true),
  });
}

/** 503: admission control could not reach Redis, or Redis did not answer in time; nothing is charged (a late answer is given back: admit-batcher.ts). */
export function admissionUnavailable(cause: unknown): ServiceError {
  return new ServiceError({
    status: 503,
    type: 'server_error',
    code: 'admission_unavailable',
    message: 'Admission control is unavailable. Retry later.',
    headers: retryHeaders(1000, true),
    cause,
  });
}
