import { IDEMPOTENCY_RECORD_LUA } from './idempotency-record.lua';

/**
 * Updates an existing organization; never creates one (so an update racing a delete is a no-op).
 * With an idempotency record (KEYS[2]) an update is applied once: the record, kept ARGV[7]
 * seconds, holds the fingerprint of the update that made it, and a later update under the same
 * record changes nothing. Record and update are written together, so an answer lost after the
 * update leaves both.
 *
 * KEYS[1]  the organization hash ({org:<id>}:org)
 * KEYS[2]  optional: the idempotency record ({org:<id>}:idempotency:<SHA-256 of the key>)
 * ARGV[1]  new name, or '' to keep it
 * ARGV[2]  budget_requests, ARGV[3] budget_input_tokens, ARGV[4] budget_output_tokens: '' keeps
 * ARGV[5]  credit to add in USD (may be negative), or '' for none
 * ARGV[6]  with KEYS[2]: the update's fingerprint; ARGV[7] how long the record is kept, seconds
 * ARGV[8]  the largest credit balance either way (CREDIT_LIMIT): a top-up that would take the
 *          balance past it changes nothing
 * ARGV[9…] the session limits, in pairs: field name (`limit_sessions`…), value: decimal digits to
 *          set it, 'default' to remove the field (back to the session service's default), '' keeps
 * Returns  1 when updated, 0 when there is no such organization, 2 when the record holds this
 *          update (applied before: nothing changed now), 3 when it holds another update, 4 when the
 *          top-up would take the credit past ±ARGV[8] (nothing changed, no record written).
 */
export const UPDATE_ORG_LUA = `${IDEMPOTENCY_RECORD_LUA}
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local before = made_before(KEYS[2], ARGV[6])
if before then return before end
if ARGV[5] ~= '' then
  local after = tonumber(redis.call('HGET', KEYS[1], 'credit') or '0') + tonumber(ARGV[5])
  if after > tonumber(ARGV[8]) or after < -tonumber(ARGV[8]) then return 4 end
end
if KEYS[2] then redis.call('SET', KEYS[2], ARGV[6], 'EX', ARGV[7]) end
if ARGV[1] ~= '' then redis.call('HSET', KEYS[1], 'name', ARGV[1]) end
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'budget_requests', ARGV[2]) end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'budget_input_tokens', ARGV[3]) end
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'budget_output_tokens', ARGV[4]) end
if ARGV[5] ~= '' then redis.call('HINCRBYFLOAT', KEYS[1], 'credit', ARGV[5]) end
for i = 9, #ARGV, 2 do
  local value = ARGV[i + 1]
  if value == 'default' then redis.call('HDEL', KEYS[1], ARGV[i])
  elseif value ~= '' then redis.call('HSET', KEYS[1], ARGV[i], value) end
end
return 1
`;
