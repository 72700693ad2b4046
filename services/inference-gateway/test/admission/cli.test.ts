import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import {
  createAccountStore,
  createKeyAuthenticator,
  deleteKeysWithPrefix,
  sessionSchedulerKeys,
} from '@tollway/accounts';
import { RedisAdmission } from '../../src/admission/redis-admission';
import { nodeCommand } from './gateway-process';

const prefix = `test-${randomUUID()}:`;
const redis = new Redis('redis://127.0.0.1:6379');
const store = createAccountStore({ redis, prefix });
const authenticator = createKeyAuthenticator({ redis, prefix });
const ENV = { ...process.env, REDIS_PREFIX: prefix, REDIS_URL: 'redis://127.0.0.1:6379' };
const exec = promisify(execFile);

afterAll(async () => {
  await authenticator.close();
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
});

interface Result {
  code: number;
  out: string;
  err: string;
}

/**
 * Runs CLI command lines one after another in one child process (commander is an ES module,
 * which Jest's CommonJS runtime cannot load): the same `runCli` that `pnpm tollway` runs.
 */
async function run(...commands: string[][]): Promise<Result[]> {
  const [node, ...args] = nodeCommand(path.join(__dirname, 'cli-driver.ts'));
  const { stdout } = await exec(node!, [...args, JSON.stringify(commands)], { env: ENV });
  return JSON.parse(stdout) as Result[];
}

const json = (result: Result | undefined): unknown => {
  expect(result?.code).toBe(0);
  return JSON.parse(result!.out);
};

/** An organization with the smallest budgets, for the key commands. */
function smallOrg(name: string) {
  return store.createOrganization({ name, budgets: { requests: 1, input_tokens: 1, output_tokens: 1 }, credit: 1 });
}

describe('tollway CLI', () => {
  it('orgs create / update / get / list / delete, and refusals with exit code 1', async () => {
    const id = `cli-${randomUUID().slice(0, 8)}`;
    const results = await run(
      ['orgs', 'create', '--name', 'Acme', '--id', id, '--requests', '5', '--credit', '2.5'],
      ['orgs', 'update', id, '--output-tokens', '7', '--add-credit', '1'],
      ['orgs', 'get', id],
      ['orgs', 'list'],
      ['orgs', 'delete', id],
      ['orgs', 'get', id],
      ['orgs', 'delete', id],
      ['orgs', 'create', '--name', 'x', '--requests', '-1'],
      ['orgs', 'create', '--name', 'Again', '--id', 'bad id'],
    );
    expect(json(results[0])).toMatchObject({
      id,
      name: 'Acme',
      credit: 2.5,
      budgets: { requests: 5, input_tokens: 100_000 },
    });
    expect(json(results[1])).toMatchObject({ credit: 3.5, budgets: { requests: 5, output_tokens: 7 } });
    expect(json(results[2])).toMatchObject({ id, credit: 3.5 });
    expect(json(results[3])).toEqual(expect.arrayContaining([expect.objectContaining({ id })]));
    expect(json(results[4])).toEqual({ id, deleted: true });
    expect(results[5]).toEqual({ code: 1, out: '', err: `No organization '${id}'.\n` });
    expect(results[6]?.code).toBe(1);
    expect(results[7]?.code).toBe(1);
    expect(results[7]?.err).toContain("'--requests <n>' argument '-1' is invalid");
    expect(results[8]).toMatchObject({ code: 1, err: expect.stringContaining('--id: must be 1-64 letters') });
  });

  it('refuses what the admin API would refuse, naming the flag, and stores none of it', async () => {
    const id = `cli-${randomUUID().slice(0, 8)}`;
    const results = await run(
      ['orgs', 'create', '--name', 'Fine', '--id', id],
      ['orgs', 'update', id, '--add-credit', '1e300'],
      ['orgs', 'update', id, '--requests', '99999999999999'],
      ['orgs', 'update', id, '--name', ''],
      ['orgs', 'update', id, '--name', 'bell\u0007'],
      ['orgs', 'update', id, '--requests', ''],
      ['orgs', 'update', id],
      ['orgs', 'create', '--name', 'Broke', '--credit=-50'],
      ['orgs', 'create', '--name', 'x'.repeat(5000)],
      ['keys', 'create', id, '--name', 'line\nbreak'],
      ['orgs', 'get', id],
    );
    expect(json(results[0])).toMatchObject({ id, name: 'Fine', credit: 0 });
    const refusals = results.slice(1, -1);
    for (const result of refusals) expect(result).toMatchObject({ code: 1, out: '' });
    expect(refusals.map((result) => result.err.split(':')[0])).toEqual([
      '--add-credit',
      '--requests',
      '--name',
      '--name',
      'error',
      'the options',
      '--credit',
      '--name',
      '--name',
    ]);
    // Nothing changed: the organization is as it was created, with no key.
    expect(json(results.at(-1))).toMatchObject({ id, name: 'Fine', credit: 0, budgets: { requests: 60 } });
    expect(await store.listKeys(id)).toEqual([]);
  });

  it("orgs create / update set the session limits ('default' resets one); orgs get shows them and the live turns", async () => {
    const id = `cli-limits-${randomUUID().slice(0, 8)}`;
    // The session service's keys of the organization, as it keeps them.
    const scheduler = sessionSchedulerKeys(prefix);
    await redis.zadd(scheduler.sessions(id), 1, 'sess_1');
    await redis.hset(scheduler.scheduler(id), { running: '1', waiting: '5' });
    const results = await run(
      ['orgs', 'create', '--name', 'Limited', '--id', id, '--max-sessions', '10', '--turn-weight', '3'],
      ['orgs', 'update', id, '--max-running-turns', '4', '--turn-weight', 'default'],
      ['orgs', 'get', id],
      ['orgs', 'update', id, '--turn-weight', '1001'],
      ['orgs', 'update', id, '--max-running-turns', '0'],
      ['orgs', 'update', id, '--max-waiting-turns', 'lots'],
      ['orgs', 'update', id, '--max-sessions', '1e3'],
      ['orgs', 'create', '--name', 'Too many', '--max-sessions', '1000000001'],
      ['orgs', 'update', id, '--max-sessions', 'default'],
      ['orgs', 'get', id],
    );
    expect(json(results[0])).toMatchObject({
      id,
      sessionLimits: { sessions: 10, runningTurns: null, waitingTurns: null, weight: 3 },
    });
    expect(json(results[1])).toMatchObject({
      sessionLimits: { sessions: 10, runningTurns: 4, waitingTurns: null, weight: null },
    });
    expect(json(results[2])).toMatchObject({
      sessionLimits: { sessions: 10, runningTurns: 4, waitingTurns: null, weight: null },
      turns: { sessions: 1, running: 1, waiting: 5 },
    });
    const refusals = results.slice(3, 8);
    for (const result of refusals) expect(result).toMatchObject({ code: 1, out: '' });
    expect(refusals.map((result) => result.err.split(':')[0])).toEqual([
      '--turn-weight',
      '--max-running-turns',
      'error',
      'error',
      '--max-sessions',
    ]);
    expect(results[6]!.err).toContain("argument '1e3' is invalid");
    expect(results[5]!.err).toContain(
      "'--max-waiting-turns <n>' argument 'lots' is invalid. must be a whole number in decimal digits, or 'default'",
    );
    expect(json(results[9])).toMatchObject({
      sessionLimits: { sessions: null, runningTurns: 4, waitingTurns: null, weight: null },
    });
    expect(await redis.hexists(store.keys.org(id), 'limit_sessions')).toBe(0);
  });

  it('orgs update --idempotency-key applies an update once, and refuses another update under that key', async () => {
    const org = await smallOrg('Idem');
    const results = await run(
      ['orgs', 'update', org.id, '--add-credit', '2', '--idempotency-key', 'topup-1'],
      ['orgs', 'update', org.id, '--add-credit', '2', '--idempotency-key', 'topup-1'],
      ['orgs', 'update', org.id, '--add-credit', '3', '--idempotency-key', 'topup-1'],
      ['orgs', 'update', org.id, '--add-credit', '2', '--idempotency-key', 'topup-2'],
    );
    expect(json(results[0])).toMatchObject({ id: org.id, credit: 3 });
    expect(json(results[0])).not.toHaveProperty('replayed');
    expect(json(results[1])).toMatchObject({ id: org.id, credit: 3, replayed: true });
    expect(results[2]).toMatchObject({ code: 1, out: '' });
    expect(results[2]!.err).toContain('Idempotency-Key was used with another request');
    expect(json(results[3])).toMatchObject({ credit: 5 });
    expect((await store.getOrganization(org.id))?.credit).toBe(5);
  });

  it('orgs update --add-credit refuses a top-up that would take the credit past 1e12, changing nothing', async () => {
    const org = await smallOrg('Rich');
    const results = await run(
      ['orgs', 'update', org.id, '--add-credit', '1e12'],
      ['orgs', 'update', org.id, '--add-credit', '-2e12'],
    );
    expect(results[0]).toMatchObject({ code: 1, out: '' });
    expect(results[0]!.err).toContain('past 1000000000000 either way');
    expect(results[1]).toMatchObject({ code: 1, out: '' });
    expect((await store.getOrganization(org.id))?.credit).toBe(1);
  });

  it.each([
    ['256 characters', 'k'.repeat(256)],
    ['a character outside ASCII', 'paiement-été'],
    ['a control character', 'a\tb'],
  ])('orgs update --idempotency-key refuses a key the admin API would (%s), changing nothing', async (_name, key) => {
    const org = await smallOrg('IdemBad');
    const [result] = await run(['orgs', 'update', org.id, '--add-credit', '2', '--idempotency-key', key]);
    expect(result).toMatchObject({ code: 1, out: '' });
    expect(result!.err).toContain('printable ASCII');
    expect((await store.getOrganization(org.id))?.credit).toBe(1);
  });

  it('keys create prints a working key once; keys list redacts; keys revoke stops it', async () => {
    const org = await smallOrg('K');
    const [createdResult, listedResult] = await run(
      ['keys', 'create', org.id, '--name', 'ops'],
      ['keys', 'list', org.id],
    );
    const created = json(createdResult) as { id: string; key: string };
    expect(await authenticator.authenticate(created.key)).toEqual({
      orgId: org.id,
      keyId: created.id,
      role: 'standard',
    });
    const listed = json(listedResult) as Array<{ redacted: string }>;
    expect(JSON.stringify(listed)).not.toContain(created.key);
    expect(listed[0]?.redacted).toBe(`tw-…${created.key.slice(-4)}`);

    const [revoked, missing] = await run(['keys', 'revoke', created.id], ['keys', 'revoke', 'key_missing']);
    expect(json(revoked)).toMatchObject({ id: created.id, revoked_at: expect.any(Number) });
    expect(await authenticator.authenticate(created.key)).toBeNull();
    expect(missing?.code).toBe(1);
  });

  it('keys create --role admin makes a console admin key; an unknown role is refused', async () => {
    const org = await smallOrg('Roles');
    const [admin, bogus] = await run(
      ['keys', 'create', org.id, '--role', 'admin'],
      ['keys', 'create', org.id, '--role', 'root'],
    );
    const created = json(admin) as { id: string; key: string; role: string };
    expect(created.role).toBe('admin');
    expect(await authenticator.authenticate(created.key)).toEqual({ orgId: org.id, keyId: created.id, role: 'admin' });
    expect(bogus).toMatchObject({ code: 1, err: "--role must be standard or admin, not 'root'.\n" });
    expect(await store.listKeys(org.id)).toHaveLength(1);
  });

  it('keys create past MAX_KEYS_PER_ORGANIZATION says so and exits 1, through the real entry point', async () => {
    const org = await smallOrg('Capped');
    await store.createKey(org.id);
    await store.createKey(org.id);
    const [node, ...args] = nodeCommand(path.resolve(__dirname, '../../src/cli/main-cli.ts'));
    const env = { ...ENV, MAX_KEYS_PER_ORGANIZATION: '2' };
    const refused = await exec(node!, [...args, 'keys', 'create', org.id], { env }).then(
      () => ({ code: 0, stderr: '' }),
      (err: { code: number; stderr: string }) => err,
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(
      `Organization '${org.id}' holds 2 live keys, the most one may: revoke one to make room, or raise MAX_KEYS_PER_ORGANIZATION.\n`,
    );
    expect(await store.listKeys(org.id)).toHaveLength(2);
  });

  it('usage shows what settlement recorded', async () => {
    const org = await store.createOrganization({
      name: 'U',
      budgets: { requests: 10, input_tokens: 1000, output_tokens: 1000 },
      credit: 1,
    });
    const ticket = await new RedisAdmission({ redis, prefix }).admit({
      principal: { orgId: org.id, keyId: 'k' },
      modelId: 'a/b',
      inputTokens: 3,
      reservedOutputTokens: 9,
      capacity: null,
      pricePerMillion: { input: 0, output: 0 },
    });
    await ticket.settle({ prompt_tokens: 3, completion_tokens: 4 });
    const [usage, tooMany] = await run(['usage', org.id, '--minutes', '5'], ['usage', org.id, '--minutes', '500']);
    const report = json(usage) as { totals: unknown; by_model: unknown[] };
    expect(report.totals).toEqual({ requests: 1, input_tokens: 3, output_tokens: 4, spend: 0 });
    expect(report.by_model).toHaveLength(1);
    expect(tooMany?.code).toBe(1);
  });

  it('runs through its real entry point, reading REDIS_PREFIX from the environment', async () => {
    const [node, ...args] = nodeCommand(path.resolve(__dirname, '../../src/cli/main-cli.ts'));
    const id = `entry-${randomUUID().slice(0, 8)}`;
    const { stdout } = await exec(node!, [...args, 'orgs', 'create', '--name', 'Entry', '--id', id], { env: ENV });
    expect(JSON.parse(stdout)).toMatchObject({ id, name: 'Entry' });
    expect((await store.getOrganization(id))?.name).toBe('Entry');
  });

  it('says in one line that Redis did not answer, naming it without its password, and exits 2', async () => {
    const [node, ...args] = nodeCommand(path.resolve(__dirname, '../../src/cli/main-cli.ts'));
    // Nothing listens on port 9 (discard); the password must not be shown.
    const env = { ...ENV, REDIS_URL: 'redis://:hunter2@127.0.0.1:9?password=hunter3' };
    const failed = await exec(node!, [...args, 'orgs', 'list'], { env }).then(
      () => null,
      (err: { code: number; stdout: string; stderr: string }) => err,
    );
    expect(failed).toMatchObject({ code: 2, stdout: '' });
    expect(failed!.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(
        /^tollway: Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:9\?password=\*\*\* did not answer \(.+\)\. Is it running/,
      ),
    ]);
    expect(failed!.stderr).not.toContain('hunter2');
    expect(failed!.stderr).not.toContain('hunter3');
  });

  it('refuses a REDIS_URL that is not a Redis address before doing anything', async () => {
    const [node, ...args] = nodeCommand(path.resolve(__dirname, '../../src/cli/main-cli.ts'));
    for (const bad of ['notaurl', 'http://127.0.0.1:6379', 'redis://']) {
      const failed = await exec(node!, [...args, 'orgs', 'list'], { env: { ...ENV, REDIS_URL: bad } }).then(
        () => null,
        (err: { code: number; stderr: string }) => err,
      );
      expect([bad, failed?.code]).toEqual([bad, 1]);
      expect(failed!.stderr).toMatch(
        /^tollway: Invalid configuration: REDIS_URL \(--redis-url\): must be a redis:\/\/ /,
      );
      expect(failed!.stderr.trim().split('\n')).toHaveLength(1);
    }
  });
});
