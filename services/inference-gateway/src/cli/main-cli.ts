import { createAccountStore } from '@tollway/accounts';
import { createRedis } from '@tollway/service-kit';
import { loadGatewayConfig } from '../config';
import { runCli } from './tollway-cli';

/** `pnpm tollway …`: the operator CLI, over the Redis named by the gateway's REDIS_URL / REDIS_PREFIX. */
async function main(): Promise<number> {
  // The command line belongs to the CLI, not to the gateway's flags.
  const config = loadGatewayConfig({ argv: [] });
  // A command whose answer a broken connection lost is not sent again (it may have run: a credit
  // top-up would apply twice); it fails after 10 s without an answer, and the CLI exits 2.
  const redis = createRedis(config.redisUrl, {
    name: 'tollway-cli',
    extra: { lazyConnect: true, autoResendUnfulfilledCommands: false, commandTimeout: 10_000 },
  });
  try {
    return await runCli(process.argv.slice(2), createAccountStore({ redis, prefix: config.redisPrefix }), {
      out: (text) => process.stdout.write(text),
      err: (text) => process.stderr.write(text),
    });
  } finally {
    redis.disconnect();
  }
}

main().then((code) => {
  process.exitCode = code;
});
