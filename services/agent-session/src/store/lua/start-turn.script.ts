import { luaScript } from '@tollway/accounts';

/**
 * Moves an idle or errored session to running with a new turn id and appends the user message;
 * of concurrent sends exactly one gets 'ok'. Clears `error`; keeps the last successful `response`
 * (shown again after a failed turn; hidden while running, rule 2).
 *
 * KEYS[1] session hash, KEYS[2] history list, KEYS[3] activity zset, KEYS[4] running zset, KEYS[5] errored set
 * ARGV[1] session id, ARGV[2] caller's org ('' = none), ARGV[3] turn id, ARGV[4] now (ms), ARGV[5] message JSON,
 * ARGV[6] its length in bytes, ARGV[7] the most bytes a history may hold
 * returns 'ok', 'missing' (absent or another org's), 'busy' (a turn is running) or 'full' (the
 * message would take the history past ARGV[7]; sessions made before the count start at 0)
 */
export const startTurnScript = luaScript(
  `
local s = redis.call('HMGET', KEYS[1], 'status', 'org')
if not s[1] or s[2] ~= ARGV[2] then return 'missing' end
if s[1] == 'running' then return 'busy' end
local held = tonumber(redis.call('HGET', KEYS[1], 'history_bytes') or '0')
if held + tonumber(ARGV[6]) > tonumber(ARGV[7]) then return 'full' end
redis.call('HINCRBY', KEYS[1], 'history_bytes', ARGV[6])
redis.call('HSET', KEYS[1], 'status', 'running', 'turn_id', ARGV[3], 'started_at', ARGV[4], 'updated_at', ARGV[4])
redis.call('HDEL', KEYS[1], 'error')
redis.call('RPUSH', KEYS[2], ARGV[5])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[1])
redis.call('SREM', KEYS[5], ARGV[1])
return 'ok'
`,
  'turn_start',
);
