/**
 * No Docker engine runs where the tests do, so this checks statically what `docker compose up`
 * needs: the file parses, every service has an image or a build whose Dockerfile exists, every
 * start command names a file the package's build emits (dist/x.js ← src/x.ts) and a script of
 * the package runs the same command, and each Dockerfile follows the house rules.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parse } from 'yaml';

const ROOT = resolve(__dirname, '..');

interface ComposeService {
  image?: string;
  build?: string | { context: string; dockerfile?: string };
  command?: string[] | string;
  environment?: Record<string, string>;
  ports?: string[];
  healthcheck?: { test: string[] | string; disable?: boolean };
  profiles?: string[];
  volumes?: string[];
}

const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, ComposeService>;
};
const services = Object.entries(compose.services);
const built = services.filter(([, service]) => service.build !== undefined);

/** Every workspace package: its folder and its package.json. */
const workspacePackages = ['packages', 'services'].flatMap((group) =>
  readdirSync(join(ROOT, group))
    .map((name) => join(group, name))
    .filter((dir) => existsSync(join(ROOT, dir, 'package.json')))
    .map((dir) => ({
      dir,
      manifest: JSON.parse(readFileSync(join(ROOT, dir, 'package.json'), 'utf8')) as {
        name: string;
        scripts?: Record<string, string>;
      },
    })),
);

function dockerfileOf(service: ComposeService): string {
  const build = typeof service.build === 'string' ? { context: service.build } : service.build!;
  return join(ROOT, build.context, build.dockerfile ?? 'Dockerfile');
}

/** The workspace package a Dockerfile deploys (`pnpm --filter <name> deploy`). */
function packageOf(dockerfile: string) {
  const name = /--filter\s+"?(@[\w-]+\/[\w-]+)"?\s+deploy/.exec(readFileSync(dockerfile, 'utf8'))?.[1];
  const found = workspacePackages.find((pkg) => pkg.manifest.name === name);
  if (!found) throw new Error(`${dockerfile} deploys no workspace package (found ${name})`);
  return found;
}

/** The JSON-form CMD of the final stage. */
function dockerCmd(dockerfile: string): string[] {
  const cmds = readFileSync(dockerfile, 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('CMD '));
  return JSON.parse(cmds[cmds.length - 1]!.slice(4)) as string[];
}

function commandOf(service: ComposeService, dockerfile: string): string[] {
  if (Array.isArray(service.command)) return service.command;
  if (typeof service.command === 'string') return service.command.split(/\s+/);
  return dockerCmd(dockerfile);
}

/** The TypeScript source a `dist/…js` file is compiled from, per the package's tsconfig.build.json. */
function sourceOf(packageDir: string, distFile: string): string {
  const tsconfig = JSON.parse(readFileSync(join(ROOT, packageDir, 'tsconfig.build.json'), 'utf8')) as {
    compilerOptions: { rootDir: string; outDir: string };
  };
  const { rootDir, outDir } = tsconfig.compilerOptions;
  expect(distFile.startsWith(`${outDir}/`)).toBe(true);
  return join(ROOT, packageDir, rootDir, distFile.slice(outDir.length + 1).replace(/\.js$/, '.ts'));
}

describe('docker-compose.yml', () => {
  it('names redis, the gateway, the session API and the session worker (outside any profile)', () => {
    const always = services.filter(([, service]) => !service.profiles).map(([name]) => name);
    expect(always.sort()).toEqual(['agent-session-api', 'agent-session-worker', 'inference-gateway', 'redis'].sort());
  });

  it.each(services)('%s has an image or a build whose Dockerfile exists', (_name, service) => {
    expect(service.image !== undefined || service.build !== undefined).toBe(true);
    if (service.build !== undefined) expect(existsSync(dockerfileOf(service))).toBe(true);
  });

  it.each(built)('%s starts a file its package builds, with a command a package script also runs', (_name, service) => {
    const dockerfile = dockerfileOf(service);
    const pkg = packageOf(dockerfile);
    const command = commandOf(service, dockerfile);
    expect(command[0]).toBe('node');
    // The first argument that is not a node flag (e.g. --max-semi-space-size=4).
    const entry = command.slice(1).find((arg) => !arg.startsWith('-'))!;
    expect(existsSync(sourceOf(pkg.dir, entry))).toBe(true);
    expect(Object.values(pkg.manifest.scripts ?? {})).toContain(command.join(' '));
  });

  it.each(built)('%s gets a healthcheck from its Dockerfile or from compose', (_name, service) => {
    const fromDockerfile = /^HEALTHCHECK /m.test(readFileSync(dockerfileOf(service), 'utf8'));
    expect(fromDockerfile || service.healthcheck?.test !== undefined).toBe(true);
    expect(service.healthcheck?.disable).not.toBe(true);
  });

  it.each(built.filter(([, s]) => s.ports))('%s publishes the port its service listens on', (_name, service) => {
    const container = service.ports!.map((mapping) => mapping.split(':').pop());
    const listening = Object.entries(service.environment ?? {}).find(([key]) => key.endsWith('_PORT'))?.[1];
    expect(container).toContain(listening);
  });

  it("the worker calls the gateway with the gateway's service key, so turns bill their session's organization", () => {
    const environment = (name: string) => Object.fromEntries(services)[name]!.environment ?? {};
    expect(environment('inference-gateway').SERVICE_API_KEYS).toBe('${SERVICE_API_KEY:-}');
    expect(environment('agent-session-worker').GATEWAY_API_KEY).toMatch(/^\$\{SERVICE_API_KEY:-/);
  });

  it("the session API signs and checks webhooks as the workers do: its reaper sends the webhooks of a dead worker's turns", () => {
    const environment = (name: string) => Object.fromEntries(services)[name]!.environment ?? {};
    for (const variable of ['WEBHOOK_SIGNING_SECRET', 'WEBHOOK_ALLOWED_HOSTS']) {
      expect(environment('agent-session-api')[variable]).toBe(`\${${variable}:-}`);
      expect(environment('agent-session-worker')[variable]).toBe(`\${${variable}:-}`);
    }
  });

  it('the gateway image CMD and the API image CMD are the ones compose runs', () => {
    for (const name of ['inference-gateway', 'agent-session-api']) {
      const service = compose.services[name]!;
      expect(dockerCmd(dockerfileOf(service))).toEqual(service.command);
    }
  });
});

describe.each([...new Set(built.map(([, service]) => dockerfileOf(service)))])('%s', (dockerfile) => {
  const text = readFileSync(dockerfile, 'utf8');

  it('is multi-stage on Node 20 or 22 bookworm-slim', () => {
    const froms = text.match(/^FROM .*/gm) ?? [];
    expect(froms.length).toBeGreaterThanOrEqual(2);
    for (const from of froms) expect(from).toMatch(/^FROM node:(20|22)-bookworm-slim\b/);
  });

  it('installs with the frozen lockfile and copies every workspace manifest first', () => {
    expect(text).toContain('pnpm install --frozen-lockfile');
    expect(text).toMatch(/npm i -g pnpm@9/);
    for (const { dir } of workspacePackages) expect(text).toContain(`COPY ${dir}/package.json ${dir}/`);
  });

  it('copies only what the build context holds: every COPY source is in the repository', () => {
    // `docker build` stops at a COPY of a missing file (a .npmrc removed from the repository
    // had left both images unbuildable).
    const tracked = new Set(execFileSync('git', ['ls-files'], { cwd: ROOT, encoding: 'utf8' }).split('\n'));
    const copies = [...text.matchAll(/^COPY (?!--from)(.+)$/gm)].map((match) => match[1]!.trim().split(/\s+/));
    expect(copies.length).toBeGreaterThan(0);
    for (const parts of copies) {
      for (const source of parts.slice(0, -1)) {
        const present = tracked.has(source) || [...tracked].some((file) => file.startsWith(`${source}/`));
        expect([source, present]).toEqual([source, true]);
      }
    }
  });

  it('runs as a non-root user and checks /healthz with node', () => {
    const lastStage = text.slice(text.lastIndexOf('\nFROM '));
    expect(lastStage).toMatch(/^USER (?!root\b)\w+/m);
    expect(lastStage).toMatch(/^HEALTHCHECK .*\n?.*"node".*\/healthz/m);
  });

  it('builds the package that its CMD runs', () => {
    const pkg = packageOf(dockerfile);
    expect(text).toContain(`pnpm --filter "${pkg.manifest.name}..." run build`);
    const entry = dockerCmd(dockerfile)
      .slice(1)
      .find((arg) => !arg.startsWith('-'))!;
    expect(existsSync(sourceOf(pkg.dir, entry))).toBe(true);
  });
});

describe('.dockerignore', () => {
  it('keeps local installs and builds out of the context', () => {
    const lines = readFileSync(join(ROOT, '.dockerignore'), 'utf8').split('\n');
    expect(lines).toEqual(expect.arrayContaining(['**/node_modules', '**/dist', '.git']));
  });
});
