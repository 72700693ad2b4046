/**
 * Settlement of one admitted request, in one round trip: corrects the token buckets to the
 * actual usage (refunding the unused output reservation, or charging beyond it), charges the
 * spend against credit, records usage for the usage API, and frees the capacity lease.
 * A release (the engine was never reached) refunds everything and records nothing.
 *
 * KEYS[1]  organization hash        {org:<id>}:org
 * KEYS[2]  bucket hash              {org:<id>}:buckets
 * KEYS[3]  model lease zset         {model:<id>}:leases
 * KEYS[4]  usage hash of this minute {org:<id>}:usage:<epoch minute>
 * ARGV[1]  now, ms since the epoch
 * ARGV[2]  input tokens taken at admission     ARGV[3] output tokens reserved at admission
 * ARGV[4]  actual input tokens                 ARGV[5] actual output tokens
 * ARGV[6]  USD per million input tokens        ARGV[7] USD per million output tokens
 * ARGV[8]  lease id, or '' when the model has no capacity limit
 * ARGV[9]  model id (usage field prefix)
 * ARGV[10] usage retention, seconds
 * ARGV[11] '1' to settle, '0' to release
 * Returns  the spend charged, as a string (USD); '0' for a release or a deleted organization.
 *
 * Redis Cluster: KEYS[3] lives in the model's slot; see admit.lua.ts.
 */
export const SETTLE_LUA = `
local now = tonumber(ARGV[1])
if ARGV[8] ~= '' then redis.call('ZREM', KEYS[3], ARGV[8]) end

local org = redis.call('HMGET', KEYS[1], 'budget_requests', 'budget_input_tokens', 'budget_output_tokens')
if not org[1] then return '0' end

local settle = ARGV[11] == '1'
local used_in = settle and tonumber(ARGV[4]) or 0
local used_out = settle and tonumber(ARGV[5]) or 0
local names = {'requests', 'input_tokens', 'output_tokens'}
local caps = {tonumber(org[1]) or 0, tonumber(org[2]) or 0, tonumber(org[3]) or 0}
-- What goes back into each bucket: the reservation minus what was really used (negative = charge more).
local refunds = {settle and 0 or 1, tonumber(ARGV[2]) - used_in, tonumber(ARGV[3]) - used_out}
local state = redis.call('HMGET', KEYS[2], 'requests', 'requests:ts', 'input_tokens', 'input_tokens:ts',
  'output_tokens', 'output_tokens:ts')
local updates = {}
for i = 1, 3 do
  if refunds[i] ~= 0 then
    local balance = tonumber(state[2 * i - 1])
    local ts = tonumber(state[2 * i])
    if balance ~= nil and ts ~= nil then
      if now > ts and caps[i] > 0 then balance = math.min(caps[i], balance + (now - ts) * caps[i] / 60000) end
      balance = math.min(caps[i], balance + refunds[i])
      ts = math.max(now, ts)
    elseif refunds[i] < 0 then
      -- The bucket was full and forgotten: start it full, then charge.
      balance = caps[i] + refunds[i]
      ts = now
    end
    if balance ~= nil then
      table.insert(updates, names[i])
      table.insert(updates, tostring(balance))
      table.insert(updates, names[i] .. ':ts')
      table.insert(updates, ts)
    end
  end
end
if #updates > 0 then redis.call('HSET', KEYS[2], unpack(updates)) end
if not settle then return '0' end

local spend = (used_in * tonumber(ARGV[6]) + used_out * tonumber(ARGV[7])) / 1000000
if spend > 0 then redis.call('HINCRBYFLOAT', KEYS[1], 'credit', -spend) end

local model = ARGV[9] .. '|'
redis.call('HINCRBY', KEYS[4], 'requests', 1)
redis.call('HINCRBY', KEYS[4], 'input_tokens', used_in)
redis.call('HINCRBY', KEYS[4], 'output_tokens', used_out)
redis.call('HINCRBYFLOAT', KEYS[4], 'spend', spend)
redis.call('HINCRBY', KEYS[4], model .. 'requests', 1)
redis.call('HINCRBY', KEYS[4], model .. 'input_tokens', used_in)
redis.call('HINCRBY', KEYS[4], model .. 'output_tokens', used_out)
redis.call('HINCRBYFLOAT', KEYS[4], model .. 'spend', spend)
redis.call('EXPIRE', KEYS[4], tonumber(ARGV[10]))
return tostring(spend)
`;
