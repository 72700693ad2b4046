/**
 * Admission of one chat completion, in one round trip: credit, the organization's three token
 * buckets, then the model's capacity lease. Nothing is taken unless everything admits.
 *
 * Buckets hold `capacity = per-minute budget` tokens and refill continuously at budget/60 000 per
 * ms; a missing bucket is full. Balances are stored with the time they were computed at, and
 * brought up to date lazily here and in settle.lua.
 *
 * KEYS[1]  organization hash        {org:<id>}:org
 * KEYS[2]  bucket hash              {org:<id>}:buckets   fields <kind>, <kind>:ts
 * KEYS[3]  model lease zset         {model:<id>}:leases  member = lease id, score = expiry (ms)
 * ARGV[1]  now, ms since the epoch (the caller's clock, injectable in tests)
 * ARGV[2]  input tokens of the request
 * ARGV[3]  output tokens reserved
 * ARGV[4]  model capacity (concurrent requests), or -1 for unlimited (KEYS[3] untouched)
 * ARGV[5]  lease id
 * ARGV[6]  lease time, ms
 * ARGV[7]  '1' when the output reservation is the gateway's default (the client set no max_tokens):
 *          it is then capped at the output budget, so such a request is never refused as too large
 * Returns  {0, limit_req, remaining_req, reset_req_ms, limit_tok, remaining_tok, reset_tok_ms,
 *           output_reserved}  admitted
 *          {1, bucket_index (1 requests, 2 input_tokens, 3 output_tokens), retry_ms, never_fits 0|1, budget}
 *          {2}   out of credit
 *          {3}   model at capacity
 *          {-1}  no such organization
 *
 * Redis Cluster: KEYS[3] lives in the model's slot, not the organization's. This script is meant
 * for a single Redis (standalone or Sentinel), which is what the gateway supports; see the README.
 */
export const ADMIT_LUA = `
local now = tonumber(ARGV[1])
local org = redis.call('HMGET', KEYS[1], 'budget_requests', 'budget_input_tokens', 'budget_output_tokens', 'credit')
if not org[1] then return {-1} end
if (tonumber(org[4]) or 0) <= 0 then return {2} end

local caps = {tonumber(org[1]) or 0, tonumber(org[2]) or 0, tonumber(org[3]) or 0}
local costs = {1, tonumber(ARGV[2]), tonumber(ARGV[3])}
if ARGV[7] == '1' and costs[3] > caps[3] then costs[3] = caps[3] end
local state = redis.call('HMGET', KEYS[2], 'requests', 'requests:ts', 'input_tokens', 'input_tokens:ts',
  'output_tokens', 'output_tokens:ts')

local balances = {}
local stamps = {}
for i = 1, 3 do
  local cap = caps[i]
  local balance = tonumber(state[2 * i - 1])
  local ts = tonumber(state[2 * i])
  if balance == nil or ts == nil then
    balance = cap
    ts = now
  elseif now > ts and cap > 0 then
    balance = balance + (now - ts) * cap / 60000
  end
  if balance > cap then balance = cap end
  balances[i] = balance
  -- A replica whose clock lags must not rewind the stamp (that would refill twice).
  stamps[i] = math.max(now, ts)
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

local capacity = tonumber(ARGV[4])
if capacity >= 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  if redis.call('ZCARD', KEYS[3]) >= capacity then return {3} end
  local lease_ms = tonumber(ARGV[6])
  redis.call('ZADD', KEYS[3], now + lease_ms, ARGV[5])
  redis.call('PEXPIRE', KEYS[3], lease_ms * 2)
end

for i = 1, 3 do balances[i] = balances[i] - costs[i] end
redis.call('HSET', KEYS[2], 'requests', tostring(balances[1]), 'requests:ts', stamps[1],
  'input_tokens', tostring(balances[2]), 'input_tokens:ts', stamps[2],
  'output_tokens', tostring(balances[3]), 'output_tokens:ts', stamps[3])

-- The token headers describe whichever token bucket is nearer its limit (smaller share left).
local t = 2
if caps[3] > 0 and (caps[2] <= 0 or balances[3] / caps[3] < balances[2] / caps[2]) then t = 3 end
return {0, caps[1], math.max(0, math.floor(balances[1])), ms_to_full(1, balances[1]),
  caps[t], math.max(0, math.floor(balances[t])), ms_to_full(t, balances[t]), costs[3]}
`;
