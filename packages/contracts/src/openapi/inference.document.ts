import {
  ChatCompletionChunk,
  ChatCompletionResponse,
  Choice,
  ChunkChoice,
  CreateChatCompletionRequest,
  Delta,
  RequestMessage,
  ResponseMessage,
  StreamOptions,
  Usage,
} from '../inference/chat-completion.schema.js';
import { EngineErrorResponse, ErrorResponse } from '../inference/errors.schema.js';
import { Model, ModelList } from '../inference/model.schema.js';
import { ORGANIZATION_HEADER, RATE_LIMIT_HEADERS, RETRY_HEADERS } from '../inference/rate-limit-headers.js';
import { componentSchemas, JSON_SCHEMA_DIALECT, schemaRef } from './json-schema.js';
import type { OpenApiDocument, OpenApiParameter, OpenApiPathItem, OpenApiResponse } from './openapi.types.js';

/** The version string the inference interface description carries. */
export const INFERENCE_API_VERSION = '2026-09-17';

/** Options of buildInferenceOpenApi. */
export interface InferenceOpenApiOptions {
  /** Extra path items (e.g. the admin API) merged into the document, each with its own `servers`. */
  extraPaths?: Record<string, OpenApiPathItem>;
  /** Extra component schemas the extra paths refer to. */
  extraSchemas?: Record<string, Record<string, unknown>>;
}

const errorJson = (description: string, example: unknown): OpenApiResponse => ({
  description,
  content: { 'application/json': { schema: schemaRef('ErrorResponse'), example } },
});

const headerRef = (name: string) => ({ $ref: `#/components/headers/${name}` });

const RETRY_HEADER_REFS = {
  [RETRY_HEADERS.retryAfter]: headerRef(RETRY_HEADERS.retryAfter),
  [RETRY_HEADERS.retryAfterMs]: headerRef(RETRY_HEADERS.retryAfterMs),
  [RETRY_HEADERS.shouldRetry]: headerRef(RETRY_HEADERS.shouldRetry),
};

const UNAUTHORIZED = errorJson('Key missing, malformed, unknown or revoked. The envelope has no `code` field.', {
  error: { message: 'Invalid API key provided.', type: 'invalid_request_error', param: null },
});

const modelNotFound = (what: string): OpenApiResponse =>
  errorJson(`No such model id${what}.`, {
    error: {
      message: 'The model `acme/none` does not exist.',
      type: 'invalid_request_error',
      param: null,
      code: 'model_not_found',
    },
  });

const SSE_EXAMPLE = [
  'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1789000000,"model":"tollway/sim-chat","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}',
  '',
  'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1789000000,"model":"tollway/sim-chat","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}',
  '',
  'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1789000000,"model":"tollway/sim-chat","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
  '',
  'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1789000000,"model":"tollway/sim-chat","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}',
  '',
  'data: [DONE]',
  '',
].join('\n');

/** The optional header of every inference operation by which a service key names its organization. */
const ORGANIZATION: OpenApiParameter = {
  name: ORGANIZATION_HEADER,
  in: 'header',
  required: false,
  description:
    "The organization a service key acts for: the request is authorized, metered and billed as that organization's. Any other key may only name its own organization; another one is 401.",
  schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,64}$' },
};

function inferencePaths(): Record<string, OpenApiPathItem> {
  return {
    '/models': {
      get: {
        operationId: 'listModels',
        summary: 'List models',
        tags: ['models'],
        parameters: [ORGANIZATION],
        responses: {
          '200': { description: 'The catalog.', content: { 'application/json': { schema: schemaRef('ModelList') } } },
          '401': UNAUTHORIZED,
        },
      },
    },
    '/models/{author}/{slug}': {
      get: {
        operationId: 'retrieveModel',
        summary: 'Retrieve one model',
        tags: ['models'],
        parameters: [
          {
            name: 'author',
            in: 'path',
            required: true,
            description: 'First part of the model id.',
            schema: { type: 'string' },
          },
          {
            name: 'slug',
            in: 'path',
            required: true,
            description: 'Second part of the model id.',
            schema: { type: 'string' },
          },
          ORGANIZATION,
        ],
        responses: {
          '200': { description: 'The model.', content: { 'application/json': { schema: schemaRef('Model') } } },
          '401': UNAUTHORIZED,
          '404': modelNotFound(''),
        },
      },
    },
    '/chat/completions': {
      post: {
        operationId: 'createChatCompletion',
        summary: 'Create a chat completion',
        description:
          'Answers one JSON ChatCompletionResponse, or, when `stream` is true, a `text/event-stream` of ChatCompletionChunk frames ending with `data: [DONE]`. Clients retry 429 and 5xx with exponential backoff and jitter, preferring `retry-after-ms`, then `retry-after`; never 400, 401, 402, 404, nor anything carrying `x-should-retry: false`.',
        tags: ['chat'],
        parameters: [ORGANIZATION],
        requestBody: {
          required: true,
          content: { 'application/json': { schema: schemaRef('CreateChatCompletionRequest') } },
        },
        responses: {
          '200': {
            description: 'The completion, as JSON or as Server-Sent Events.',
            headers: Object.fromEntries(Object.values(RATE_LIMIT_HEADERS).map((name) => [name, headerRef(name)])),
            content: {
              'application/json': { schema: schemaRef('ChatCompletionResponse') },
              'text/event-stream': {
                schema: {
                  type: 'string',
                  description:
                    'Frames `data: <ChatCompletionChunk JSON>`. The first chunk carries the role delta and no usage; the chunk with `finish_reason` has no usage; other chunks carry usage; the last JSON chunk has empty `choices` and the totals; the stream ends with `data: [DONE]`. Chunk schema: #/components/schemas/ChatCompletionChunk.',
                },
                example: SSE_EXAMPLE,
              },
            },
          },
          '400': {
            description:
              'Invalid JSON (`invalid_json`), `model` missing (`model_required`), body too large (`request_too_large`), all in the envelope; or a per-parameter validation failure in the flat engine shape (integer `code`) or as `text/plain` with the engine’s inference-error prefix.',
            content: {
              'application/json': { schema: { oneOf: [schemaRef('ErrorResponse'), schemaRef('EngineErrorResponse')] } },
              'text/plain': { schema: { type: 'string' } },
            },
          },
          '401': UNAUTHORIZED,
          '402': {
            ...errorJson('The organization is out of credit (`insufficient_quota`).', {
              error: {
                message: 'Out of credit.',
                type: 'invalid_request_error',
                param: null,
                code: 'insufficient_quota',
              },
            }),
            headers: { [RETRY_HEADERS.shouldRetry]: headerRef(RETRY_HEADERS.shouldRetry) },
          },
          '404': modelNotFound(' (also for endpoints that are not implemented)'),
          '429': {
            ...errorJson(
              'A per-minute budget is empty (`rate_limit_exceeded`, `error.type` names the budget: `requests`, `input_tokens` or `output_tokens`), or the model is at capacity (`provider_overloaded`).',
              {
                error: {
                  message: 'Rate limit reached.',
                  type: 'input_tokens',
                  param: null,
                  code: 'rate_limit_exceeded',
                },
              },
            ),
            headers: RETRY_HEADER_REFS,
          },
          '5XX': errorJson(
            'The engine could not be reached, refused the gateway or sent what it cannot read (502 `engine_unavailable`, `engine_refused` or `bad_engine_response`), did not answer (504 `upstream_timeout`), or admission control could not reach Redis (503 `admission_unavailable`, with retry headers): Tollway’s choice, the envelope. An engine’s own 5xx (after one retry) keeps its status and body.',
            {
              error: {
                message: 'No engine replica answered.',
                type: 'server_error',
                param: null,
                code: 'engine_unavailable',
              },
            },
          ),
        },
      },
    },
  };
}

const integerHeader = (description: string) => ({ description, schema: { type: 'integer', minimum: 0 } });
const durationHeader = (description: string) => ({
  description,
  schema: {
    type: 'string',
    pattern: '^(?:\\d+h)?(?:\\d+m)?(?:\\d+(?:\\.\\d+)?s)?(?:\\d+ms)?$',
    examples: ['0s', '250ms', '1.5s', '6m0s'],
  },
});

/** Builds the OpenAPI 3.1 document of the inference API (`/v1`), version `2026-09-17`. */
export function buildInferenceOpenApi(options: InferenceOpenApiOptions = {}): OpenApiDocument {
  const requestSchemas = componentSchemas({ CreateChatCompletionRequest, RequestMessage, StreamOptions }, 'input');
  const responseSchemas = componentSchemas(
    {
      Model,
      ModelList,
      ChatCompletionResponse,
      Choice,
      ResponseMessage,
      Usage,
      ChatCompletionChunk,
      ChunkChoice,
      Delta,
      ErrorResponse,
      EngineErrorResponse,
    },
    'output',
  );
  return {
    openapi: '3.1.0',
    info: {
      title: 'Tollway inference API',
      version: INFERENCE_API_VERSION,
      description: 'OpenAI-compatible model catalog and chat completions. Point an OpenAI client at `{base_url}/v1`.',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    jsonSchemaDialect: JSON_SCHEMA_DIALECT,
    servers: [{ url: '/v1', description: 'The inference API; every path below is relative to it.' }],
    security: [{ bearerAuth: [] }],
    tags: [
      { name: 'models', description: 'The model catalog' },
      { name: 'chat', description: 'Chat completions, JSON or streamed' },
    ],
    paths: { ...inferencePaths(), ...options.extraPaths },
    components: {
      schemas: { ...requestSchemas, ...responseSchemas, ...options.extraSchemas },
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description:
            "An organization API key: `Authorization: Bearer tw-…`; or an operator's service key, with `x-tollway-organization` naming the organization it acts for.",
        },
      },
      headers: {
        [RATE_LIMIT_HEADERS.limitRequests]: integerHeader('Capacity of the request bucket.'),
        [RATE_LIMIT_HEADERS.remainingRequests]: integerHeader('Requests left: a balance, not limit minus spend.'),
        [RATE_LIMIT_HEADERS.resetRequests]: durationHeader('Time until the request bucket is full again, e.g. `1s`.'),
        [RATE_LIMIT_HEADERS.limitTokens]: integerHeader('Capacity of whichever token bucket is nearer its limit.'),
        [RATE_LIMIT_HEADERS.remainingTokens]: integerHeader('Tokens left in that bucket.'),
        [RATE_LIMIT_HEADERS.resetTokens]: durationHeader('Time until that bucket is full again, e.g. `0s`.'),
        [RETRY_HEADERS.retryAfter]: integerHeader('Seconds to wait before retrying.'),
        [RETRY_HEADERS.retryAfterMs]: integerHeader(
          'Milliseconds to wait before retrying; preferred over `retry-after`.',
        ),
        [RETRY_HEADERS.shouldRetry]: {
          description: '`false` when a retry cannot succeed.',
          schema: { type: 'string', enum: ['true', 'false'] },
        },
      },
    },
  };
}
