import { luaScript } from '@tollway/accounts';

/**
 * Reads a session for a long-poll and, while a turn runs, registers the calling API replica among
 * the session's `waiters`, so the turn's end is published on that replica's channel (see endTurn
 * in scheduler.lua.ts and SessionEventHub): one round trip, as the plain read was. The turn's end
 * clears the list; a replica already on it is not added again.
 *
 * KEYS[1] session hash
 * ARGV[1] caller's org ('' = none), ARGV[2] the replica's id (no spaces)
 * returns { status, turn_id, response, error } (status false: absent or another org's)
 */
export const watchSessionScript = luaScript(
  `
local s = redis.call('HMGET', KEYS[1], 'status', 'org', 'turn_id', 'response', 'error', 'waiters')
if not s[1] or s[2] ~= ARGV[1] then return { false } end
if s[1] == 'running' then
  local waiters = s[6] or ''
  if not string.find(' ' .. waiters .. ' ', ' ' .. ARGV[2] .. ' ', 1, true) then
    if waiters == '' then waiters = ARGV[2] else waiters = waiters .. ' ' .. ARGV[2] end
    redis.call('HSET', KEYS[1], 'waiters', waiters)
  end
end
return { s[1], s[3], s[4], s[5] }
`,
  'session_watch',
);
