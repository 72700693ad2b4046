/**
 * The platform as separate processes, for repository-level tests and benchmarks that need every
 * process of it on one Redis: gateways, a session API, a worker, and the `tollway` CLI, each
 * started from its sources (tsx) or from `dist/`, with the Redis settings they are given (a
 * Sentinel group's, a TLS server's) in their environment. Their output goes to log files, shown
 * when something fails.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
// The workspace root has no dependency on the packages: they are taken from their sources.
import { staleBuilds } from '../packages/adversarial/src/built-services';
import { freePort } from '../packages/service-kit/src/testing/free-port';

const ROOT = path.resolve(__dirname, '..');
const GATEWAY = 'services/inference-gateway';
const SESSIONS = 'services/agent-session';
/** The simulated model of the shipped catalog. */
export const SIM_MODEL = 'tollway/sim-chat';

/** Run the services from their TypeScript sources (no build needed) or from `dist/` (after `pnpm build`). */
export type Entry = 'source' | 'dist';

/**
 * `dist` when every build the services run from is newer than its sources (as after `pnpm build`,
 * which CI runs before the tests), else `source`. A built process starts in a fraction of the CPU
 * tsx spends compiling, which the tests running beside it on a small machine feel.
 */
export function freshEntry(): Entry {
  return staleBuilds().length === 0 ? 'dist' : 'source';
}

const execFileAsync = promisify(execFile);

/** The node command line that runs a service entry (`main`, `cli/main-cli`, …): `.ts` through tsx from the sources, or the built `.js`. */
export function entryArgs(service: string, name: string, entry: Entry): string[] {
  return entry === 'source'
    ? ['--conditions=@tollway/source', '--import', 'tsx', path.join(ROOT, service, 'src', `${name}.ts`)]
    : [path.join(ROOT, service, 'dist', `${name}.js`)];
}

/** A service process, its output in a log file. */
interface ServiceProcess {
  name: string;
  child: ChildProcess;
  logFile: string;
  stop(): Promise<void>;
}

function startService(name: string, args: string[], env: Record<string, string>, logDir: string): ServiceProcess {
  const logFile = path.join(logDir, `${name}.log`);
  const fd = openSync(logFile, 'a');
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', fd, fd],
  });
  closeSync(fd);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    name,
    child,
    logFile,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const force = setTimeout(() => child.kill('SIGKILL'), 8_000);
      await exited;
      clearTimeout(force);
    },
  };
}

/** Polls `check` every 100 ms until it holds (a throw counts as not yet); throws `what` after `ms`. */
export async function until(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await check().catch(() => false))) {
    if (performance.now() > deadline) throw new Error(`${what} within ${ms} ms`);
    await sleep(100);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** One HTTP exchange with a JSON (or text) answer; gives up after `timeoutMs`. */
export async function httpJson(
  url: string,
  init: RequestInit = {},
  timeoutMs = 10_000,
): Promise<{ status: number; body: unknown; headers: Headers }> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON: the text as it is.
  }
  return { status: res.status, body, headers: res.headers };
}

/**
 * Processes of the platform started one by one, each on a free port of 127.0.0.1 with `env` over
 * the set's own; `ready` waits for them, `stop` ends them all.
 */
export class PlatformProcesses {
  private readonly logDir = mkdtempSync(path.join(tmpdir(), 'tollway-platform-'));
  private readonly services: ServiceProcess[] = [];
  private readonly urls: string[] = [];
  private readonly workers: number[] = [];

  constructor(
    private readonly env: Record<string, string>,
    private readonly entry: Entry = 'source',
  ) {}

  /** A gateway replica; resolves with its base URL. */
  async gateway(env: Record<string, string> = {}): Promise<string> {
    const port = await freePort();
    const own = { GATEWAY_PORT: String(port), GATEWAY_HOST: '127.0.0.1', CATALOG_WATCH: 'false' };
    return this.start(`gateway-${port}`, entryArgs(GATEWAY, 'main', this.entry), { ...own, ...env }, port);
  }

  /** A session API without inbound authentication (sessions belong to no organization); resolves with its base URL. */
  async sessionApi(env: Record<string, string> = {}): Promise<string> {
    const port = await freePort();
    const own = { SESSIONS_PORT: String(port), SESSIONS_HOST: '127.0.0.1', SESSIONS_AUTH: 'false' };
    return this.start(`session-api-${port}`, entryArgs(SESSIONS, 'main-api', this.entry), { ...own, ...env }, port);
  }

  /** A worker of `concurrency` agent processes (the default chat agent unless `AGENT_MODULE` says otherwise). */
  worker(concurrency: number, env: Record<string, string>): void {
    const own = { WORKER_CONCURRENCY: String(concurrency), AGENT_DEFAULT_MODEL: SIM_MODEL };
    const name = `session-worker-${this.workers.length + 1}`;
    this.services.push(
      startService(name, entryArgs(SESSIONS, 'main-worker', this.entry), this.merged({ ...own, ...env }), this.logDir),
    );
    this.workers.push(concurrency);
  }

  /**
   * Resolves once every gateway and API answers `/readyz` and `apiUrl`'s `/health` counts every
   * worker's agent processes (60 s at most); rejects with the logs.
   */
  async ready(apiUrl?: string): Promise<void> {
    try {
      const ready = async (url: string) => (await fetch(`${url}/readyz`)).status === 200;
      await until(async () => (await Promise.all(this.urls.map(ready))).every(Boolean), 60_000, 'not ready');
      const expected = this.workers.reduce((sum, n) => sum + n, 0);
      if (apiUrl && expected > 0) {
        const registered = async () =>
          ((await httpJson(`${apiUrl}/health`)).body as { max_workers?: number }).max_workers === expected;
        await until(registered, 60_000, 'the workers did not register');
      }
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${this.logs()}`);
    }
  }

  /** The last lines of every process's log, for a failure message. */
  logs(): string {
    return this.services.map((s) => `--- ${s.name}\n${tail(s.logFile)}`).join('\n');
  }

  async stop(): Promise<void> {
    await Promise.all(this.services.map((service) => service.stop()));
    rmSync(this.logDir, { recursive: true, force: true });
  }

  private merged(env: Record<string, string>): Record<string, string> {
    return { LOG_LEVEL: 'warn', METRICS_ENABLED: 'false', ...this.env, ...env };
  }

  private start(name: string, args: string[], env: Record<string, string>, port: number): string {
    this.services.push(startService(name, args, this.merged(env), this.logDir));
    const url = `http://127.0.0.1:${port}`;
    this.urls.push(url);
    return url;
  }
}

/** Options of startPlatform. */
export interface PlatformOptions {
  /** Redis settings and anything else every process gets (REDIS_URL, REDIS_SENTINELS, REDIS_PREFIX, …). */
  env: Record<string, string>;
  /** Gateway replicas; default 1. */
  gateways?: number;
  /** The key the worker's agent calls the first gateway with (an organization key: sessions have no organization). */
  workerKey: string;
  /** Agent processes of the worker; default 4. */
  workerConcurrency?: number;
  entry?: Entry;
}

/** The platform's processes, ready: every `/readyz` answers 200 and the worker has registered. */
export interface Platform {
  gatewayUrls: string[];
  /** The session API (no inbound authentication: sessions belong to no organization). */
  apiUrl: string;
  /** The last lines of every process's log, for a failure message. */
  logs(): string;
  stop(): Promise<void>;
}

/** Runs the `tollway` CLI with `env` and returns its JSON output. */
export async function runCli(
  env: Record<string, string>,
  args: string[],
  entry: Entry = 'source',
): Promise<Record<string, unknown>> {
  const { stdout } = await execFileAsync(process.execPath, [...entryArgs(GATEWAY, 'cli/main-cli', entry), ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
  });
  return JSON.parse(stdout) as Record<string, unknown>;
}

/**
 * Starts `gateways` gateway replicas, a session API (no inbound auth) and a worker whose agents
 * (the default chat agent) call the first gateway with `workerKey`; resolves once all are ready
 * (60 s at most), or rejects with their logs.
 */
export async function startPlatform(options: PlatformOptions): Promise<Platform> {
  const processes = new PlatformProcesses(options.env, options.entry);
  try {
    const gatewayUrls: string[] = [];
    for (let i = 0; i < (options.gateways ?? 1); i++) gatewayUrls.push(await processes.gateway());
    const apiUrl = await processes.sessionApi();
    processes.worker(options.workerConcurrency ?? 4, {
      GATEWAY_BASE_URL: `${gatewayUrls[0]}/v1`,
      GATEWAY_API_KEY: options.workerKey,
    });
    await processes.ready(apiUrl);
    return { gatewayUrls, apiUrl, logs: () => processes.logs(), stop: () => processes.stop() };
  } catch (err) {
    await processes.stop();
    throw err;
  }
}

function tail(file: string): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-30).join('\n');
  } catch {
    return '(no log)';
  }
}
