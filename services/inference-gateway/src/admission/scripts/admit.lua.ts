/**
 * Admission of a batch of chat completions, in one round trip, each in turn exactly as if it came
 * alone (AdmitBatcher sends together the admissions of one event-loop turn): credit, the
 * organization's three token buckets, then the model's capacity lease. Nothing is taken for a
 * request unless everything admits it.
 *
 * Buckets hold `capacity = per-minute budget` tokens and refill continuously at budget/60 000 per
 * ms; a missing bucket is full. Balances are stored with the time they were computed at, and
 * brought up to date lazily here and in settle.lua.
 *
 * Per request i (1-based), three KEYS:
 * KEYS[3i-2]  organization hash        {org:<id>}:org
 * KEYS[3i-1]  bucket hash              {org:<id>}:buckets   fields <kind>, <kind>:ts
 * KEYS[3i]    model lease zset         {model:<id>}:leases  member = lease id, score = expiry (ms)
 * ARGV[1]     now, ms since the epoch (the caller's clock, injectable in tests)
 * and six ARGV from ARGV[6i-4]:
 *   input tokens of the request; output tokens reserved;
 *   model capacity (concurrent requests), or -1 for unlimited (the lease zset untouched);
 *   lease id; lease time, ms;
 *   '1' when the output reservation is the gateway's default (the client set no max_tokens):
 *   it is then capped at the output budget, so such a request is never refused as too large
 * Returns  one reply per request, in order:
 *          {0, limit_req, remaining_req, reset_req_ms, limit_tok, remaining_tok, reset_tok_ms,
 *           output_reserved}  admitted
 *          {1, bucket_index (1 requests, 2 input_tokens, 3 output_tokens), retry_ms, never_fits 0|1, budget}
 *          {2}   out of credit
 *          {3}   model at capacity
 *          {-1}  no such organization
 *
 * Redis Cluster: the lease zset lives in the model's slot, not the organization's. This script is
 * meant for a single Redis (standalone or Sentinel), which is what the gateway supports; see the README.
 */
export const ADMIT_LUA = `
local now = tonumber(ARGV[1])

local function admit(org_key, bucket_key, lease_key, input, output, capacity_arg, lease_id, lease_ms_arg, is_default)
  local org = redis.call('HMGET', org_key, 'budget_requests', 'budget_input_tokens', 'budget_output_tokens', 'credit')
  if not org[1] then return {-1} end
  if (tonumber(org[4]) or 0) <= 0 then return {2} end

  local caps = {tonumber(org[1]) or 0, tonumber(org[2]) or 0, tonumber(org[3]) or 0}
  local costs = {1, tonumber(input), tonumber(output)}
  if is_default == '1' and costs[3] > caps[3] then costs[3] = caps[3] end
  local state = redis.call('HMGET', bucket_key, 'requests', 'requests:ts', 'input_tokens', 'input_tokens:ts',
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

  local capacity = tonumber(capacity_arg)
  if capacity >= 0 then
    redis.call('ZREMRANGEBYSCORE', lease_key, '-inf', now)
    if redis.call('ZCARD', lease_key) >= capacity then return {3} end
    local lease_ms = tonumber(lease_ms_arg)
    redis.call('ZADD', lease_key, now + lease_ms, lease_id)
    redis.call('PEXPIRE', lease_key, lease_ms * 2)
  end

  for i = 1, 3 do balances[i] = balances[i] - costs[i] end
  redis.call('HSET', bucket_key, 'requests', tostring(balances[1]), 'requests:ts', stamps[1],
    'input_tokens', tostring(balances[2]), 'input_tokens:ts', stamps[2],
    'output_tokens', tostring(balances[3]), 'output_tokens:ts', stamps[3])

  -- The token headers describe whichever token bucket is nearer its limit (smaller share left).
  local t = 2
  if caps[3] > 0 and (caps[2] <= 0 or balances[3] / caps[3] < balances[2] / caps[2]) then t = 3 end
  return {0, caps[1], math.max(0, math.floor(balances[1])), ms_to_full(1, balances[1]),
    caps[t], math.max(0, math.floor(balances[t])), ms_to_full(t, balances[t]), costs[3]}
end

local replies = {}
for i = 1, #KEYS / 3 do
  local a = 6 * i - 4
  replies[i] = admit(KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i], ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3],
    ARGV[a + 4], ARGV[a + 5])
end
return replies
`;
