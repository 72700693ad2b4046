import { Router } from 'express';
import { buildInferenceOpenApi, type InferenceOpenApiOptions } from '@tollway/contracts';

/** `GET /openapi.json`: the inference API's OpenAPI 3.1 document, built once from the contracts. */
export function openApiRouter(options?: InferenceOpenApiOptions): Router {
  const router = Router();
  let document: string | null = null;
  router.get('/openapi.json', (_req, res) => {
    document ??= JSON.stringify(buildInferenceOpenApi(options));
    res.type('application/json').send(document);
  });
  return router;
}
