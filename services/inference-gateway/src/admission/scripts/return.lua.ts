import { BUCKET_LUA } from './bucket.lua';

/**
 * A replica gives back quota slices and capacity blocks it no longer uses (local-quota.ts): each
 * slice leaves its organization's slices hash, and what it still held goes back into the buckets
 * (up to the budget minus the other live slices); each block's leases leave the model's zset. A
 * slice that already expired is gone from the hash: its remainder is still put back, within the
 * same cap, so giving back late never lets the buckets exceed the budget.
 *
 * KEYS  per slice: the organization hash, bucket hash and slices hash; then per block the model's
 *       lease zset
 * ARGV[1]  now, ms since the epoch
 * ARGV[2]  S, the number of slices; then per slice: slice id, requests, input tokens and output
 *          tokens still unused (negative when its requests used more than it held)
 * then     B, the number of blocks; then per block: n, then n lease ids
 * Returns  the number of slices given back to an organization that still exists.
 */
export const RETURN_LUA = `${BUCKET_LUA}
local now = tonumber(ARGV[1])
local a = 2
local k = 1
local returned = 0

local slices = tonumber(ARGV[a]); a = a + 1
for _ = 1, slices do
  local org_key, bucket_key, slices_key = KEYS[k], KEYS[k + 1], KEYS[k + 2]
  k = k + 3
  local id = ARGV[a]
  local back = {tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])}
  a = a + 4
  redis.call('HDEL', slices_key, id)
  local org = redis.call('HMGET', org_key, 'budget_requests', 'budget_input_tokens', 'budget_output_tokens')
  if org[1] then
    returned = returned + 1
    local caps = {tonumber(org[1]) or 0, tonumber(org[2]) or 0, tonumber(org[3]) or 0}
    -- Negative: the slice's requests used more than it held (the engine counted more tokens
    -- than reserved); the excess is charged here.
    add_to_buckets(bucket_key, slices_key, caps, back, now)
  end
end

local blocks = tonumber(ARGV[a]); a = a + 1
for _ = 1, blocks do
  local n = tonumber(ARGV[a]); a = a + 1
  if n > 0 then redis.call('ZREM', KEYS[k], unpack(ARGV, a, a + n - 1)) end
  a = a + n
  k = k + 1
end
return returned
`;
