import { luaScript } from '@tollway/accounts';
import { LUA_ACTIVATE } from './scheduler.lua';

/**
 * Moves an idle or errored session to running with a new turn id, appends the user message and
 * queues the turn for its organization, all at once: an accepted turn is queued, never lost in
 * between. Of concurrent sends exactly one gets 'ok'. Clears `error`; keeps the last successful
 * `response` (shown again after a failed turn; hidden while running, rule 2). The organization's
 * weight and cap on running turns are stored with every send, so a changed limit applies from its
 * next send; an organization that had no turn waiting (or whose raised cap frees it) becomes ready.
 *
 * KEYS[1] session hash, KEYS[2] history list, KEYS[3] activity zset, KEYS[4] errored set,
 * KEYS[5] the organization's scheduler hash, KEYS[6] its queue
 * ARGV[1] key base, ARGV[2] session id, ARGV[3] caller's org ('' = none), ARGV[4] turn id,
 * ARGV[5] now (ms), ARGV[6] message JSON, ARGV[7] its length in bytes, ARGV[8] the most bytes a
 * history may hold, ARGV[9] the turn's job JSON, ARGV[10] the most turns the organization may have
 * waiting (0 = no limit), ARGV[11] its weight, ARGV[12] its cap on running turns (0 = none),
 * ARGV[13] the activity score of a running session, ARGV[14] the accepting API replica's id, put in
 * `waiters` so the turn's end is published on its channel ('' = none; see SessionEventHub), and in
 * `sent_on`: the replica of the session's previous send, when another, is told of the new turn
 * (`{ session_id, status: 'running', turn_id }` on its channel), since it may hold the previous
 * turn's end to answer long-polls from (SessionEventHub.recentEnd), ARGV[15] the events channel
 * returns { 'ok' }, { 'missing' } (absent or another org's), { 'busy' } (a turn is running),
 * { 'full' } (the message would take the history past ARGV[8]; sessions made before the count start
 * at 0) or { 'queue_full', waiting } (the organization has ARGV[10] turns waiting)
 */
export const startTurnScript = luaScript(
  `${LUA_ACTIVATE}
local base, sid, org, tid, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local s = redis.call('HMGET', KEYS[1], 'status', 'org', 'history_bytes', 'sent_on')
if not s[1] or s[2] ~= org then return { 'missing' } end
if s[1] == 'running' then return { 'busy' } end
local held = tonumber(s[3] or '0') + tonumber(ARGV[7])
if held > tonumber(ARGV[8]) then return { 'full' } end
local o = redis.call('HMGET', KEYS[5], 'waiting', 'running', 'cap', 'vt')
local waiting = tonumber(o[1] or '0')
local maxWaiting = tonumber(ARGV[10])
if maxWaiting > 0 and waiting >= maxWaiting then return { 'queue_full', waiting } end
local replica = ARGV[14] or ''
if s[4] and s[4] ~= '' and s[4] ~= replica then
  redis.call('PUBLISH', ARGV[15] .. ':' .. s[4], cjson.encode({ session_id = sid, status = 'running', turn_id = tid }))
end
if replica ~= '' then
  redis.call('HSET', KEYS[1], 'status', 'running', 'turn_id', tid, 'updated_at', now, 'history_bytes', held, 'job', ARGV[9],
    'waiters', replica, 'sent_on', replica)
else
  redis.call('HSET', KEYS[1], 'status', 'running', 'turn_id', tid, 'updated_at', now, 'history_bytes', held, 'job', ARGV[9],
    'sent_on', '')
end
if s[1] == 'error' then
  redis.call('HDEL', KEYS[1], 'error')
  redis.call('SREM', KEYS[4], sid)
end
redis.call('RPUSH', KEYS[2], ARGV[6])
redis.call('ZADD', KEYS[3], ARGV[13], sid)
redis.call('RPUSH', KEYS[6], sid .. ':' .. tid .. '|' .. ARGV[9])
local cap = tonumber(ARGV[12])
redis.call('HSET', KEYS[5], 'waiting', waiting + 1, 'weight', ARGV[11], 'cap', cap)
local running = tonumber(o[2] or '0')
local oldCap = tonumber(o[3] or '0')
local heldBack = oldCap > 0 and running >= oldCap
if (cap == 0 or running < cap) and (waiting == 0 or heldBack) then
  activate(base, org, tonumber(o[4] or '0'))
end
return { 'ok' }
`,
  'turn_start',
);
