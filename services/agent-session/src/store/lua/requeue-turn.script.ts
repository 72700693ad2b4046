import { luaScript } from '@tollway/accounts';
import { LUA_RELEASE_SLOT } from './scheduler.lua';

/**
 * Hands a claimed turn that never started back to the front of its organization's queue (its
 * worker is shutting down): the lease and the running slot go, the turn waits again, first in
 * line. Nothing happens when the lease is gone already (a reaper took it) or the session no longer
 * runs the turn (deleted).
 *
 * KEYS[1] leases zset (declared; every key is under ARGV[1]'s hash tag)
 * ARGV[1] key base, ARGV[2] session id, ARGV[3] turn id, ARGV[4] org ('' = none)
 * returns 1 requeued, 0 not
 */
export const requeueTurnScript = luaScript(
  `${LUA_RELEASE_SLOT}
local base, sid, tid, org = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local member = sid .. ':' .. tid
if redis.call('ZREM', KEYS[1], member .. ':' .. org) == 0 then return 0 end
releaseSlot(base, org)
local s = redis.call('HMGET', base .. 's:' .. sid, 'status', 'turn_id', 'job')
if s[1] ~= 'running' or s[2] ~= tid or not s[3] then return 0 end
redis.call('LPUSH', base .. 'q:' .. org, member .. '|' .. s[3])
local key = base .. 'sched:' .. org
local o = redis.call('HMGET', key, 'waiting', 'running', 'cap', 'vt')
local waiting = tonumber(o[1] or '0')
redis.call('HSET', key, 'waiting', waiting + 1)
local cap = tonumber(o[3] or '0')
if waiting == 0 and (cap == 0 or tonumber(o[2] or '0') < cap) then activate(base, org, tonumber(o[4] or '0')) end
return 1
`,
  'turn_requeue',
);
