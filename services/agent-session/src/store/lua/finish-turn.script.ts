import { luaScript } from '@tollway/accounts';
import { EVENT_LOG_LUA } from '../event-log-keys';
import { LUA_CLAIM_TURNS, LUA_END_TURN } from './scheduler.lua';

/**
 * A worker ends the turn it ran, in one step: releases the turn's lease, ends the turn
 * compare-and-set (see endTurn in scheduler.lua.ts), gives the organization's running slot back and
 * claims up to ARGV[10] next turns (see claimTurns), so a busy worker goes from one turn to the next
 * in one round trip. Redis runs it whole, so no one sees the lease gone and the turn still running.
 *
 * KEYS[1] session hash, KEYS[2] leases zset (declared; every key is under ARGV[1]'s hash tag)
 * ARGV[1] key base, ARGV[2] session id, ARGV[3] turn id, ARGV[4] org ('' = none), ARGV[5] now (ms),
 * ARGV[6] events channel, ARGV[7] 'success' | 'error', ARGV[8] response JSON (success) or error
 * message (error), ARGV[9] ended-marker lifetime (ms), ARGV[10] turns to claim next,
 * ARGV[11] lease lifetime (ms), ARGV[12..] messages to append (success), one JSON message each,
 * and last the event log's three arguments (turnEndLogArgs: see EVENT_LOG_LUA), taken off first
 * returns { 'applied' | 'stale', 1 if this call released the lease else 0, { claimed turns… } } (see claim-turns)
 */
export const finishTurnScript = luaScript(
  `${LUA_CLAIM_TURNS}
${LUA_END_TURN}
${EVENT_LOG_LUA}
local pendingJson = table.remove(ARGV)
local logSettings = table.remove(ARGV)
local logMode = table.remove(ARGV)
local base, sid, tid, org = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local released = redis.call('ZREM', base .. 'leases', sid .. ':' .. tid .. ':' .. org)
local result, readers = endTurn(base, sid, tid, ARGV[5], ARGV[6], 'worker', ARGV[7], ARGV[8], ARGV[9], ARGV, 12)
if result == 'applied' then logTurnEnd(base, sid, tid, logMode, logSettings, pendingJson, readers) end
local releasing = nil
if released == 1 then releasing = org end
return { result, released, claimTurns(base, tonumber(ARGV[10]), tonumber(ARGV[11]), false, releasing) }
`,
  'turn_finish',
);
