/**
 * The OpenAPI 3.1 documents each service serves at `GET /openapi.json`, built from the same Zod
 * schemas the services validate with (Zod's native JSON Schema output, draft 2020-12).
 */
export { buildInferenceOpenApi, INFERENCE_API_VERSION, type InferenceOpenApiOptions } from './inference.document.js';
export { buildSessionsOpenApi, SESSIONS_API_VERSION } from './sessions.document.js';
export type {
  OpenApiDocument,
  OpenApiOperation,
  OpenApiPathItem,
  OpenApiResponse,
  JsonSchema,
} from './openapi.types.js';
