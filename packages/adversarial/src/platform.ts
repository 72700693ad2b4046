import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createServer, type Server } from 'node:http';
import { Redis } from 'ioredis';
import { freePort } from '@tollway/service-kit/testing';
import { gatewayDeployedFlags, GATEWAY_ENTRY, REPO_ROOT, SESSIONS_ENTRY, SHIPPED_CATALOG } from './built-services';
import { hostileCatalogEntries, hostileModelId, startHostileEngine } from './hostile-engine';
import type { SendContext, ServiceName } from './fuzz-case';

const HOST = '127.0.0.1';
const MIB = 1024 * 1024;
/** V8 old-space cap of each spawned service, MiB. */
const HEAP_CAP_MB = 1024;

/** Resident set size of `pid` in bytes (Linux /proc), or 0 when it is gone. */
export function rssOf(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** One spawned service process: its port, its last log lines, its exits. */
export class ServiceProcess {
  child: ChildProcess | null = null;
  /** Exits seen so far (a crash each, unless we stopped it). */
  exits: string[] = [];
  peakRss = 0;
  private tail: string[] = [];
  private stopping = false;

  constructor(
    readonly name: ServiceName,
    private readonly entry: string,
    private readonly args: string[],
    private readonly env: NodeJS.ProcessEnv,
    readonly port: number,
    /** Node flags before the entry (the heap cap is added to them). */
    private readonly nodeFlags: string[] = [],
  ) {}

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get alive(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The last log lines (stdout and stderr), for a crash report. */
  lastLines(count = 30): string {
    return this.tail.slice(-count).join('\n');
  }

  sampleRss(): number {
    const rss = rssOf(this.pid);
    this.peakRss = Math.max(this.peakRss, rss);
    return rss;
  }

  /** Spawns the process and waits until `readyPath` answers 200. */
  async start(readyPath: string, timeoutMs = 30_000): Promise<void> {
    this.stopping = false;
    // A heap cap: an unbounded allocation ends as a counted crash, not as a machine shared with
    // other work swapping (the services' real limits are far below it).
    const child = spawn(
      process.execPath,
      [...this.nodeFlags, `--max-old-space-size=${HEAP_CAP_MB}`, this.entry, ...this.args],
      {
        cwd: REPO_ROOT,
        env: this.env,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    this.child = child;
    const keep = (data: Buffer) => {
      for (const line of data.toString('utf8').split('\n')) if (line) this.tail.push(line.slice(0, 2000));
      if (this.tail.length > 400) this.tail.splice(0, this.tail.length - 200);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    child.once('exit', (code, signal) => {
      if (!this.stopping) this.exits.push(`${this.name} exited (${signal ?? `code ${code}`})`);
    });
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (!this.alive) throw new Error(`${this.name} exited during start-up:\n${this.lastLines()}`);
      try {
        const res = await fetch(`http://${HOST}:${this.port}${readyPath}`, { signal: AbortSignal.timeout(1000) });
        if (res.ok) return;
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`${this.name} was not ready within ${timeoutMs} ms:\n${this.lastLines()}`);
  }

  /** SIGTERM, then SIGKILL after 5 s. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child || !this.alive) return;
    this.stopping = true;
    await new Promise<void>((resolve) => {
      const kill = setTimeout(() => child.kill('SIGKILL'), 5000);
      child.once('exit', () => {
        clearTimeout(kill);
        resolve();
      });
      child.kill('SIGTERM');
    });
  }
}

/** Options of startPlatform. */
export interface PlatformOptions {
  /** Base of the Redis key prefix; a random suffix is added (`<base><hex>:`). */
  prefixBase: string;
  redisUrl?: string;
  /** Environment the services inherit (PATH and the like) under their own settings; default none. */
  baseEnv?: Readonly<NodeJS.ProcessEnv>;
}

/**
 * Both built services on free ports over one Redis prefix: the gateway (shipped catalog of
 * simulated engines, admin API on), the session API with an embedded worker calling that gateway,
 * an organization with an API key made through the admin API, a second ("victim") organization
 * that the admin mutations may rename, drain or delete, a third as which the session cases act
 * (their agent turns bill it: the session worker calls the gateway with a service key), a fourth
 * ("tenant") whose keys must reach nothing of the others', and a local webhook sink.
 */
export class Platform {
  readonly prefix: string;
  readonly redis: Redis;
  gateway!: ServiceProcess;
  sessions!: ServiceProcess;
  context!: SendContext;
  webhooksReceived = 0;
  private sink!: Server;
  private hostileEngine: Server | undefined;
  private stateDir: string | undefined;
  private adminToken = '';

  constructor(private readonly options: PlatformOptions) {
    this.prefix = `${options.prefixBase}${randomBytes(6).toString('hex')}:`;
    this.redis = new Redis(options.redisUrl ?? 'redis://127.0.0.1:6379', { lazyConnect: true });
  }

  service(name: ServiceName): ServiceProcess {
    return name === 'gateway' ? this.gateway : this.sessions;
  }

  async start(): Promise<void> {
    const redisUrl = this.options.redisUrl ?? 'redis://127.0.0.1:6379';
    const adminToken = `adm-${randomBytes(16).toString('hex')}`;
    // The session worker's key: it acts for the organization that owns each turn's session.
    const serviceKey = `svc-${randomBytes(24).toString('hex')}`;
    this.sink = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        this.webhooksReceived += 1;
        res.end();
      });
    });
    await new Promise<void>((resolve) => this.sink.listen(0, HOST, resolve));
    const sinkAddress = this.sink.address();
    const sinkPort = typeof sinkAddress === 'object' && sinkAddress ? sinkAddress.port : 0;
    const gatewayPort = await freePort();
    const common = {
      ...this.options.baseEnv,
      REDIS_URL: redisUrl,
      REDIS_PREFIX: this.prefix,
      LOG_LEVEL: 'warn',
      // Short request timeouts, so a stalled client is answered (408) or closed within a case's timeout.
      HTTP_HEADERS_TIMEOUT_MS: '2000',
      HTTP_REQUEST_TIMEOUT_MS: '3000',
    };
    // The shipped catalog of simulated models, plus one model per hostile engine behaviour.
    const engine = await startHostileEngine();
    this.hostileEngine = engine.server;
    this.stateDir = mkdtempSync(path.join(tmpdir(), 'tollway-adversarial-'));
    const catalogPath = path.join(this.stateDir, 'catalog.yaml');
    writeFileSync(catalogPath, readFileSync(SHIPPED_CATALOG, 'utf8') + hostileCatalogEntries(engine.port));
    this.gateway = new ServiceProcess(
      'gateway',
      GATEWAY_ENTRY,
      [],
      {
        ...common,
        GATEWAY_PORT: String(gatewayPort),
        GATEWAY_HOST: HOST,
        ADMIN_TOKEN: adminToken,
        SERVICE_API_KEYS: serviceKey,
        CATALOG_PATH: catalogPath,
        CATALOG_WATCH: 'false',
        // Limits low enough that each hostile engine behaviour ends within a case's timeout.
        UPSTREAM_TIMEOUT_MS: '1000',
        MAX_ENGINE_RESPONSE_BYTES: String(MIB),
        MAX_ENGINE_EVENT_BYTES: String(256 * 1024),
        MAX_ENGINE_STREAM_BYTES: String(8 * MIB),
      },
      gatewayPort,
      gatewayDeployedFlags(),
    );
    await this.gateway.start('/readyz');

    this.adminToken = adminToken;
    const org = await this.createOrg('adversarial');
    const victim = await this.createOrg('adversarial victim');
    // The session cases act as an organization of their own, which their agent turns bill (the
    // worker's service key names each session's organization): the fuzz organization's usage is
    // then the gateway cases' alone, which the billing ledger checks.
    const agents = await this.createOrg('adversarial agents');
    const tenant = await this.createOrg('adversarial tenant', 'admin');
    await this.checkReachesOwnOrg(tenant);
    const tenantStandardKey = await this.createKey(tenant.orgId, 'standard');
    const signedIn = await this.signInToConsole();

    const sessionsPort = await freePort();
    this.sessions = new ServiceProcess(
      'sessions',
      SESSIONS_ENTRY,
      ['--embedded-worker', '--allow-custom-ids'],
      {
        ...common,
        SESSIONS_PORT: String(sessionsPort),
        SESSIONS_HOST: HOST,
        MAX_SESSIONS: '1000000',
        WORKER_CONCURRENCY: '2',
        GATEWAY_BASE_URL: `http://${HOST}:${gatewayPort}/v1`,
        GATEWAY_API_KEY: serviceKey,
        AGENT_MAX_MODEL_TRIES: '1',
        // The sink is on loopback, which the address policy refuses unless allowed: allowed, so
        // deliveries really run and a hostile token or URL reaches the code that sends it.
        WEBHOOK_ALLOWED_HOSTS: HOST,
        WEBHOOK_TIMEOUT_MS: '2000',
      },
      sessionsPort,
    );
    await this.sessions.start('/readyz');
    const tenantSessions = await fetch(`http://${HOST}:${sessionsPort}/sessions`, {
      headers: { authorization: `Bearer ${tenantStandardKey}` },
    });
    if (tenantSessions.status !== 200)
      throw new Error(`the tenant key listing its own sessions answered ${tenantSessions.status}`);
    this.context = {
      host: HOST,
      port: 0,
      orgKey: org.key,
      sessionsOrgKey: agents.key,
      adminToken,
      consoleCookie: signedIn.cookie,
      csrfToken: signedIn.csrfToken,
      tenantKey: tenant.key,
      tenantSessionsKey: tenantStandardKey,
      orgId: org.orgId,
      victimOrgId: victim.orgId,
      victimKeyId: victim.keyId,
      sessionId: '00000000-0000-4000-8000-000000000000',
      webhookUrl: `http://${HOST}:${sinkPort}/hook`,
      hostileModel: hostileModelId('huge-json'),
    };
  }

  /**
   * Creates the victim organization again when an admin case deleted it, so the admin cases keep
   * reaching live records. Only the victim is ever named by an admin case: a mutated method must
   * not delete the organization whose key every other case uses.
   */
  async reviveVictim(): Promise<void> {
    const res = await fetch(`${this.adminBase()}/${this.context.victimOrgId}`, { headers: this.adminHeaders() });
    if (res.status !== 404) return;
    const victim = await this.createOrg('adversarial victim');
    this.context = { ...this.context, victimOrgId: victim.orgId, victimKeyId: victim.keyId };
  }

  /**
   * Signs the console in again when a case signed it out (a mutated method can turn a signed-in
   * `GET /console/api/session` into its DELETE), so the console's cases keep reaching the admin API.
   */
  async reviveConsole(): Promise<void> {
    const res = await fetch(`http://${HOST}:${this.gateway.port}/console/api/session`, {
      headers: { cookie: `tollway_console=${this.context.consoleCookie}` },
    });
    if (res.status !== 401) return;
    const signedIn = await this.signInToConsole();
    this.context = { ...this.context, consoleCookie: signedIn.cookie, csrfToken: signedIn.csrfToken };
  }

  /** Signs in to the console with the admin token, as its page does: the session cookie and CSRF token. */
  private async signInToConsole(): Promise<{ cookie: string; csrfToken: string }> {
    const res = await fetch(`http://${HOST}:${this.gateway.port}/console/api/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: this.adminToken }),
    });
    if (res.status !== 201) throw new Error(`console sign-in answered ${res.status}: ${await res.text()}`);
    const cookie = /(?:^|;\s*)tollway_console=([^;]*)/.exec(res.headers.get('set-cookie') ?? '')?.[1];
    if (!cookie) throw new Error('console sign-in set no session cookie');
    return { cookie, csrfToken: ((await res.json()) as { csrf_token: string }).csrf_token };
  }

  private adminBase(): string {
    return `http://${HOST}:${this.gateway.port}/admin/v1/organizations`;
  }

  private adminHeaders(): Record<string, string> {
    return { authorization: `Bearer ${this.adminToken}`, 'content-type': 'application/json' };
  }

  /**
   * An organization admin's key must reach its own organization (here, and its own sessions once
   * the session service is up), or every refusal the tenant cases expect would hold trivially.
   */
  private async checkReachesOwnOrg(tenant: { orgId: string; key: string }): Promise<void> {
    const res = await fetch(`${this.adminBase()}/${tenant.orgId}`, {
      headers: { authorization: `Bearer ${tenant.key}` },
    });
    if (res.status !== 200) throw new Error(`an admin key reading its own organization answered ${res.status}`);
  }

  /** An organization with budgets and credit no run exhausts, and one API key (`role` admin or standard). */
  private async createOrg(
    name: string,
    role: 'admin' | 'standard' = 'standard',
  ): Promise<{ orgId: string; keyId: string; key: string }> {
    const budgets = { requests: 1_000_000, input_tokens: 1_000_000_000, output_tokens: 1_000_000_000 };
    const body = JSON.stringify({ name, budgets, credit: 1_000_000 });
    const res = await fetch(this.adminBase(), { method: 'POST', headers: this.adminHeaders(), body });
    if (res.status !== 201) throw new Error(`creating an organization answered ${res.status}: ${await res.text()}`);
    const org = (await res.json()) as { id: string };
    const key = await this.createKeyRecord(org.id, role);
    return { orgId: org.id, keyId: key.id, key: key.key };
  }

  /** A new key of an organization; resolves its plaintext. */
  private async createKey(orgId: string, role: 'admin' | 'standard'): Promise<string> {
    return (await this.createKeyRecord(orgId, role)).key;
  }

  private async createKeyRecord(orgId: string, role: 'admin' | 'standard'): Promise<{ id: string; key: string }> {
    const keyRes = await fetch(`${this.adminBase()}/${orgId}/keys`, {
      method: 'POST',
      headers: this.adminHeaders(),
      body: JSON.stringify({ name: 'adversarial', role }),
    });
    if (keyRes.status !== 201) throw new Error(`creating a key answered ${keyRes.status}: ${await keyRes.text()}`);
    return (await keyRes.json()) as { id: string; key: string };
  }

  /** Starts a crashed service again (same port, same prefix) so a run goes on after a crash. */
  async restart(name: ServiceName): Promise<void> {
    await this.service(name).start('/readyz');
  }

  /** Stops both services and the sink, and deletes every key under the prefix. */
  async stop(): Promise<void> {
    await Promise.all([this.sessions?.stop(), this.gateway?.stop()]);
    for (const server of [this.sink, this.hostileEngine]) {
      server?.closeAllConnections();
      await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    }
    if (this.stateDir) rmSync(this.stateDir, { recursive: true, force: true });
    await this.redis.connect().catch(() => undefined);
    let cursor = '0';
    do {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', `${this.prefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await this.redis.unlink(...keys);
    } while (cursor !== '0');
    this.redis.disconnect();
  }
}
