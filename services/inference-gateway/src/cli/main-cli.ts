import { createAccountStore } from '@tollway/accounts';
import { createRedis } from '@tollway/service-kit';
import { loadGatewayConfig } from '../config';
import { buildCli, CliError } from './tollway-cli';

/** `pnpm tollway …`: the operator CLI, over the Redis named by the gateway's REDIS_URL / REDIS_PREFIX. */
async function main(): Promise<number> {
  // The command line belongs to the CLI, not to the gateway's flags.
  const config = loadGatewayConfig({ argv: [] });
  const redis = createRedis(config.redisUrl, { name: 'tollway-cli', extra: { lazyConnect: true } });
  const output = {
    out: (text: string) => process.stdout.write(text),
    err: (text: string) => process.stderr.write(text),
  };
  const program = await buildCli(createAccountStore({ redis, prefix: config.redisPrefix }), output);
  try {
    await program.parseAsync(process.argv);
    return 0;
  } catch (err) {
    if (isCommanderError(err)) return err.exitCode;
    if (err instanceof CliError) {
      output.err(`${err.message}\n`);
      return 1;
    }
    output.err(`tollway: ${err instanceof Error ? err.message : String(err)}\n`);
    return 2;
  } finally {
    redis.disconnect();
  }
}

main().then((code) => {
  process.exitCode = code;
});

/** Commander's own errors (bad option, `--help`) have been printed already; only the exit code is left. */
function isCommanderError(err: unknown): err is { exitCode: number } {
  return err instanceof Error && typeof (err as { exitCode?: unknown }).exitCode === 'number' && 'code' in err;
}
