import { z } from 'zod';

/** Error codes the gateway writes into the service envelope (`error.code`). */
export const INFERENCE_ERROR_CODES = {
  invalidJson: 'invalid_json',
  modelRequired: 'model_required',
  requestTooLarge: 'request_too_large',
  insufficientQuota: 'insufficient_quota',
  modelNotFound: 'model_not_found',
  rateLimitExceeded: 'rate_limit_exceeded',
  providerOverloaded: 'provider_overloaded',
} as const;
export type InferenceErrorCode = (typeof INFERENCE_ERROR_CODES)[keyof typeof INFERENCE_ERROR_CODES];

/** The three per-minute budgets of an organization; a 429 names the one that refused in `error.type`. */
export const BUDGET_KINDS = ['requests', 'input_tokens', 'output_tokens'] as const;
export const BudgetKind = z.enum(BUDGET_KINDS);
export type BudgetKind = z.infer<typeof BudgetKind>;

/** The general `error.type`. */
export const INVALID_REQUEST_ERROR = 'invalid_request_error';

/** The service envelope: `{ error: { message, type, param, code } }`. `code` is absent on 401. */
export const ErrorResponse = z.object({
  error: z.object({
    message: z.string(),
    type: z.string(),
    param: z.string().nullish(),
    code: z.string().nullish(),
  }),
});
export type ErrorResponse = z.infer<typeof ErrorResponse>;

/** Engine passthrough, flat and not wrapped: vLLM's validation error shape with an integer `code`. */
export const EngineErrorResponse = z.object({
  object: z.literal('error'),
  message: z.string(),
  type: z.string(),
  param: z.string().nullish(),
  code: z.number().int(),
});
export type EngineErrorResponse = z.infer<typeof EngineErrorResponse>;

/** `type` the gateway uses when it answers a validation failure in the engine's flat shape. */
export const ENGINE_BAD_REQUEST_TYPE = 'BadRequestError';
