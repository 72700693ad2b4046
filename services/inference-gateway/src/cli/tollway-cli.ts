// commander 15 is an ES module: its types are imported as such, the code with `import()`.
import type { Command } from 'commander' with { 'resolution-mode': 'import' };
import { AccountError, redactApiKey, type AccountStore, type ApiKeyInfo } from '@tollway/accounts';
import {
  ApiKeyRole,
  CreateApiKeyRequest,
  CreateOrganizationRequest,
  IDEMPOTENCY_KEY_PATTERN,
  UpdateOrganizationRequest,
} from '@tollway/contracts';
import { isRedisUnavailable } from '@tollway/service-kit';
import type { z } from 'zod';
import { sessionLimitsOf } from '../routes/admin/admin-views';

/** Where the CLI writes: stdout for results (JSON), stderr for problems. */
export interface CliOutput {
  out(text: string): void;
  err(text: string): void;
  /** The Redis the store uses, as shown in a failure to reach it (no password); absent: not named. */
  redisAddress?: string;
}

/** Thrown for a command that cannot be carried out (unknown organization…); exit code 1. */
export class CliError extends Error {}

type Commander = typeof import('commander', { with: { 'resolution-mode': 'import' } });

/** The flag each field of the admin API's bodies comes from. */
const FLAG_OF: Readonly<Record<string, string>> = {
  id: '--id',
  name: '--name',
  role: '--role',
  credit: '--credit',
  credit_top_up: '--add-credit',
  'budgets.requests': '--requests',
  'budgets.input_tokens': '--input-tokens',
  'budgets.output_tokens': '--output-tokens',
  'session_limits.sessions': '--max-sessions',
  'session_limits.running_turns': '--max-running-turns',
  'session_limits.waiting_turns': '--max-waiting-turns',
  'session_limits.weight': '--turn-weight',
};

/**
 * The session-limit flags' values as commander parses them: a number, or `default` (kept as the
 * word: commander stores a parser's null as an empty string).
 */
interface SessionLimitFlags {
  maxSessions?: number | 'default';
  maxRunningTurns?: number | 'default';
  maxWaitingTurns?: number | 'default';
  turnWeight?: number | 'default';
}

/** The admin API's `session_limits` from the flags given; undefined when none is. */
function sessionLimitsFromFlags(opts: SessionLimitFlags) {
  const given = Object.entries({
    sessions: opts.maxSessions,
    running_turns: opts.maxRunningTurns,
    waiting_turns: opts.maxWaitingTurns,
    weight: opts.turnWeight,
  }).filter(([, value]) => value !== undefined);
  return given.length > 0
    ? Object.fromEntries(given.map(([name, value]) => [name, value === 'default' ? null : value]))
    : undefined;
}

/**
 * `value` checked by the admin API's own schema of the same request, so the CLI (which writes to
 * Redis directly) stores nothing the API would refuse; a refusal names the flag.
 */
function checked<T extends z.ZodType>(schema: T, value: unknown): z.infer<T> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = issue?.path.join('.') ?? '';
  const flag = FLAG_OF[field] ?? (field || 'the options');
  throw new CliError(`${flag}: ${issue?.message ?? 'not valid'}.`);
}

function keyView(key: ApiKeyInfo) {
  return { ...key, redacted: redactApiKey(key.last4) };
}

/**
 * The operator CLI over the account store: `orgs create|list|get|update|delete`,
 * `keys create|list|revoke`, `usage <org>`. Results are printed as JSON.
 */
export async function buildCli(store: AccountStore, output: CliOutput): Promise<Command> {
  const commander: Commander = await import('commander');
  const integer = (value: string): number => {
    const n = value.trim() === '' ? NaN : Number(value);
    if (!Number.isSafeInteger(n) || n < 0) throw new commander.InvalidArgumentError('must be a whole number ≥ 0');
    return n;
  };
  // A session limit: a whole number (its bounds are the schema's, checked with the rest), or
  // `default` for the session service's configured default.
  const limit = (value: string): number | 'default' => {
    if (value === 'default') return value;
    // Decimal digits only: `1e3` or `0x10` for a limit is more likely a slip than a number meant.
    if (!/^[0-9]{1,16}$/.test(value))
      throw new commander.InvalidArgumentError("must be a whole number in decimal digits, or 'default'");
    return Number(value);
  };
  const withSessionLimitFlags = (command: Command, verb: string): Command =>
    command
      .option('--max-sessions <n>', `sessions the organization may hold, or 'default' ${verb}`, limit)
      .option('--max-running-turns <n>', `its turns running at once, or 'default' ${verb}`, limit)
      .option('--max-waiting-turns <n>', `its turns waiting at once, or 'default' ${verb}`, limit)
      .option('--turn-weight <n>', `its share of dispatch while others wait (1-1000), or 'default' ${verb}`, limit);
  const amount = (value: string): number => {
    const n = value.trim() === '' ? NaN : Number(value);
    if (!Number.isFinite(n)) throw new commander.InvalidArgumentError('must be a number');
    return n;
  };
  const idempotencyKey = (value: string): string => {
    if (!IDEMPOTENCY_KEY_PATTERN.test(value))
      throw new commander.InvalidArgumentError('must be 1-255 printable ASCII characters, as the admin API takes');
    return value;
  };
  const print = (value: unknown) => output.out(`${JSON.stringify(value, null, 2)}\n`);
  const program = new commander.Command('tollway')
    .description(
      "Manage Tollway organizations, API keys and usage (reads REDIS_URL, REDIS_SENTINELS, REDIS_PREFIX: the gateway's Redis settings).",
    )
    .configureOutput({ writeOut: output.out, writeErr: output.err })
    .exitOverride();

  const orgs = program.command('orgs').description('Organizations');
  withSessionLimitFlags(
    orgs
      .command('create')
      .description('Create an organization')
      .requiredOption('--name <name>', 'display name')
      .option('--id <id>', 'organization id (default: generated)')
      .option('--requests <n>', 'requests per minute', integer, 60)
      .option('--input-tokens <n>', 'input tokens per minute', integer, 100_000)
      .option('--output-tokens <n>', 'output tokens per minute', integer, 100_000)
      .option('--credit <usd>', 'initial credit, USD', amount, 0),
    "(the session service's, as when left out)",
  ).action(
    async (
      opts: SessionLimitFlags & {
        name: string;
        id?: string;
        requests: number;
        inputTokens: number;
        outputTokens: number;
        credit: number;
      },
    ) => {
      const request = checked(CreateOrganizationRequest, {
        id: opts.id,
        name: opts.name,
        budgets: { requests: opts.requests, input_tokens: opts.inputTokens, output_tokens: opts.outputTokens },
        credit: opts.credit,
        session_limits: sessionLimitsFromFlags(opts),
      });
      const { session_limits: limits, ...rest } = request;
      try {
        print(await store.createOrganization({ ...rest, sessionLimits: sessionLimitsOf(limits) }));
      } catch (err) {
        if (err instanceof AccountError) throw new CliError(err.message);
        throw err;
      }
    },
  );
  orgs
    .command('list')
    .description('List organizations')
    .action(async () => print(await store.listOrganizations()));
  orgs
    .command('get <org>')
    .description("Show one organization, with its session limits (null: the session service's default) and live turns")
    .action(async (orgId: string) => {
      const org = (await store.getOrganization(orgId)) ?? missingOrg(orgId);
      print({ ...org, turns: await store.getOrganizationTurns(orgId) });
    });
  withSessionLimitFlags(
    orgs
      .command('update <org>')
      .description('Change the name, budgets or session limits, or add credit')
      .option('--name <name>', 'display name')
      .option('--requests <n>', 'requests per minute', integer)
      .option('--input-tokens <n>', 'input tokens per minute', integer)
      .option('--output-tokens <n>', 'output tokens per minute', integer)
      .option('--add-credit <usd>', 'credit to add, USD (negative to correct)', amount),
    "to go back to the session service's",
  )
    .option(
      '--idempotency-key <key>',
      'apply this update once: the same command again with the same key changes nothing (for a run whose answer was lost)',
      idempotencyKey,
    )
    .action(
      async (
        orgId: string,
        opts: SessionLimitFlags & {
          name?: string;
          requests?: number;
          inputTokens?: number;
          outputTokens?: number;
          addCredit?: number;
          idempotencyKey?: string;
        },
      ) => {
        const given = Object.fromEntries(
          Object.entries({
            requests: opts.requests,
            input_tokens: opts.inputTokens,
            output_tokens: opts.outputTokens,
          }).filter(([, v]) => v !== undefined),
        );
        const request = checked(UpdateOrganizationRequest, {
          name: opts.name,
          budgets: Object.keys(given).length > 0 ? given : undefined,
          credit_top_up: opts.addCredit,
          session_limits: sessionLimitsFromFlags(opts),
        });
        const update = {
          name: request.name,
          budgets: request.budgets ?? {},
          creditTopUp: request.credit_top_up,
          sessionLimits: sessionLimitsOf(request.session_limits),
        };
        let updated;
        try {
          updated = await store.updateOrganizationOnce(orgId, update, opts.idempotencyKey ?? null);
        } catch (err) {
          const refused =
            err instanceof AccountError && ['idempotency_key_reused', 'credit_out_of_range'].includes(err.reason);
          if (refused) throw new CliError((err as AccountError).message);
          throw err;
        }
        if (!updated) missingOrg(orgId);
        print(updated.replayed ? { ...updated.organization, replayed: true } : updated.organization);
      },
    );
  orgs
    .command('delete <org>')
    .description('Delete an organization and revoke its keys')
    .action(async (orgId: string) => {
      if (!(await store.deleteOrganization(orgId))) missingOrg(orgId);
      print({ id: orgId, deleted: true });
    });

  const keys = program.command('keys').description('API keys');
  keys
    .command('create <org>')
    .description('Create a key; it is printed once and never again')
    .option('--name <name>', 'a label for the key')
    .option('--role <role>', 'standard (calls models) or admin (signs in to the console, manages keys)', 'standard')
    .action(async (orgId: string, opts: { name?: string; role: string }) => {
      const role = ApiKeyRole.safeParse(opts.role);
      if (!role.success) throw new CliError(`--role must be standard or admin, not '${opts.role}'.`);
      const request = checked(CreateApiKeyRequest, { name: opts.name, role: role.data });
      let created;
      try {
        created = await store.createKey(orgId, request.name, request.role);
      } catch (err) {
        if (err instanceof AccountError && err.reason === 'key_limit_reached') {
          throw new CliError(
            `Organization '${orgId}' holds ${store.maxKeysPerOrganization} live keys, the most one may: revoke one to make room, or raise MAX_KEYS_PER_ORGANIZATION.`,
          );
        }
        throw err;
      }
      print(created ? keyView(created) : missingOrg(orgId));
    });
  keys
    .command('list <org>')
    .description("List an organization's keys (redacted)")
    .action(async (orgId: string) => print(((await store.listKeys(orgId)) ?? missingOrg(orgId)).map(keyView)));
  keys
    .command('revoke <key-id>')
    .description('Revoke a key; every gateway replica refuses it within a second')
    .action(async (keyId: string) => {
      const revoked = await store.revokeKey(keyId);
      if (!revoked) throw new CliError(`No API key '${keyId}'.`);
      print(keyView(revoked));
    });

  program
    .command('usage <org>')
    .description('Requests, tokens and spend per model and per minute')
    .option('--minutes <n>', 'how many minutes back (1-120)', integer, 60)
    .action(async (orgId: string, opts: { minutes: number }) => {
      if (opts.minutes < 1 || opts.minutes > 120) throw new CliError('--minutes must be between 1 and 120.');
      print((await store.getUsage(orgId, opts.minutes)) ?? missingOrg(orgId));
    });
  return program;
}

function missingOrg(orgId: string): never {
  throw new CliError(`No organization '${orgId}'.`);
}

/**
 * Runs one command line (without `node` and the script name) and returns the exit code:
 * 0 done, 1 refused (unknown organization, bad option), 2 failed (Redis unreachable…).
 */
export async function runCli(args: readonly string[], store: AccountStore, output: CliOutput): Promise<number> {
  const program = await buildCli(store, output);
  try {
    await program.parseAsync([...args], { from: 'user' });
    return 0;
  } catch (err) {
    // Commander has printed its own errors (bad option, --help) already; only the exit code is left.
    if (isCommanderError(err)) return err.exitCode;
    if (err instanceof CliError) {
      output.err(`${err.message}\n`);
      return 1;
    }
    const message = err instanceof Error ? err.message : String(err);
    if (isRedisUnavailable(err)) {
      const where = output.redisAddress ? ` at ${output.redisAddress}` : '';
      output.err(
        `tollway: Redis${where} did not answer (${message}). Is it running, and are REDIS_URL (and REDIS_SENTINELS) right?\n`,
      );
    } else output.err(`tollway: ${message}\n`);
    return 2;
  }
}

function isCommanderError(err: unknown): err is { exitCode: number } {
  return err instanceof Error && typeof (err as { exitCode?: unknown }).exitCode === 'number' && 'code' in err;
}
