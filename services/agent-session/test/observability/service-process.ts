import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

/** A service started from its sources as its own process. */
export interface ServiceProcess {
  child: ChildProcess;
  /** SIGTERM, then SIGKILL after 5 s; resolves once it exited. */
  stop(): Promise<void>;
}

/**
 * Runs `entry` (a `.ts` main) through tsx with the workspace source condition and resolves once
 * it writes a JSON log record whose `message` is `ready`; rejects if it exits or takes 60 s (and
 * then kills it, so a process that never became ready does not keep the test run open).
 */
export async function startServiceProcess(
  entry: string,
  env: Record<string, string>,
  ready: string,
): Promise<ServiceProcess> {
  const child = spawn(process.execPath, ['--conditions=@tollway/source', '--import', 'tsx', entry], {
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${entry} not ready within 60 s: ${stderr}`));
    }, 60_000);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.includes(`"message":"${ready}"`)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${entry} exited with ${code}: ${stderr}`));
    });
  });
  return {
    child,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const force = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(force);
    },
  };
}
