import { luaScript } from '@tollway/accounts';

/**
 * Creates an idle session unless the id exists, the service's cap is reached, or the
 * organization's own cap is. The session count is ZCARD(activity): every session is in it (a
 * running one at the running score); an organization's is ZCARD of its index.
 *
 * KEYS[1] session hash, KEYS[2] history list, KEYS[3] activity zset, KEYS[4] org index zset
 * ARGV[1] session id, ARGV[2] org ('' = none), ARGV[3] now (ms), ARGV[4] max sessions,
 * ARGV[5] bytes of the preloaded history, ARGV[6] the organization's most sessions (0 = no cap of its own),
 * ARGV[7..] preloaded history, one JSON message each
 * returns 1 created, 0 id exists, -1 the service's cap reached, -2 the organization's cap reached
 */
export const createSessionScript = luaScript(
  `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[4]) then return -1 end
local orgCap = tonumber(ARGV[6])
if orgCap > 0 and redis.call('ZCARD', KEYS[4]) >= orgCap then return -2 end
redis.call('HSET', KEYS[1], 'status', 'idle', 'org', ARGV[2], 'created_at', ARGV[3], 'updated_at', ARGV[3],
  'history_bytes', ARGV[5], 'readers', '0')
for i = 7, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[1])
return 1
`,
  'session_create',
);
