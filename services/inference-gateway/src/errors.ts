import { ENGINE_BAD_REQUEST_TYPE, INFERENCE_ERROR_CODES, OrganizationId, WIRE_BOUNDS } from '@tollway/contracts';
import { ServiceError } from '@tollway/service-kit';

/**
 * The gateway's error table. Every non-200 the gateway itself decides is built here, so each
 * status, code and message lives in one place; the service's errorMiddleware writes them.
 * Engine errors the client gets as the engine wrote them are not here (engines/engine-error.ts
 * decides which they are, and turns the others into the errors below).
 */

/** 401: missing, malformed, unknown or revoked key. The spec wants no `code` field at all. */
export function invalidApiKey(): ServiceError {
  return new ServiceError({
    status: 401,
    message: 'Invalid API key provided. Send "Authorization: Bearer <API_KEY>".',
  });
}

/**
 * 401 for a key that cannot act for the organization a request names in `x-tollway-organization`:
 * a service key without the header (it belongs to no organization), any other key naming an
 * organization not its own. The id is quoted only when it is a well-formed organization id.
 */
export function cannotActForOrganization(organization: string | undefined): ServiceError {
  const named =
    organization === undefined
      ? 'A service key acts for an organization: name it in the x-tollway-organization header.'
      : OrganizationId.safeParse(organization).success
        ? `Invalid API key for organization '${organization}': this key cannot act for it.`
        : 'Invalid x-tollway-organization header: not an organization id (1-64 letters, digits, _ or -).';
  return new ServiceError({ status: 401, message: named });
}

/** 401 for a service key acting for an organization that does not exist (or no longer does). */
export function unknownOrganization(orgId: string): ServiceError {
  return new ServiceError({
    status: 401,
    message: `Invalid API key for organization '${orgId}': there is no such organization.`,
  });
}

/**
 * 503 `service_unavailable`: Redis (organizations, keys, usage) did not answer in time or cannot
 * be reached; the admin API and the console answer this instead of a 500. Retry in a second: a
 * write may have been applied (send a credit top-up with its `Idempotency-Key` again).
 */
export function accountStoreUnavailable(cause: unknown): ServiceError {
  return new ServiceError({
    status: 503,
    type: 'server_error',
    code: 'service_unavailable',
    message: 'The account store (Redis) is unavailable. Retry later.',
    headers: { 'retry-after': '1', 'retry-after-ms': '1000', 'x-should-retry': 'true' },
    cause,
  });
}

/** 400 `model_required`: the body has no `model`. */
export function modelRequired(): ServiceError {
  return new ServiceError({
    status: 400,
    code: INFERENCE_ERROR_CODES.modelRequired,
    param: 'model',
    message: 'You must provide a model parameter.',
  });
}

/** 400 `invalid_json`: the body parses but is not a JSON object. */
export function bodyNotObject(): ServiceError {
  return new ServiceError({
    status: 400,
    code: INFERENCE_ERROR_CODES.invalidJson,
    message: 'The request body must be a JSON object.',
  });
}

/** 404 `model_not_found`, quoting the requested id; `param` is null as the spec says. */
export function modelNotFound(modelId: string): ServiceError {
  return new ServiceError({
    status: 404,
    code: INFERENCE_ERROR_CODES.modelNotFound,
    param: null,
    message: `The model '${truncate(modelId)}' does not exist or you do not have access to it.`,
  });
}

/** 404 for paths the API does not implement; the spec uses the model-not-found row for these too. */
export function endpointNotFound(method: string, path: string): ServiceError {
  return new ServiceError({
    status: 404,
    code: INFERENCE_ERROR_CODES.modelNotFound,
    param: null,
    message: `Unknown endpoint '${method} ${truncate(path)}'. This service implements GET /v1/models, GET /v1/models/{author}/{slug} and POST /v1/chat/completions.`,
  });
}

/** 502: no replica of the model's engine could be reached (after the one retry). */
export function engineUnavailable(modelId: string, cause: unknown): ServiceError {
  return new ServiceError({
    status: 502,
    type: 'server_error',
    code: 'engine_unavailable',
    message: `No engine serving '${modelId}' could be reached. Retry later.`,
    cause,
  });
}

/** 504: the engine did not answer within UPSTREAM_TIMEOUT_MS. */
export function upstreamTimeout(modelId: string, timeoutMs: number, cause: unknown): ServiceError {
  return new ServiceError({
    status: 504,
    type: 'server_error',
    code: 'upstream_timeout',
    message: `The engine serving '${modelId}' did not answer within ${timeoutMs} ms.`,
    cause,
  });
}

/** 502: the engine answered 200 with something that is not a chat completion. */
export function badEngineResponse(modelId: string, cause?: unknown): ServiceError {
  return new ServiceError({
    status: 502,
    type: 'server_error',
    code: 'bad_engine_response',
    message: `The engine serving '${modelId}' sent a response the gateway could not read.`,
    cause,
  });
}

/**
 * 502: the engine refused the request with a status the inference API gives another meaning (401,
 * 402, 403 and 404 name the client's key, credit and model id; here they are the engine's: the
 * gateway's credentials, the model name or the URL it was configured with). The engine's message
 * is neither sent nor logged: it may quote the gateway's own key. The log's `request failed` line
 * carries this message, with the engine's status.
 */
export function engineRefused(modelId: string, engineStatus: number): ServiceError {
  return new ServiceError({
    status: 502,
    type: 'server_error',
    code: 'engine_refused',
    message: `The engine serving '${modelId}' refused the gateway's request (status ${engineStatus}).`,
  });
}

/** 400 `request_too_large`: the engine found the request larger than it accepts (its 413). */
export function engineRequestTooLarge(modelId: string): ServiceError {
  return new ServiceError({
    status: 400,
    code: INFERENCE_ERROR_CODES.requestTooLarge,
    message: `The request is larger than the engine serving '${modelId}' accepts.`,
  });
}

/** 502: the engine's answer is larger than the gateway holds for one request (MAX_ENGINE_RESPONSE_BYTES). */
export function engineResponseTooLarge(modelId: string, limitBytes: number): ServiceError {
  return new ServiceError({
    status: 502,
    type: 'server_error',
    code: 'bad_engine_response',
    message: `The engine serving '${modelId}' sent a response larger than the gateway's limit of ${limitBytes} bytes.`,
  });
}

/**
 * A request-parameter failure answered by the gateway in the engine's flat shape
 * (`{object:"error", message, type:"BadRequestError", param, code:400}`), so a bad request never
 * costs an engine round trip and clients see one shape whoever refused it.
 */
export class ParameterError extends Error {
  readonly status = 400;
  constructor(
    message: string,
    readonly param: string | null,
  ) {
    super(message);
    this.name = 'ParameterError';
  }

  /** The flat engine body. */
  toBody(): { object: 'error'; message: string; type: string; param: string | null; code: number } {
    return { object: 'error', message: this.message, type: ENGINE_BAD_REQUEST_TYPE, param: this.param, code: 400 };
  }
}

/**
 * A client's value for a message: whole up to the longest id a request may carry (so any model id
 * that could exist is quoted exactly), cut there beyond it (a megabyte of model name is not echoed).
 */
function truncate(value: string): string {
  const max = WIRE_BOUNDS.idLength.max;
  return value.length > max ? `${value.slice(0, max)}…` : value;
}
