import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';

/** A gateway running as its own process (the real `main`), for multi-replica tests. */
export interface GatewayProcess {
  baseUrl: string;
  child: ChildProcess;
  /** SIGTERM and wait for exit (SIGKILL after 5 s). */
  stop(): Promise<void>;
  /** SIGKILL and wait for exit: a crashed replica. */
  kill(): Promise<void>;
}

const SERVICE_ROOT = path.resolve(__dirname, '../..');

/**
 * The command that runs `entry`: `.ts` through tsx with the workspace source condition (dev),
 * `.js` with plain node (a build).
 */
export function nodeCommand(entry: string): string[] {
  return entry.endsWith('.ts')
    ? [process.execPath, '--conditions=@tollway/source', '--import', 'tsx', entry]
    : [process.execPath, entry];
}

/** Writes a catalog file in a fresh temporary folder; returns its path and a cleanup. */
export function writeCatalog(models: unknown[]): { file: string; remove: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), 'tollway-catalog-'));
  const file = path.join(dir, 'catalog.json');
  writeFileSync(file, JSON.stringify({ models }));
  return { file, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Starts `src/main.ts` on 127.0.0.1, port 0, and resolves once it logs that it is listening. */
export async function startGatewayProcess(
  env: Record<string, string>,
  entry = path.join(SERVICE_ROOT, 'src/main.ts'),
): Promise<GatewayProcess> {
  const [command, ...args] = nodeCommand(entry);
  const child = spawn(command!, args, {
    cwd: SERVICE_ROOT,
    env: {
      ...process.env,
      GATEWAY_PORT: '0',
      GATEWAY_HOST: '127.0.0.1',
      CATALOG_WATCH: 'false',
      LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start within 40 s: ${stderr}`)), 40_000);
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      try {
        const record = JSON.parse(line) as { message?: string; port?: number };
        if (record.message === 'gateway listening' && typeof record.port === 'number') {
          clearTimeout(timer);
          resolve(record.port);
        }
      } catch {
        // Not a log record.
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited with ${code}: ${stderr}`));
    });
  });
  const end = async (signal: NodeJS.Signals) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill(signal);
    const force = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(force);
  };
  return { baseUrl: `http://127.0.0.1:${port}`, child, stop: () => end('SIGTERM'), kill: () => end('SIGKILL') };
}
