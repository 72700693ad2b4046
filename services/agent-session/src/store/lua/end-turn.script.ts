import { luaScript } from '@tollway/accounts';
import { EVENT_LOG_LUA } from '../event-log-keys';
import { LUA_DEQUEUE, LUA_END_TURN, LUA_RELEASE_SLOT } from './scheduler.lua';

/**
 * Ends a turn wherever it stands, compare-and-set (see endTurn in scheduler.lua.ts): a waiting
 * turn leaves its organization's queue, an executing one gives its lease and running slot back.
 * What a worker retries with when ending its turn met a Redis outage (no claim then), and how the
 * tests play a worker.
 *
 * KEYS[1] session hash (declared; every key is under ARGV[1]'s hash tag)
 * ARGV[1] key base, ARGV[2] session id, ARGV[3] turn id, ARGV[4] the session's org ('' = none),
 * ARGV[5] now (ms), ARGV[6] events channel, ARGV[7] who ends it ('worker', 'reaper', 'api'),
 * ARGV[8] 'success' | 'error', ARGV[9] response JSON (success) or error message (error),
 * ARGV[10] ended-marker lifetime (ms), ARGV[11..] messages to append (success), one JSON message each,
 * and last the event log's three arguments (turnEndLogArgs: see EVENT_LOG_LUA), taken off first
 * returns { 'applied' | 'stale', 1 if this call released the turn's lease else 0 }
 */
export const endTurnScript = luaScript(
  `${LUA_RELEASE_SLOT}
${LUA_DEQUEUE}
${LUA_END_TURN}
${EVENT_LOG_LUA}
local pendingJson = table.remove(ARGV)
local logSettings = table.remove(ARGV)
local logMode = table.remove(ARGV)
local base, sid, tid, org = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local released = redis.call('ZREM', base .. 'leases', sid .. ':' .. tid .. ':' .. org)
if released == 1 then
  releaseSlot(base, org)
else
  local s = redis.call('HMGET', KEYS[1], 'turn_id', 'job')
  if s[1] == tid and s[2] then dequeue(base, org, sid .. ':' .. tid .. '|' .. s[2]) end
end
local result, readers = endTurn(base, sid, tid, ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV, 11)
if result == 'applied' then logTurnEnd(base, sid, tid, logMode, logSettings, pendingJson, readers) end
return { result, released }
`,
  'turn_end',
);
