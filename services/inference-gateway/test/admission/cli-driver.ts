import { Redis } from 'ioredis';
import { createAccountStore } from '@tollway/accounts';
import { runCli } from '../../src/cli/tollway-cli';

/**
 * Test driver: runs several CLI command lines in one process (commander is an ES module, which
 * Jest's CommonJS runtime cannot load, and a process per command is slow). Reads the command
 * lines as JSON from argv[2] and REDIS_PREFIX from the environment; prints one JSON array of
 * { code, out, err } results.
 */
async function main(): Promise<void> {
  const commands = JSON.parse(process.argv[2] ?? '[]') as string[][];
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  const store = createAccountStore({ redis, prefix: process.env.REDIS_PREFIX ?? 'tollway:' });
  const results: Array<{ code: number; out: string; err: string }> = [];
  for (const args of commands) {
    let out = '';
    let err = '';
    const code = await runCli(args, store, { out: (text) => (out += text), err: (text) => (err += text) });
    results.push({ code, out, err });
  }
  redis.disconnect();
  process.stdout.write(JSON.stringify(results));
}

void main();
