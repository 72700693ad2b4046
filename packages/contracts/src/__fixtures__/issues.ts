import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { z } from 'zod';

/** Paths of every issue a schema raises for `value`, dotted (`messages.0.role`); `[]` when it parses. */
export function issuePaths(schema: z.ZodType, value: unknown): string[] {
  const result = schema.safeParse(value);
  return result.success ? [] : result.error.issues.map((issue) => issue.path.map(String).join('.'));
}

/** A deep copy of `base` with `patch` applied at the top level; `undefined` removes a field. */
export function withFields<T extends Record<string, unknown>>(
  base: T,
  patch: Record<string, unknown>,
): Record<string, unknown> {
  const copy: Record<string, unknown> = structuredClone(base);
  for (const [key, value] of Object.entries(patch)) {
    if (value === undefined) delete copy[key];
    else copy[key] = value;
  }
  return copy;
}

/**
 * Validates OpenAPI documents in a child Node process (see validate-openapi.mjs); resolves to one
 * entry per document: `null` when valid, else the validator's message.
 */
export function validateOpenApi(documents: unknown[]): Promise<Array<string | null>> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(__dirname, 'validate-openapi.mjs')], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`validate-openapi.mjs exited with ${code}`));
      else resolve(JSON.parse(out) as Array<string | null>);
    });
    child.stdin.end(JSON.stringify(documents));
  });
}
