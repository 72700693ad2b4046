// The node flags the gateway is deployed with: those of its package's `start` script, which the
// Dockerfile and compose repeat (scripts/compose.test.ts checks they agree). The quickstart
// (start-platform.mjs) and the benches read them here, so no copy of them can drift.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const GATEWAY_MANIFEST = join(dirname(fileURLToPath(import.meta.url)), '../services/inference-gateway/package.json');

/**
 * `{ script, flags }`: the gateway's start script and its node flags; throws if it is not
 * `node <flags> dist/main.js`. `manifest` is its package.json (another checkout's, for a comparison).
 */
export function gatewayStartFlags(manifest = GATEWAY_MANIFEST) {
  const script = JSON.parse(readFileSync(manifest, 'utf8')).scripts.start;
  const match = /^node((?: --?[\w-]+(?:=\S+)?)*) dist\/main\.js$/.exec(script);
  if (!match) throw new Error(`cannot read the node flags of the gateway's start script: ${script}`);
  return { script, flags: match[1].trim().split(' ').filter(Boolean) };
}
