import { createAccountStore } from '@tollway/accounts';
import { ConfigError, createRedis, describeRedis } from '@tollway/service-kit';
import { loadGatewayConfig } from '../config';
import { runCli } from './tollway-cli';

/**
 * `pnpm tollway …`: the operator CLI, over the Redis the gateway's settings name (REDIS_URL, or
 * REDIS_SENTINELS and REDIS_SENTINEL_NAME, TLS, REDIS_PREFIX).
 */
async function main(): Promise<number> {
  // The command line belongs to the CLI, not to the gateway's flags.
  let config;
  try {
    config = loadGatewayConfig({ argv: [] });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`tollway: ${err.message}\n`);
    return 1;
  }
  // A command whose answer a broken connection lost is not sent again (it may have run: a credit
  // top-up would apply twice); it fails after 10 s without an answer, and the CLI exits 2.
  const redis = createRedis(config, {
    name: 'tollway-cli',
    extra: { lazyConnect: true, autoResendUnfulfilledCommands: false, commandTimeout: 10_000 },
  });
  // A connection failure fails the command, which says so in one line; ioredis's own report of
  // each reconnect attempt (a stack trace each) would bury it.
  redis.on('error', () => undefined);
  try {
    return await runCli(
      process.argv.slice(2),
      createAccountStore({
        redis,
        prefix: config.redisPrefix,
        maxKeysPerOrganization: config.maxKeysPerOrganization,
      }),
      {
        out: (text) => process.stdout.write(text),
        err: (text) => process.stderr.write(text),
        redisAddress: describeRedis(config),
      },
    );
  } finally {
    redis.disconnect();
  }
}

main().then((code) => {
  process.exitCode = code;
});
