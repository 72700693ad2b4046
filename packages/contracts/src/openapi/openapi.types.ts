/**
 * The few OpenAPI 3.1 shapes the document builders write. Kept deliberately loose (schemas are
 * plain JSON Schema objects) so the package needs no OpenAPI library at run time.
 */
export type JsonSchema = Record<string, unknown>;

export interface OpenApiHeader {
  description: string;
  schema: JsonSchema;
}

export interface OpenApiMediaType {
  schema: JsonSchema;
  example?: unknown;
}

export interface OpenApiResponse {
  description: string;
  headers?: Record<string, OpenApiHeader | { $ref: string }>;
  content?: Record<string, OpenApiMediaType>;
}

export interface OpenApiParameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required?: boolean;
  description?: string;
  schema: JsonSchema;
}

export interface OpenApiOperation {
  operationId: string;
  summary: string;
  description?: string;
  tags?: string[];
  parameters?: OpenApiParameter[];
  requestBody?: { required?: boolean; description?: string; content: Record<string, OpenApiMediaType> };
  responses: Record<string, OpenApiResponse>;
  security?: Array<Record<string, string[]>>;
  callbacks?: Record<string, Record<string, Record<string, OpenApiOperation>>>;
}

export type HttpMethod = 'get' | 'put' | 'post' | 'delete' | 'patch';

export type OpenApiPathItem = { servers?: Array<{ url: string; description?: string }> } & {
  [M in HttpMethod]?: OpenApiOperation;
};

/** An OpenAPI 3.1 document as the builders return it: plain JSON, ready for `res.json()`. */
export interface OpenApiDocument {
  openapi: '3.1.0';
  info: { title: string; version: string; description?: string; license?: { name: string; identifier?: string } };
  jsonSchemaDialect: string;
  servers: Array<{ url: string; description?: string }>;
  security?: Array<Record<string, string[]>>;
  tags?: Array<{ name: string; description?: string }>;
  paths: Record<string, OpenApiPathItem>;
  components: {
    schemas: Record<string, JsonSchema>;
    securitySchemes?: Record<string, Record<string, unknown>>;
    headers?: Record<string, OpenApiHeader>;
    responses?: Record<string, OpenApiResponse>;
  };
}
