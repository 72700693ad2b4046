import { luaScript } from '@tollway/accounts';
import { EVENT_LOG_LUA } from '../event-log-keys';
import { LUA_END_TURN, LUA_REDIS_NOW, LUA_RELEASE_SLOT } from './scheduler.lua';

/**
 * Claims up to ARGV[2] turns whose lease expired (their worker stopped heartbeating: killed,
 * crashed, cut off) and ends each in one step: the lease goes, the organization's running slot is
 * given back, and the turn ends in error compare-and-set with ARGV[5] as its message (a turn whose
 * session was deleted meanwhile is not ended: it is gone). Atomic, so of several reapers exactly
 * one takes each turn, and no turn is left running without a lease in between.
 *
 * KEYS[1] leases zset (declared; every key is under ARGV[1]'s hash tag)
 * ARGV[1] key base, ARGV[2] most leases to claim, ARGV[3] events channel, ARGV[4] ended-marker
 * lifetime (ms), ARGV[5] the error message of a reaped turn, ARGV[6] the event log's settings
 * (turnEndLogSettings: see EVENT_LOG_LUA)
 * returns { { session id, turn id, 'ended' | 'deleted', the turn's job JSON or false }, … }: 'ended'
 * = ended in error now (its job read before the end cleared it), 'deleted' = its session was
 * deleted while its worker was gone (the job the deletion kept, if still there)
 */
export const reapTurnsScript = luaScript(
  `${LUA_REDIS_NOW}
${LUA_RELEASE_SLOT}
${LUA_END_TURN}
${EVENT_LOG_LUA}
local base = ARGV[1]
local now = redisNow()
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, member in ipairs(expired) do
  redis.call('ZREM', KEYS[1], member)
  local first = string.find(member, ':', 1, true)
  local second = string.find(member, ':', first + 1, true)
  local sid = string.sub(member, 1, first - 1)
  local tid = string.sub(member, first + 1, second - 1)
  releaseSlot(base, string.sub(member, second + 1))
  local job = redis.call('HGET', base .. 's:' .. sid, 'job')
  local result, readers = endTurn(base, sid, tid, now, ARGV[3], 'reaper', 'error', ARGV[5], ARGV[4], {}, 1)
  if result == 'applied' then
    logTurnEnd(base, sid, tid, 'check', ARGV[6], '[]', readers)
    out[#out + 1] = { sid, tid, 'ended', job }
  else
    out[#out + 1] = { sid, tid, 'deleted', redis.call('GET', base .. 'cancelled:' .. tid) }
  end
end
return out
`,
  'turn_reap',
);
