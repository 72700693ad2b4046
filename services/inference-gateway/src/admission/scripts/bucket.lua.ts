/**
 * Lua shared by the admit, settle and return scripts: token-bucket refill and the quota slices
 * replicas hold (see ../local-quota.ts). Prepended to each script's source.
 *
 * A slice is a share of an organization's three buckets (and an allowance of its credit) that one
 * replica took out to admit requests without a round trip. Its tokens count as still in the
 * bucket until used: a bucket refills only up to its capacity minus what live slices hold, so
 * bucket and slices together never exceed the per-minute budget. A slice lives in the
 * organization's slices hash until its replica gives it back (return.lua) or it expires (the
 * replica died or lost Redis): then it is dropped here, and whatever it still held counts as used.
 */
export const BUCKET_LUA = `
-- Live slices of an organization: field = slice id, value = 'requests|input|output|usd|expiry_ms'.
-- Drops expired ones; returns what the live ones hold: {requests, input, output, usd}.
local function held_by_slices(slices_key, now)
  local held = {0, 0, 0, 0}
  local entries = redis.call('HGETALL', slices_key)
  for j = 1, #entries, 2 do
    local r, i, o, usd, exp = string.match(entries[j + 1], '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$')
    exp = tonumber(exp)
    if exp == nil or exp <= now then
      redis.call('HDEL', slices_key, entries[j])
    else
      held[1] = held[1] + (tonumber(r) or 0)
      held[2] = held[2] + (tonumber(i) or 0)
      held[3] = held[3] + (tonumber(o) or 0)
      held[4] = held[4] + (tonumber(usd) or 0)
    end
  end
  return held
end

-- A bucket brought up to now: refilled at cap/60000 per ms since its stamp, up to cap minus what
-- slices hold. A missing balance or stamp is a bucket never used (or forgotten): full.
-- Returns the balance and the stamp to store; a replica whose clock lags never rewinds the stamp
-- (that would refill twice).
local function refilled(balance, ts, cap, held, now)
  local top = cap - held
  if balance == nil or ts == nil then return top, now end
  if now > ts and cap > 0 then balance = balance + (now - ts) * cap / 60000 end
  if balance > top then balance = top end
  return balance, math.max(now, ts)
end

-- Adds amounts {requests, input, output} (negative: charges more) to an organization's three
-- buckets, refilled first and capped at the budget minus what live slices hold, in one HSET. A
-- forgotten bucket is full: a charge starts from full, a refund leaves it so.
local bucket_names = {'requests', 'input_tokens', 'output_tokens'}
local function add_to_buckets(bucket_key, slices_key, caps, amounts, now)
  if amounts[1] == 0 and amounts[2] == 0 and amounts[3] == 0 then return end
  local state = redis.call('HMGET', bucket_key, 'requests', 'requests:ts', 'input_tokens', 'input_tokens:ts',
    'output_tokens', 'output_tokens:ts')
  local held = held_by_slices(slices_key, now)
  local updates = {}
  for i = 1, 3 do
    local amount = amounts[i]
    local balance = tonumber(state[2 * i - 1])
    local ts = tonumber(state[2 * i])
    if amount ~= 0 and balance ~= nil and ts ~= nil then
      balance, ts = refilled(balance, ts, caps[i], held[i], now)
      balance = math.min(caps[i] - held[i], balance + amount)
    elseif amount < 0 then
      balance, ts = caps[i] - held[i] + amount, now
    else
      balance = nil
    end
    if balance ~= nil then
      table.insert(updates, bucket_names[i])
      table.insert(updates, tostring(balance))
      table.insert(updates, bucket_names[i] .. ':ts')
      table.insert(updates, ts)
    end
  end
  if #updates > 0 then redis.call('HSET', bucket_key, unpack(updates)) end
end
`;
