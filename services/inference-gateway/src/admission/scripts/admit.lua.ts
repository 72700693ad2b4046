import { BUCKET_LUA } from './bucket.lua';

/**
 * Admission of a batch of chat completions, in one round trip, each in turn exactly as if it came
 * alone (AdmitBatcher sends together the admissions of one event-loop turn): credit, the
 * organization's three token buckets, then the model's capacity lease. Nothing is taken for a
 * request unless everything admits it. An admitted request may also take out, for its replica, a
 * quota slice of its organization and a block of capacity leases of its model (local-quota.ts),
 * when there is plenty of both left.
 *
 * Buckets hold `capacity = per-minute budget` tokens and refill continuously at budget/60 000 per
 * ms, up to the budget minus what live slices hold; a missing bucket is full. Balances are stored
 * with the time they were computed at, and brought up to date lazily (bucket.lua.ts).
 *
 * KEYS, four per request i (1-based):
 * KEYS[4i-3]  organization hash        {org:<id>}:org
 * KEYS[4i-2]  bucket hash              {org:<id>}:buckets   fields <kind>, <kind>:ts
 * KEYS[4i-1]  model lease zset         {model:<id>}:leases  member = lease id, score = expiry (ms)
 * KEYS[4i]    slices hash              {org:<id>}:slices    see bucket.lua.ts
 * ARGV[1]     now, ms since the epoch (the caller's clock, injectable in tests)
 * ARGV[2]     slice fraction: a slice takes this share of each budget
 * ARGV[3]     slice minimum: a slice must cover at least this many requests like the one asking
 * ARGV[4]     slice lifetime in Redis, ms
 * then eleven ARGV per request, from ARGV[11i-6]:
 *   input tokens of the request; output tokens reserved;
 *   model capacity (concurrent requests), or -1 for unlimited (the lease zset untouched);
 *   lease id; lease time, ms;
 *   '1' when the output reservation is the gateway's default (the client set no max_tokens):
 *   it is then capped at the output budget, so such a request is never refused as too large;
 *   slice id to grant, or '' for none; the model's input and output price (USD per million);
 *   capacity block id to grant, or '' for none; block size (leases)
 * Returns  one reply per request, in order:
 *          {0, limit_req, remaining_req, reset_req_ms, limit_tok, remaining_tok, reset_tok_ms,
 *           output_reserved, slice_granted 0|1, balance_req, balance_in, balance_out (strings,
 *           after the slice), slice_req, slice_in, slice_out, slice_usd (string), limit_in,
 *           limit_out, block_granted 0|1}  admitted
 *          {1, bucket_index (1 requests, 2 input_tokens, 3 output_tokens), retry_ms, never_fits 0|1, budget}
 *          {2}   out of credit
 *          {3}   model at capacity
 *          {-1}  no such organization
 *
 * Redis Cluster: the lease zset lives in the model's slot, not the organization's. This script is
 * meant for a single Redis (standalone or Sentinel), which is what the gateway supports; see the README.
 */
export const ADMIT_LUA = `${BUCKET_LUA}
local now = tonumber(ARGV[1])
local slice_fraction = tonumber(ARGV[2])
local slice_minimum = tonumber(ARGV[3])
local slice_ttl = tonumber(ARGV[4])

local function admit(org_key, bucket_key, lease_key, slices_key, input, output, capacity_arg, lease_id, lease_ms_arg,
    is_default, slice_id, price_in, price_out, block_id, block_size)
  local org = redis.call('HMGET', org_key, 'budget_requests', 'budget_input_tokens', 'budget_output_tokens', 'credit')
  if not org[1] then return {-1} end
  local held = held_by_slices(slices_key, now)
  -- Credit allowances of slices are held against the balance (see local-quota.ts).
  local credit = (tonumber(org[4]) or 0) - held[4]
  if credit <= 0 then return {2} end

  local caps = {tonumber(org[1]) or 0, tonumber(org[2]) or 0, tonumber(org[3]) or 0}
  local costs = {1, tonumber(input), tonumber(output)}
  if is_default == '1' and costs[3] > caps[3] then costs[3] = caps[3] end
  local state = redis.call('HMGET', bucket_key, 'requests', 'requests:ts', 'input_tokens', 'input_tokens:ts',
    'output_tokens', 'output_tokens:ts')

  local balances = {}
  local stamps = {}
  for i = 1, 3 do
    balances[i], stamps[i] = refilled(tonumber(state[2 * i - 1]), tonumber(state[2 * i]), caps[i], held[i], now)
  end

  local function ms_to_full(i, balance)
    if caps[i] <= 0 or balance >= caps[i] then return 0 end
    return math.ceil((caps[i] - balance) * 60000 / caps[i])
  end

  -- A request bigger than a whole budget can never be admitted: say so rather than ask for a retry.
  for i = 1, 3 do
    if costs[i] > caps[i] then return {1, i, math.max(1, ms_to_full(i, balances[i])), 1, caps[i]} end
  end

  local refused = 0
  local retry_ms = 0
  for i = 1, 3 do
    if costs[i] > balances[i] then
      if refused == 0 then refused = i end
      -- Wait for the slowest bucket, so a retry after retry_ms finds all three ready.
      retry_ms = math.max(retry_ms, math.ceil((costs[i] - balances[i]) * 60000 / caps[i]))
    end
  end
  if refused > 0 then return {1, refused, math.max(1, retry_ms), 0, caps[refused]} end

  local capacity = tonumber(capacity_arg)
  local lease_ms = tonumber(lease_ms_arg)
  if capacity >= 0 then
    redis.call('ZREMRANGEBYSCORE', lease_key, '-inf', now)
    if redis.call('ZCARD', lease_key) >= capacity then return {3} end
    redis.call('ZADD', lease_key, now + lease_ms, lease_id)
    redis.call('PEXPIRE', lease_key, lease_ms * 2)
  end

  for i = 1, 3 do balances[i] = balances[i] - costs[i] end

  -- The token headers describe whichever token bucket is nearer its limit (smaller share left).
  local t = 2
  if caps[3] > 0 and (caps[2] <= 0 or balances[3] / caps[3] < balances[2] / caps[2]) then t = 3 end
  local reply = {0, caps[1], math.max(0, math.floor(balances[1])), ms_to_full(1, balances[1]),
    caps[t], math.max(0, math.floor(balances[t])), ms_to_full(t, balances[t]), costs[3]}

  -- A slice only while every bucket stays at least half full after it, and the credit left covers
  -- twice its allowance: near a limit, every request is admitted here, one by one, exactly.
  local granted = 0
  local sizes = {0, 0, 0}
  local usd = 0
  if slice_id ~= '' then
    for i = 1, 3 do sizes[i] = math.floor(caps[i] * slice_fraction) end
    usd = (sizes[2] * tonumber(price_in) + sizes[3] * tonumber(price_out)) / 1000000
    local ok = credit >= 2 * usd and sizes[1] >= slice_minimum
    for i = 1, 3 do
      if sizes[i] < costs[i] * slice_minimum or balances[i] - sizes[i] < caps[i] / 2 then ok = false end
    end
    if ok then
      granted = 1
      for i = 1, 3 do balances[i] = balances[i] - sizes[i] end
      redis.call('HSET', slices_key, slice_id,
        string.format('%d|%d|%d|%.17g|%d', sizes[1], sizes[2], sizes[3], usd, now + slice_ttl))
      redis.call('PEXPIRE', slices_key, slice_ttl * 2)
    else
      sizes = {0, 0, 0}
      usd = 0
    end
  end

  redis.call('HSET', bucket_key, 'requests', tostring(balances[1]), 'requests:ts', stamps[1],
    'input_tokens', tostring(balances[2]), 'input_tokens:ts', stamps[2],
    'output_tokens', tostring(balances[3]), 'output_tokens:ts', stamps[3])

  -- A block of leases only while the model stays at most half busy after it.
  local block_granted = 0
  local size = tonumber(block_size) or 0
  if capacity >= 0 and block_id ~= '' and size > 0 then
    if capacity - redis.call('ZCARD', lease_key) - size >= capacity / 2 then
      local members = {}
      for j = 1, size do
        members[2 * j - 1] = now + lease_ms
        members[2 * j] = block_id .. ':' .. j
      end
      redis.call('ZADD', lease_key, unpack(members))
      redis.call('PEXPIRE', lease_key, lease_ms * 2)
      block_granted = 1
    end
  end

  reply[9] = granted
  reply[10] = tostring(balances[1])
  reply[11] = tostring(balances[2])
  reply[12] = tostring(balances[3])
  reply[13] = sizes[1]
  reply[14] = sizes[2]
  reply[15] = sizes[3]
  reply[16] = string.format('%.17g', usd)
  reply[17] = caps[2]
  reply[18] = caps[3]
  reply[19] = block_granted
  return reply
end

local replies = {}
for i = 1, #KEYS / 4 do
  local a = 11 * i - 6
  replies[i] = admit(KEYS[4 * i - 3], KEYS[4 * i - 2], KEYS[4 * i - 1], KEYS[4 * i], ARGV[a], ARGV[a + 1],
    ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], ARGV[a + 7], ARGV[a + 8], ARGV[a + 9],
    ARGV[a + 10])
end
return replies
`;
