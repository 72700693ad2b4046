import { luaScript } from '@tollway/accounts';
import { APPEND_LUA } from '../event-log-keys';

/**
 * Removes a session and every trace of it (hash, history, index entries) at once. In 'delete'
 * mode a running turn is cancelled: `{ session_id, turn_id }` goes out on the cancel channel.
 * In 'sweep' mode (the TTL sweeper) the session is kept unless it is idle or errored and its
 * last activity is at or before the cutoff; an index entry without a session is dropped.
 *
 * KEYS[1] session hash, KEYS[2] history list, KEYS[3] activity zset, KEYS[4] running zset, KEYS[5] org index zset,
 * KEYS[6] errored set
 * ARGV[1] session id, ARGV[2] org ('' = none), ARGV[3] events channel, ARGV[4] cancel channel,
 * ARGV[5] 'delete' | 'sweep', ARGV[6] sweep cutoff (ms, sweep mode only)
 * KEYS[7], KEYS[8] and ARGV[7..9]: the session's event stream, see the block at the end
 * returns 'deleted', 'missing' (absent or another org's) or 'kept' (sweep mode: not expired)
 */
export const deleteSessionScript = luaScript(
  `${APPEND_LUA}
local s = redis.call('HMGET', KEYS[1], 'status', 'org', 'turn_id')
if not s[1] then
  if ARGV[5] == 'sweep' then
    redis.call('ZREM', KEYS[3], ARGV[1])
    redis.call('SREM', KEYS[6], ARGV[1])
  end
  return 'missing'
end
if s[2] ~= ARGV[2] then return 'missing' end
if ARGV[5] == 'sweep' then
  if s[1] == 'running' then return 'kept' end
  local last = redis.call('ZSCORE', KEYS[3], ARGV[1])
  if not last or tonumber(last) > tonumber(ARGV[6]) then return 'kept' end
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('SREM', KEYS[6], ARGV[1])
if s[1] == 'running' and s[3] then
  redis.call('PUBLISH', ARGV[4], cjson.encode({ session_id = ARGV[1], turn_id = s[3] }))
end
redis.call('PUBLISH', ARGV[3], cjson.encode({ session_id = ARGV[1], status = 'deleted' }))
-- Event stream (issue 36; src/streaming/). KEYS[7] the session's event log, KEYS[8] its watch key;
-- ARGV[7] most entries kept, ARGV[8] how long the log stays once the session is gone (ms: long
-- enough for connected readers to read this last event), ARGV[9] the error a cancelled turn's
-- webhook carries. When the session has readers or a log, turn.cancelled (of the running turn, or
-- with turn_id null) ends the log, in the step that deletes the session.
if redis.call('EXISTS', KEYS[7], KEYS[8]) > 0 then
  local turn = ''
  local turn_json = 'null'
  if s[1] == 'running' and s[3] then
    turn = s[3]
    turn_json = cjson.encode(s[3])
  end
  append(KEYS[7], ARGV[7], 'turn.cancelled', turn, s[2], last_id(KEYS[7]), '',
    '{"type":"turn.cancelled","session_id":' .. cjson.encode(ARGV[1]) .. ',"turn_id":' .. turn_json ..
    ',"error":' .. cjson.encode(ARGV[9]) .. '}')
  redis.call('PEXPIRE', KEYS[7], ARGV[8])
  redis.call('DEL', KEYS[8])
end
return 'deleted'
`,
  'session_delete',
);
