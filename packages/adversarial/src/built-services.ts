import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';

/** The repository root (this file is packages/adversarial/src/built-services.ts). */
export const REPO_ROOT = path.resolve(__dirname, '..', '..', '..');

/** Workspace packages the two services run from, each with the file its build writes last. */
const BUILT = [
  { dir: 'packages/contracts', output: 'dist/cjs/index.js' },
  { dir: 'packages/service-kit', output: 'dist/index.js' },
  { dir: 'packages/accounts', output: 'dist/index.js' },
  { dir: 'services/inference-gateway', output: 'dist/main.js', extra: ['catalog'] },
  { dir: 'services/agent-session', output: 'dist/main-api.js' },
];

/** Entry points of the built services. */
export const GATEWAY_ENTRY = path.join(REPO_ROOT, 'services/inference-gateway/dist/main.js');
export const SESSIONS_ENTRY = path.join(REPO_ROOT, 'services/agent-session/dist/main-api.js');
/**
 * The node flags the gateway is deployed with (its `start` script's, which the Dockerfile and
 * compose repeat): its heap and collector settings, so hostile input meets the gateway as it runs.
 */
export function gatewayDeployedFlags(): string[] {
  const manifest = JSON.parse(
    readFileSync(path.join(REPO_ROOT, 'services/inference-gateway/package.json'), 'utf8'),
  ) as {
    scripts: { start: string };
  };
  return manifest.scripts.start.split(' ').filter((word) => word.startsWith('-'));
}
/** The model catalog the gateway ships with. */
export const SHIPPED_CATALOG = path.join(REPO_ROOT, 'services/inference-gateway/catalog/default.catalog.yaml');

function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(full));
    else if (!entry.name.endsWith('.test.ts')) newest = Math.max(newest, statSync(full).mtimeMs);
  }
  return newest;
}

/** Packages whose build output is missing or older than a source file. */
export function staleBuilds(): string[] {
  return BUILT.filter(({ dir, output, extra = [] }) => {
    const built = path.join(REPO_ROOT, dir, output);
    if (!existsSync(built)) return true;
    const sources = [path.join(REPO_ROOT, dir, 'src'), ...extra.map((e) => path.join(REPO_ROOT, dir, e))];
    const newest = Math.max(statSync(path.join(REPO_ROOT, dir, 'package.json')).mtimeMs, ...sources.map(newestSource));
    return newest > statSync(built).mtimeMs;
  }).map(({ dir }) => dir);
}

/**
 * Runs `pnpm build` when any package the services run from is unbuilt or older than its sources,
 * so the suite always attacks what the sources say. Returns what was stale (empty: nothing built).
 */
export function ensureBuilt(log: (line: string) => void = () => undefined): string[] {
  const stale = staleBuilds();
  if (stale.length > 0) {
    log(`building (stale: ${stale.join(', ')})`);
    execFileSync('pnpm', ['build'], { cwd: REPO_ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  }
  return stale;
}
