import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { createAccountStore, createKeyAuthenticator, deleteKeysWithPrefix } from '@tollway/accounts';
import { RedisAdmission } from '../../src/admission/redis-admission';

const prefix = `test-${randomUUID()}:`;
const redis = new Redis('redis://127.0.0.1:6379');
const store = createAccountStore({ redis, prefix });
const authenticator = createKeyAuthenticator({ redis, prefix });

afterAll(async () => {
  await authenticator.close();
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
});

const ENTRY = path.resolve(__dirname, '../../src/cli/main-cli.ts');
const ENV = { ...process.env, REDIS_PREFIX: prefix, REDIS_URL: 'redis://127.0.0.1:6379' };

/**
 * Runs one command through the real entry point, as `pnpm tollway …` does (commander is an ES
 * module, so the CLI is exercised in a child process rather than inside Jest's CommonJS runtime).
 * Resolves the JSON it printed; rejects with { code, stderr } on a non-zero exit.
 */
async function run(...args: string[]): Promise<unknown> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--conditions=@tollway/source', '--import', 'tsx', ENTRY, ...args],
    { env: ENV },
  );
  return JSON.parse(stdout);
}

describe('tollway CLI', () => {
  it('orgs create / get / update / list / delete', async () => {
    const id = `cli-${randomUUID().slice(0, 8)}`;
    const created = await run('orgs', 'create', '--name', 'Acme', '--id', id, '--requests', '5', '--credit', '2.5');
    expect(created).toMatchObject({ id, name: 'Acme', credit: 2.5, budgets: { requests: 5, input_tokens: 100_000 } });
    const updated = await run('orgs', 'update', id, '--output-tokens', '7', '--add-credit', '1');
    expect(updated).toMatchObject({ credit: 3.5, budgets: { requests: 5, output_tokens: 7 } });
    expect(await run('orgs', 'get', id)).toMatchObject({ id, credit: 3.5 });
    expect((await run('orgs', 'list')) as Array<{ id: string }>).toEqual(
      expect.arrayContaining([expect.objectContaining({ id })]),
    );
    expect(await run('orgs', 'delete', id)).toEqual({ id, deleted: true });
    await expect(run('orgs', 'delete', id)).rejects.toMatchObject({ code: 1, stderr: `No organization '${id}'.\n` });
  });

  it('refuses a bad number with a message naming the option', async () => {
    await expect(run('orgs', 'create', '--name', 'x', '--requests', '-1')).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining("'--requests <n>' argument '-1' is invalid"),
    });
  });

  it('keys create prints a working key once; keys list redacts; keys revoke stops it', async () => {
    const org = await store.createOrganization({
      name: 'K',
      budgets: { requests: 1, input_tokens: 1, output_tokens: 1 },
      credit: 1,
    });
    const created = (await run('keys', 'create', org.id, '--name', 'ops')) as { id: string; key: string };
    expect(await authenticator.authenticate(created.key)).toEqual({ orgId: org.id, keyId: created.id });
    const listed = (await run('keys', 'list', org.id)) as Array<{ redacted: string }>;
    expect(JSON.stringify(listed)).not.toContain(created.key);
    expect(listed[0]?.redacted).toBe(`tw-…${created.key.slice(-4)}`);
    expect(await run('keys', 'revoke', created.id)).toMatchObject({ id: created.id, revoked_at: expect.any(Number) });
    expect(await authenticator.authenticate(created.key)).toBeNull();
    await expect(run('keys', 'revoke', 'key_missing')).rejects.toMatchObject({ code: 1 });
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
    const usage = (await run('usage', org.id, '--minutes', '5')) as { totals: unknown; by_model: unknown[] };
    expect(usage.totals).toEqual({ requests: 1, input_tokens: 3, output_tokens: 4, spend: 0 });
    expect(usage.by_model).toHaveLength(1);
  });
});
