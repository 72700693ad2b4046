import type { Redis } from 'ioredis';
import type { BucketBalances, Organization } from './account.types';
import type { AccountKeys } from './redis-keys';

const KINDS = ['requests', 'input_tokens', 'output_tokens'] as const;

/**
 * Reads an organization's three token buckets as the admission Lua would see them now: a bucket
 * refills at budget/60 000 per ms since its stamp and a missing one is full. Tokens that live quota
 * slices hold still count as left (they are in the bucket until used), so `remaining` is the bucket
 * plus the live slices, capped at the budget. Read-only: unlike the Lua, it writes nothing back.
 */
export async function readBucketBalances(
  redis: Redis,
  keys: AccountKeys,
  org: Organization,
  nowMs: number,
): Promise<BucketBalances> {
  const [state, slices] = await Promise.all([redis.hgetall(keys.buckets(org.id)), redis.hgetall(keys.slices(org.id))]);
  const held = [0, 0, 0];
  for (const value of Object.values(slices)) {
    const parts = value.split('|').map(Number);
    if (!((parts[4] ?? 0) > nowMs)) continue;
    for (let i = 0; i < 3; i++) held[i] = (held[i] ?? 0) + (parts[i] || 0);
  }
  const balances = {} as BucketBalances;
  KINDS.forEach((kind, i) => {
    const limit = org.budgets[kind];
    const heldHere = held[i] ?? 0;
    const balance = Number(state[kind]);
    const ts = Number(state[`${kind}:ts`]);
    let inBucket = limit - heldHere;
    if (state[kind] !== undefined && state[`${kind}:ts`] !== undefined && Number.isFinite(balance)) {
      inBucket = Math.min(limit - heldHere, balance + (nowMs > ts ? ((nowMs - ts) * limit) / 60_000 : 0));
    }
    balances[kind] = { limit, remaining: Math.max(0, Math.min(limit, Math.floor(inBucket + heldHere))) };
  });
  return balances;
}
