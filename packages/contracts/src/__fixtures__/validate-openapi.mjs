// Validates OpenAPI documents with @apidevtools/swagger-parser, which is ESM-only underneath and
// so cannot load inside Jest's CommonJS runtime. Reads a JSON array of documents on stdin and
// writes a JSON array of results: `null` for a valid document, else the validator's message.
import SwaggerParser from '@apidevtools/swagger-parser';

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const documents = JSON.parse(Buffer.concat(chunks).toString('utf8'));
const results = [];
for (const document of documents) {
  try {
    await SwaggerParser.validate(document);
    results.push(null);
  } catch (err) {
    results.push(err instanceof Error ? err.message : String(err));
  }
}
process.stdout.write(JSON.stringify(results));
