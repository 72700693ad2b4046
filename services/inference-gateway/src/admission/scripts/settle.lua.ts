import { BUCKET_LUA } from './bucket.lua';

/**
 * Settlement of a batch of finished requests, in one round trip (see SettlementBatcher, which
 * groups what finished while the previous batch was on its way and sums it per organization):
 * frees their capacity leases, corrects each organization's token buckets to the actual usage
 * (refunding unused output reservations, or charging beyond them), charges the spend against
 * credit, and records usage per minute and model for the usage API. A request that never reached
 * an engine (a release) gives back its whole reservation, its request included, and records nothing.
 *
 * A batch is applied once however often it is sent: its number goes into its writer's marks
 * first, and a batch already marked changes nothing. The gateway sends a batch again when it could
 * not learn whether it ran (a connection broken before the answer, a reply timeout).
 *
 * KEYS[1]  the writer's marks for the minute the batch was first sent (settlementMarks)
 * then     in the order ARGV walks them: the lease zsets, then per organization its hash, its
 *          bucket hash, its slices hash (bucket.lua.ts) and its usage hashes
 *          ({org:<id>}:usage:<epoch minute>).
 * ARGV[1]  now, ms since the epoch
 * ARGV[2]  usage retention, seconds
 * ARGV[3]  the organization-change channel: an organization whose credit, less the allowances its
 *          quota slices hold, is spent gets published there, so every replica gives its slice back
 *          and the next request meets the 402 in Redis
 * ARGV[4]  the batch's number, unique to its writer
 * ARGV[5]  how long the marks are kept, ms (longer than the writer sends a batch again)
 * ARGV[6]  L, the number of lease zsets; then per zset: n, then n lease ids
 * then     O, the number of organizations; then per organization: its id,
 *          refund of requests, of input tokens, of output tokens (negative = charge more),
 *          spend (USD), U; then U usage entries: model id, requests, input tokens, output tokens, spend
 * Returns  the number of organizations settled (a deleted organization is skipped), or -1 when
 *          the batch had been applied already.
 *
 * Redis Cluster: the lease zsets live in their models' slots; see admit.lua.ts.
 */
export const SETTLE_LUA = `${BUCKET_LUA}
local now = tonumber(ARGV[1])
local retention = tonumber(ARGV[2])
local channel = ARGV[3]
if redis.call('HSETNX', KEYS[1], ARGV[4], 1) == 0 then
  return -1
end
redis.call('PEXPIRE', KEYS[1], ARGV[5])
local a = 6
local k = 2

local lease_keys = tonumber(ARGV[a]); a = a + 1
for _ = 1, lease_keys do
  local n = tonumber(ARGV[a]); a = a + 1
  redis.call('ZREM', KEYS[k], unpack(ARGV, a, a + n - 1))
  a = a + n
  k = k + 1
end

local settled = 0
local orgs = tonumber(ARGV[a]); a = a + 1
for _ = 1, orgs do
  local org_key, bucket_key, slices_key = KEYS[k], KEYS[k + 1], KEYS[k + 2]
  k = k + 3
  local org_id = ARGV[a]
  local refunds = {tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])}
  local spend = tonumber(ARGV[a + 4])
  local entries = tonumber(ARGV[a + 5])
  a = a + 6
  local org = redis.call('HMGET', org_key, 'budget_requests', 'budget_input_tokens', 'budget_output_tokens')
  if org[1] then
    settled = settled + 1
    local caps = {tonumber(org[1]) or 0, tonumber(org[2]) or 0, tonumber(org[3]) or 0}
    -- Requests admitted from a slice refunded it in process: their refunds here are zero.
    add_to_buckets(bucket_key, slices_key, caps, refunds, now)
    if spend > 0 then
      local credit = tonumber(redis.call('HINCRBYFLOAT', org_key, 'credit', -spend))
      if redis.call('EXISTS', slices_key) == 1 and credit - held_by_slices(slices_key, now)[4] <= 0 then
        redis.call('PUBLISH', channel, org_id)
      end
    end
  end
  for _ = 1, entries do
    if org[1] then
      local usage_key = KEYS[k]
      local model = ARGV[a] .. '|'
      local requests, input, output, cost = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
      redis.call('HINCRBY', usage_key, 'requests', requests)
      redis.call('HINCRBY', usage_key, 'input_tokens', input)
      redis.call('HINCRBY', usage_key, 'output_tokens', output)
      redis.call('HINCRBYFLOAT', usage_key, 'spend', cost)
      redis.call('HINCRBY', usage_key, model .. 'requests', requests)
      redis.call('HINCRBY', usage_key, model .. 'input_tokens', input)
      redis.call('HINCRBY', usage_key, model .. 'output_tokens', output)
      redis.call('HINCRBYFLOAT', usage_key, model .. 'spend', cost)
      redis.call('EXPIRE', usage_key, retention)
    end
    k = k + 1
    a = a + 5
  end
end
return settled
`;
