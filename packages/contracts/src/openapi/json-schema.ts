import { z } from 'zod';
import type { JsonSchema } from './openapi.types.js';

/** Where component schemas live in an OpenAPI document. */
export const SCHEMA_REF_PREFIX = '#/components/schemas/';

/** The JSON Schema dialect OpenAPI 3.1 uses by default, and the one Zod is asked to emit. */
export const JSON_SCHEMA_DIALECT = 'https://spec.openapis.org/oas/3.1/dialect/base';

/** A `$ref` to a component schema. */
export function schemaRef(name: string): JsonSchema {
  return { $ref: `${SCHEMA_REF_PREFIX}${name}` };
}

/**
 * Converts named Zod schemas to OpenAPI component schemas with Zod's own `z.toJSONSchema`
 * (draft 2020-12). A schema nested in another one that is also named becomes a `$ref`.
 * `io: 'input'` describes what a client may send (fields with defaults are optional);
 * `io: 'output'` what the service returns. Response schemas stay open to extra properties,
 * because engines add fields (e.g. `system_fingerprint`) that the gateway relays.
 */
export function componentSchemas(named: Record<string, z.ZodType>, io: 'input' | 'output'): Record<string, JsonSchema> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(named)) registry.add(schema, { id });
  const { schemas } = z.toJSONSchema(registry, {
    target: 'draft-2020-12',
    io,
    unrepresentable: 'any',
    uri: (id) => `${SCHEMA_REF_PREFIX}${id}`,
    override: ({ jsonSchema }) => tidy(jsonSchema as JsonSchema, io),
  });
  const components: Record<string, JsonSchema> = {};
  for (const [id, schema] of Object.entries(schemas)) {
    const { $schema: _dialect, $id: _id, ...rest } = schema as JsonSchema;
    components[id] = rest;
  }
  return components;
}

/** Drops the safe-integer bounds Zod writes for every `.int()`; they are noise to a reader. */
function tidy(schema: JsonSchema, io: 'input' | 'output'): void {
  if (schema.maximum === Number.MAX_SAFE_INTEGER) delete schema.maximum;
  if (schema.minimum === Number.MIN_SAFE_INTEGER) delete schema.minimum;
  if (io === 'output' && schema.additionalProperties === false) delete schema.additionalProperties;
}
