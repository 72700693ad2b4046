import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { createAccountStore, deleteKeysWithPrefix, type AccountStore } from '@tollway/accounts';
import { closeServer, createLogger, listen } from '@tollway/service-kit';
import { wireAccounts } from '../../src/admission/accounts-wiring';
import { buildApp } from '../../src/app';
import { CatalogStore } from '../../src/catalog/catalog-store';
import { loadGatewayConfig } from '../../src/config';
import { EngineRegistry } from '../../src/engines';
import { catalogModels } from '../helpers/gateway-harness';

/** The operator token of every console harness. */
export const ADMIN_TOKEN = 'console-test-admin-token';

const CONSOLE_PACKAGE = path.resolve(__dirname, '..', '..', '..', '..', 'packages', 'console');

/**
 * Builds the console with Vite into a fresh temporary folder (about two seconds), so a test
 * serves what the sources say now and test files running at once never share an output folder.
 */
export async function buildConsole(): Promise<{ dir: string; remove: () => void }> {
  const root = mkdtempSync(path.join(tmpdir(), 'tollway-console-'));
  // Under a dot-segment, as `pnpm deploy` (the Docker image) places the package:
  // node_modules/.pnpm/@tollway+console@…/node_modules/@tollway/console/dist.
  const dir = path.join(root, 'node_modules', '.pnpm', 'console', 'dist');
  const vite = path.join(CONSOLE_PACKAGE, 'node_modules', 'vite', 'bin', 'vite.js');
  await promisify(execFile)(
    process.execPath,
    [vite, 'build', '--outDir', dir, '--emptyOutDir', '--logLevel', 'error'],
    {
      cwd: CONSOLE_PACKAGE,
      env: { ...process.env, VITE_CONFIG_NATIVE_IGNORE_WARNING: 'true' },
    },
  );
  return { dir, remove: () => rmSync(root, { recursive: true, force: true }) };
}

/** A gateway wired as main.ts wires it (accounts in Redis, admin API, console), on port 0. */
export interface ConsoleGateway {
  baseUrl: string;
  server: Server;
  store: AccountStore;
  redis: Redis;
  prefix: string;
  close(): Promise<void>;
}

/**
 * Starts the production wiring over real Redis under a unique prefix, with one simulated model.
 * `env` may name another gateway's `REDIS_PREFIX`: the same deployment restarted with other settings.
 */
export async function startConsoleGateway(env: Record<string, string> = {}): Promise<ConsoleGateway> {
  const config = loadGatewayConfig({
    env: { REDIS_PREFIX: `test-${randomUUID()}:`, ADMIN_TOKEN, ...env },
    argv: [],
  });
  const prefix = config.redisPrefix;
  const logger = createLogger({ service: 'console-test', silent: true });
  const catalog = new CatalogStore(
    catalogModels([
      {
        id: 'tollway/sim-chat',
        owned_by: 'tollway',
        created: 1767225600,
        capacity: 8,
        price_per_million: { input: 0.5, output: 1.5 },
        engine: { kind: 'simulated', time_to_first_token_ms: 0, time_per_output_token_ms: 0 },
      },
    ]),
  );
  const engines = new EngineRegistry({ connections: 4, timeoutMs: 5000 });
  catalog.subscribe((models) => engines.sync(models));
  const redis = new Redis(config.redisUrl);
  const accounts = await wireAccounts(config, redis, logger, { catalog, engines });
  const app = buildApp({
    config,
    logger,
    catalog,
    engines,
    redis,
    authenticator: accounts.authenticator,
    admission: accounts.admission,
    adminRouter: accounts.adminRouter,
    consoleRouter: accounts.consoleRouter,
    openApi: accounts.openApi,
  });
  const server = await listen(app, 0, '127.0.0.1');
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    server,
    store: createAccountStore({ redis, prefix }),
    redis,
    prefix,
    async close() {
      server.closeAllConnections();
      await closeServer(server);
      await accounts.close();
      await engines.close();
      catalog.close();
      await deleteKeysWithPrefix(redis, prefix);
      await redis.quit();
    },
  };
}

/** Budgets roomy enough for any test. */
export const ROOMY_BUDGETS = { requests: 1000, input_tokens: 1_000_000, output_tokens: 1_000_000 };
